"""fairseq_luong: a fairseq ``--user-dir`` plugin.

Luong, Pham & Manning (2015) global and local attention, Bahdanau et al.
(2014) RNNsearch, and perSPE (Oka et al. 2022) for fairseq.

Importing the package registers its models, tasks and criterions and
allowlists the globals fairseq checkpoints hold, so checkpoints load under
torch's ``weights_only=True`` default.
"""
from .safe_checkpoints import allowlist_fairseq_checkpoint_globals

allowlist_fairseq_checkpoint_globals()

from . import checkpoint_errors  # noqa: E402,F401
from . import fairseq_fixes  # noqa: E402,F401
from . import criterions  # noqa: E402,F401
from . import models  # noqa: E402,F401
from . import modules  # noqa: E402,F401
from . import tasks  # noqa: E402,F401
