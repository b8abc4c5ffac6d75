"""fairseq_luong: a fairseq ``--user-dir`` plugin.

Luong, Pham & Manning (2015) global and local attention, Bahdanau et al.
(2014) RNNsearch, and perSPE (Oka et al. 2022) for fairseq.

With fairseq, the package applies its changes to fairseq's own behaviour
(``fairseq_patches``: one ordered list) and registers what it adds at fairseq's
extension points: models, criterions and tasks (their ``modules`` and ``data``
come with them). That happens when the package is imported after fairseq (as
``--user-dir`` does), or, when it is imported first, as soon as fairseq is
imported: so a tool that reads text (``data.text``), fairseq-generate output
(``analysis.generate_output``) or fairseq-train logs (``analysis.training_log``)
loads neither fairseq nor torch, and registration still happens before fairseq
can look for the plugin's names. ``analysis`` holds the research tools' library
code; the plugin itself does not import it.
"""
import importlib
import importlib.abc
import importlib.machinery
import sys

# What register() imports, in this order: the patches first (applied at once), then what
# registers at fairseq's extension points. examples/common/code_version.py reads this list:
# it is the code that training with --user-dir runs.
PLUGIN_MODULES = ("fairseq_patches", "criterions", "models", "modules", "tasks")


def register():
    """Apply the patches to fairseq and register the models, criterions and tasks (once)."""
    patches, *_ = [importlib.import_module(f"{__name__}.{name}") for name in PLUGIN_MODULES]
    patches.apply_all()


class _ThenRegister(importlib.abc.Loader):
    """fairseq's own loader, then :func:`register`."""

    def __init__(self, loader):
        self.loader = loader

    def create_module(self, spec):
        return self.loader.create_module(spec)

    def exec_module(self, module):
        self.loader.exec_module(module)
        register()


class _RegisterWhenFairseqIsImported(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname, path, target=None):
        if fullname != "fairseq":
            return None
        sys.meta_path.remove(self)  # once
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is not None and spec.loader is not None:
            spec.loader = _ThenRegister(spec.loader)
        return spec


if "fairseq" in sys.modules:
    register()
else:
    sys.meta_path.insert(0, _RegisterWhenFairseqIsImported())
