"""The one way a name of fairseq, torch, numpy or Python is changed: wrapped once, or replaced,
by a marked patch function, which records what it changed for the generated table.

Each patch is a wrapper around a function fairseq looks up at call time (a module attribute or
a class method, :func:`wrap_once`), or, where no wrapper can do, a replacement of the name
(:func:`replace`), so fairseq's own code stays as it is. Applying a patch twice changes nothing:
a wrapper carries a mark named after it, a replacement is skipped where it is in place.

Every patch function is marked with :func:`patch`: its kind and what it acts on (its premise).
While it runs, each :func:`wrap_once` and :func:`replace` it calls is recorded as one of its
targets (``Patch.targets``): ``python -m fairseq_fixes`` prints them all, ``python -m
fairseq_luong.fairseq_patches`` the plugin's too.
"""
import argparse
import contextvars
import functools
import importlib
import inspect
import os
import sys
from typing import List, NamedTuple

# What each patch is: every patch function is marked with one of these kinds, and with the
# models, commands or inputs it acts on
FIX = "fix"  # fairseq on today's torch, numpy or Python, or a fairseq bug: every fairseq model, and
#              fairseq's own results unchanged wherever fairseq worked (this package holds only these)
CHECK = "check"  # refuses an option or an input in one line, only where fairseq would ignore it or fail on it
OURS = "ours"  # acts on a plugin's own models only
KINDS = (FIX, CHECK, OURS)


class Patch(NamedTuple):
    """One patch function: its kind, what it acts on (its premise) and the names it changes."""
    kind: str
    name: str  # module.function
    acts_on: str
    package: str  # the package that holds it: fairseq_fixes, or a plugin's
    targets: List[str]  # "owner.name" of each name it wraps or replaces, in order


PATCHES = {}  # "module.function" -> Patch, as the modules are imported
_APPLYING = contextvars.ContextVar("fairseq_fixes_applying", default=None)


def patch(kind, acts_on):
    """Mark a patch function, ``@patch(FIX, "...")``, with its kind and what it acts on; it is
    registered in :data:`PATCHES`, and the names it wraps or replaces are recorded as it runs."""
    if kind not in KINDS:
        raise ValueError(f"kind {kind!r}: one of {KINDS}")

    def mark(function):
        module = function.__module__
        name = f"{module.rsplit('.', 1)[-1]}.{function.__name__}"
        if name in PATCHES and PATCHES[name].package != module.split(".")[0]:
            raise ValueError(f"two patches are named {name}: rename one module")
        entry = PATCHES[name] = Patch(kind, name, acts_on, module.split(".")[0], [])

        @functools.wraps(function)
        def applying(*args, **kwargs):
            token = _APPLYING.set(entry)
            try:
                return function(*args, **kwargs)
            finally:
                _APPLYING.reset(token)

        return applying
    return mark


def target_name(owner, name):
    """How the table names ``owner.name``: a module by its import name, a class with its module."""
    if inspect.ismodule(owner):
        return f"{owner.__name__}.{name}"
    return f"{owner.__module__}.{owner.__qualname__}.{name}"


def _record(owner, name):
    entry = _APPLYING.get()
    if entry is None or (inspect.ismodule(owner) and owner.__name__ == "__main__"):
        return  # not inside a marked patch, or a command's __main__ copy (its fairseq_cli module is recorded)
    target = target_name(owner, name)
    if target not in entry.targets:
        entry.targets.append(target)


def wrap_once(owner, name, wrap):
    """``owner.name = wrap(owner.name)``, unless ``wrap`` was applied already. A classmethod
    stays one: ``wrap`` gets, and returns, the function that takes the class first."""
    _record(owner, name)
    mark = f"__fairseq_fixes_{wrap.__module__.rsplit('.', 1)[-1]}_{wrap.__name__}__"
    current = getattr(owner, name)
    if getattr(current, mark, False):
        return
    is_classmethod = isinstance(inspect.getattr_static(owner, name), classmethod)
    wrapped = wrap(current.__func__ if is_classmethod else current)
    setattr(wrapped, mark, True)
    setattr(owner, name, classmethod(wrapped) if is_classmethod else wrapped)


def replace(owner, name, value):
    """``owner.name = value``, where a wrapper cannot do (a class fairseq instantiates, a module
    a fairseq module imported); nothing when ``value`` is in place already."""
    _record(owner, name)
    if getattr(owner, name) is not value:
        setattr(owner, name, value)


def fairseq_cli_modules(command):
    """The modules of fairseq's command ``command`` ("generate", "interactive") whose functions
    a patch must wrap: ``fairseq_cli.COMMAND`` (what the console script ``fairseq-COMMAND``
    runs), and ``__main__`` too when the command runs as ``python -m fairseq_cli.COMMAND`` or
    ``python .../fairseq_cli/COMMAND.py`` (then its functions are ``__main__``'s own copies)."""
    modules = [importlib.import_module(f"fairseq_cli.{command}")]
    main = sys.modules.get("__main__")
    run_as = getattr(getattr(main, "__spec__", None), "name", None)
    path = getattr(main, "__file__", None) or ""
    if main not in modules and (run_as == f"fairseq_cli.{command}"
                                or path.endswith(os.path.join("fairseq_cli", f"{command}.py"))):
        modules.append(main)
    return modules


def as_config(cfg):
    """A command's config as fairseq's main functions take it: an ``argparse.Namespace`` (what
    fairseq's own tests and older scripts pass ``train.main``, ``interactive.main``) converted
    the way those functions convert it themselves, anything else as it is."""
    if isinstance(cfg, argparse.Namespace):
        from fairseq.dataclass.utils import convert_namespace_to_omegaconf

        return convert_namespace_to_omegaconf(cfg)
    return cfg


def runs_on_cpu(cfg):
    """Whether a fairseq run with config ``cfg`` computes on the CPU (``--cpu``, or no CUDA)."""
    import torch

    return cfg.common.cpu or not torch.cuda.is_available()


def by_kind(package=None):
    """{kind: [Patch, ...]} for fix, check and ours (of ``package`` only, when given), each
    sorted by module.function."""
    chosen = [p for p in PATCHES.values() if package is None or p.package == package]
    return {kind: sorted((p for p in chosen if p.kind == kind), key=lambda p: p.name) for kind in KINDS}
