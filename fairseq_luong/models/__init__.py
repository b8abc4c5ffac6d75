"""Models of fairseq_luong. Each file registers one model and its named architectures."""
from . import luong_lstm  # noqa: F401
from . import rnnsearch  # noqa: F401
from . import transformer_perspe  # noqa: F401
