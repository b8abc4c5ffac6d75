"""tasks of fairseq_luong (imported explicitly by the package)."""
from . import translation_chunks  # noqa: F401
