"""A one-line error when a fairseq_luong checkpoint is used without ``--user-dir``.

Without ``--user-dir fairseq_luong`` none of the plugin's code runs, and
fairseq, asked for a model it does not know, crashes while formatting its
own message (``KeyError: "'_name'"``, after a traceback). So this file does
not live in the plugin's import path: ``scripts/setup.sh`` lists it in a
``fairseq_luong_hint.pth`` in the environment's site-packages, which Python
runs at start-up. It uses the standard library only and costs nothing
until fairseq is imported; then it wraps ``fairseq.models.build_model`` so
that a model or architecture named like ours (``luong_*``, ``rnnsearch*``,
``transformer_perspe*``) that is not registered stops with a message naming
the missing ``--user-dir``. It never loads the plugin itself: fairseq's
``--user-dir`` stays the one way to do that.
"""
import functools
import importlib.abc
import importlib.machinery
import os
import sys

PLUGIN_NAME_PREFIXES = ("luong_", "rnnsearch", "transformer_perspe")
FIX = ("add --user-dir fairseq_luong (from the repository root; from elsewhere --user-dir "
       "\"$(python -c 'import fairseq_luong, os; print(os.path.dirname(fairseq_luong.__file__))')\")")


def is_unloaded_plugin_model(name, models):
    return (isinstance(name, str) and name.startswith(PLUGIN_NAME_PREFIXES)
            and name not in models.ARCH_MODEL_REGISTRY and name not in models.MODEL_REGISTRY)


def _naming_user_dir(build_model, models):
    @functools.wraps(build_model)
    def wrapper(cfg, *args, **kwargs):
        name = getattr(cfg, "_name", None) or getattr(cfg, "arch", None)
        if is_unloaded_plugin_model(name, models):
            prog = os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else "fairseq"
            raise SystemExit(f"{prog}: error: model {name} comes from the fairseq_luong plugin, "
                             f"which is not loaded: {FIX}")
        return build_model(cfg, *args, **kwargs)

    return wrapper


class _Loader(importlib.abc.Loader):
    """fairseq.models' own loader, then the wrapper."""

    def __init__(self, loader):
        self.loader = loader

    def create_module(self, spec):
        return self.loader.create_module(spec)

    def exec_module(self, module):
        self.loader.exec_module(module)
        module.build_model = _naming_user_dir(module.build_model, module)


class _WatchFairseqModels(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname, path, target=None):
        if fullname != "fairseq.models":
            return None
        sys.meta_path.remove(self)  # once is enough
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is not None and spec.loader is not None:
            spec.loader = _Loader(spec.loader)
        return spec


if "fairseq.models" not in sys.modules and not any(
        type(f).__name__ == "_WatchFairseqModels" for f in sys.meta_path):
    sys.meta_path.insert(0, _WatchFairseqModels())
