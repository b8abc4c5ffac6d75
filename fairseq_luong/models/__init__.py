"""Models of fairseq_luong. Each file registers one model and its named architectures."""
from . import luong_lstm, rnnsearch, transformer_perspe  # noqa: F401
