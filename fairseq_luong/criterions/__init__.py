"""criterions of fairseq_luong (imported explicitly by the package)."""
from . import fused_label_smoothed_cross_entropy, perspe_label_smoothed_cross_entropy  # noqa: F401
