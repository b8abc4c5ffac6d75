"""Learning-rate schedulers of fairseq_luong (imported explicitly by the package)."""
from . import reduce_lr_on_plateau_until_flat  # noqa: F401
