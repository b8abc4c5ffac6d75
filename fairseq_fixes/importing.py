"""Code that must run once fairseq is imported, whichever is imported first.

fairseq's ``--user-dir`` imports a package after fairseq; a Python program may import it before
fairseq, or never import fairseq at all (a tool that reads text or logs). :func:`after_fairseq`
runs a function as soon as both hold: fairseq is imported, and no module of the given package is
half-loaded (a module that imports fairseq in its first lines must be whole before a function
that imports it runs). Functions run in the order they were given. Standard library only.

Importing fairseq configures the root logger (ve-fairseq's
``models/wav2vec/wav2vec2_classification.py`` calls ``logging.basicConfig(level=DEBUG)``,
``tasks/text_to_speech.py`` logs at INFO through its own), so that every library's debug records
would print in a Python session: where fairseq is imported through this watch, and while a
function given to :func:`after_fairseq` runs, the root logger is left as it was
(:func:`keeping_root_logger`). fairseq's command-line tools import fairseq first and set their
own logging.
"""
import importlib.abc
import importlib.machinery
import logging
import sys

_WAITING = []  # [(function, package or None)], in the order given
_LOADING = {}  # package -> how many of its modules are being executed now
_FAIRSEQ = {"imported": False}


def after_fairseq(function, package=None):
    """Call ``function()`` once fairseq is imported (at once, if it is) and no module of
    ``package`` (a dotted name) is half-loaded."""
    _WAITING.append((function, package))
    if "fairseq" in sys.modules:
        _FAIRSEQ["imported"] = True
    _run_ready()
    if _WAITING and not any(isinstance(f, _Watch) for f in sys.meta_path):
        sys.meta_path.insert(0, _Watch())


def _run_ready():
    while _FAIRSEQ["imported"] and _WAITING:
        function, package = _WAITING[0]
        if package and _LOADING.get(package):
            return  # it, and those given after it, wait for the package's modules
        _WAITING.pop(0)
        keeping_root_logger(function)
    if not _WAITING:
        sys.meta_path[:] = [f for f in sys.meta_path if not isinstance(f, _Watch)]


def keeping_root_logger(run, *args):
    """``run(*args)`` with ``logging.basicConfig`` doing nothing, and the root logger's level and
    handlers as they were before it afterwards."""
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


def _package_of(fullname):
    return next((p for _, p in _WAITING if p and fullname.startswith(p + ".")), None)


class _Loader(importlib.abc.Loader):
    """A module's own loader, then a look at whether the waiting functions can run now."""

    def __init__(self, loader, package):
        self.loader, self.package = loader, package  # package None: fairseq itself

    def __getattr__(self, name):  # get_code, is_package, ... (runpy, inspect, pkgutil)
        return getattr(self.loader, name)

    def create_module(self, spec):
        return self.loader.create_module(spec)

    def exec_module(self, module):
        if self.package is None:
            keeping_root_logger(self.loader.exec_module, module)
            _FAIRSEQ["imported"] = True
        else:
            _LOADING[self.package] = _LOADING.get(self.package, 0) + 1
            try:
                self.loader.exec_module(module)
            finally:
                _LOADING[self.package] -= 1
        _run_ready()


class _Watch(importlib.abc.MetaPathFinder):
    """Watches the import of fairseq and of the waiting packages' own modules."""

    def find_spec(self, fullname, path, target=None):
        package = _package_of(fullname)
        if not _WAITING or (fullname != "fairseq" and package is None):
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is not None and spec.loader is not None:
            spec.loader = _Loader(spec.loader, package)
        return spec
