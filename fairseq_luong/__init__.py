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
PLUGIN_MODULES = ("fairseq_patches", "criterions", "models", "modules", "optim", "tasks")

_state = {"fairseq": False, "registered": False, "loading": 0}


def register():
    """Apply the patches to fairseq and register the models, criterions and tasks (once)."""
    if _state["registered"]:
        return
    _state["registered"] = True
    # what they import configures the root logger too: fairseq.tasks.text_to_speech, and the
    # fairseq_cli modules that patches change
    keeping_root_logger(_import_and_apply)


def _import_and_apply():
    patches, *_ = [importlib.import_module(f"{__name__}.{name}") for name in PLUGIN_MODULES]
    patches.apply_all()


def _register_when_ready():
    """Register once fairseq is imported and no module of this package is half-loaded: a
    module such as ``modules/luong_encoder.py`` imports fairseq in its first lines, and the
    models that register() imports need that module whole."""
    if _state["fairseq"] and not _state["loading"] and not _state["registered"]:
        sys.meta_path[:] = [f for f in sys.meta_path if not isinstance(f, _Watch)]
        register()


def keeping_root_logger(run, *args):
    """``run(*args)`` with ``logging.basicConfig`` doing nothing, and the root logger's level and
    handlers as they were before it afterwards. Importing fairseq configures the root logger
    (ve-fairseq's ``models/wav2vec/wav2vec2_classification.py`` calls
    ``logging.basicConfig(level=DEBUG)``, ``tasks/text_to_speech.py`` logs at INFO through its
    own), so that every library's debug records would print in a Python session. fairseq's
    command-line tools import fairseq before the plugin and set their own logging; this
    applies where the plugin imports fairseq first."""
    import logging

    root = logging.getLogger()
    level, handlers, basic_config = root.level, list(root.handlers), logging.basicConfig
    logging.basicConfig = lambda *a, **k: None
    try:
        return run(*args)
    finally:
        logging.basicConfig = basic_config
        for handler in [h for h in root.handlers if h not in handlers]:
            root.removeHandler(handler)
        root.setLevel(level)


class _Loader(importlib.abc.Loader):
    """A module's own loader, then a look at whether the plugin can be registered now."""

    def __init__(self, loader, is_fairseq):
        self.loader, self.is_fairseq = loader, is_fairseq

    def __getattr__(self, name):  # get_code, is_package, ... (runpy, inspect, pkgutil)
        return getattr(self.loader, name)

    def create_module(self, spec):
        return self.loader.create_module(spec)

    def exec_module(self, module):
        if self.is_fairseq:
            keeping_root_logger(self.loader.exec_module, module)
            _state["fairseq"] = True
        else:
            _state["loading"] += 1
            try:
                self.loader.exec_module(module)
            finally:
                _state["loading"] -= 1
        _register_when_ready()


class _Watch(importlib.abc.MetaPathFinder):
    """Watches the import of fairseq and of this package's own modules."""

    def find_spec(self, fullname, path, target=None):
        is_fairseq = fullname == "fairseq"
        if not (is_fairseq or fullname.startswith(__name__ + ".")) or _state["registered"]:
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is not None and spec.loader is not None:
            spec.loader = _Loader(spec.loader, is_fairseq)
        return spec


if "fairseq" in sys.modules:
    register()
else:
    sys.meta_path.insert(0, _Watch())
