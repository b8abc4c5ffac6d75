"""Models of fairseq_luong. Each file registers one model and its named architectures;
``hub_interface.py`` is what their ``from_pretrained`` returns (the Python interface)."""
from . import luong_lstm, rnnsearch, transformer_perspe  # noqa: F401
from .hub_interface import TranslationHubInterface  # noqa: F401
from .luong_lstm import LuongLSTMModel  # noqa: F401
from .rnnsearch import RNNsearchModel  # noqa: F401
from .transformer_perspe import TransformerPerSPEModel  # noqa: F401
