"""fairseq_luong: a fairseq ``--user-dir`` plugin.

Luong, Pham & Manning (2015) global and local attention, Bahdanau et al. (2014) RNNsearch, and
perSPE (Oka et al. 2022) for fairseq.

With fairseq, the package applies the fixes of fairseq (``fairseq_fixes``, a package of its own,
usable without the plugin), then its own checks of fairseq's behaviour (``fairseq_patches``: one
ordered list), and registers what it adds at fairseq's extension points: models, criterions and
tasks (their ``modules`` and ``data`` come with them). That happens when the package is imported
after fairseq (as ``--user-dir`` does), or, when it is imported first, as soon as fairseq is
imported: so a tool that reads text (``data.text``), fairseq-generate output
(``analysis.generate_output``) or fairseq-train logs (``analysis.training_log``) loads neither
fairseq nor torch, and registration still happens before fairseq can look for the plugin's
names. ``analysis`` holds the research tools' library code; the plugin itself does not import
it.
"""
import importlib

import fairseq_fixes  # the fixes of fairseq apply first, once fairseq is imported
from fairseq_fixes.importing import after_fairseq, keeping_root_logger

# What register() imports, in this order: the patches first (applied at once), then what
# registers at fairseq's extension points. examples/common/code_version.py reads this list:
# it is the code that training with --user-dir runs (with fairseq_fixes, imported above).
PLUGIN_MODULES = ("fairseq_patches", "criterions", "models", "modules", "optim", "tasks")

_state = {"registered": False}


def register():
    """Apply the fixes and the plugin's patches to fairseq and register the models, criterions
    and tasks (once)."""
    if _state["registered"]:
        return
    _state["registered"] = True
    # what they import configures the root logger too: fairseq.tasks.text_to_speech, and the
    # fairseq_cli modules that patches change
    keeping_root_logger(_import_and_apply)


def _import_and_apply():
    fairseq_fixes.apply()
    patches, *_ = [importlib.import_module(f"{__name__}.{name}") for name in PLUGIN_MODULES]
    patches.apply_all()


# at once when fairseq is imported already (--user-dir), else as soon as it is and no module of
# this package is half-loaded (a module such as modules/luong/encoder.py imports fairseq in its
# first lines, and the models that register() imports need that module whole)
after_fairseq(register, package=__name__)
