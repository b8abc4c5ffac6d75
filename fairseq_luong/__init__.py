"""fairseq_luong: a fairseq ``--user-dir`` plugin.

Luong, Pham & Manning (2015) global and local attention, Bahdanau et al.
(2014) RNNsearch, and perSPE (Oka et al. 2022) for fairseq.

Importing the package registers its models, tasks and criterions,
allowlists the globals fairseq checkpoints hold (so checkpoints load under
torch's ``weights_only=True`` default), and applies the fixes to fairseq
listed in the README ("What importing the plugin changes in fairseq"), one
module each.
"""
from .safe_checkpoints import allowlist_fairseq_checkpoint_globals
from .user_errors import install_excepthook

allowlist_fairseq_checkpoint_globals()
install_excepthook()

from . import checkpoint_errors  # noqa: E402,F401
from . import input_errors  # noqa: E402,F401
from . import model_overrides  # noqa: E402,F401
from . import fairseq_fixes  # noqa: E402,F401
from . import microbatch_seeds  # noqa: E402,F401
from . import precision  # noqa: E402,F401
from . import torchrun  # noqa: E402,F401
from . import interactive_long_lines  # noqa: E402,F401
from . import length_limit  # noqa: E402,F401
from . import unk_replacement  # noqa: E402,F401
from . import criterions  # noqa: E402,F401
from . import models  # noqa: E402,F401
from . import modules  # noqa: E402,F401
from . import tasks  # noqa: E402,F401
