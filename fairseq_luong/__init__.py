"""fairseq_luong: a fairseq ``--user-dir`` plugin.

Luong, Pham & Manning (2015) global and local attention, Bahdanau et al.
(2014) RNNsearch, and perSPE (Oka et al. 2022) for fairseq.

Importing the package applies its changes to fairseq's own behaviour
(``fairseq_patches``: one ordered list) and registers what it adds at fairseq's
extension points: models, criterions and tasks (their ``modules`` and ``data``
come with them). ``analysis`` holds the research tools' library code; the
plugin itself does not import it.
"""
from .fairseq_patches import apply_all

apply_all()

from . import criterions  # noqa: E402,F401
from . import models  # noqa: E402,F401
from . import modules  # noqa: E402,F401
from . import tasks  # noqa: E402,F401
