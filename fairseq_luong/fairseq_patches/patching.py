"""What the patches share: wrapping a fairseq function once, finding fairseq's CLI modules, and
(from ``checks/option_names.py``, below the models, which use it too) naming an option in the user's terms.

Each patch is a wrapper around a function fairseq looks up at call time (a module
attribute or a class method), so fairseq's own code stays as it is. Applying a patch
twice must not wrap twice: the wrapper carries a mark named after it.

The same check runs for a command line and for a Python call (``from_pretrained``,
``translate``): inside :func:`python_call` its message names options as that call's keyword
arguments (``max_len_b=5``), elsewhere as flags (``--max-len-b 5``), through :func:`option`.
"""
import argparse
import importlib
import inspect
import os
import sys
from typing import NamedTuple

import torch

from ..checks.option_names import in_python_call, option, python_call  # noqa: F401 (the patches' names for them)

# What each patch is (docs/fairseq_patches.md, "Which models each patch touches"): every function
# apply_all calls is marked with one of these kinds, and with the models, commands or inputs it acts on
FIX = "fix"  # fairseq on today's torch, numpy or Python, or a fairseq bug: every fairseq model, and
#              fairseq's own results unchanged wherever fairseq worked
CHECK = "check"  # refuses an option or an input in one line, only where fairseq would ignore it or fail on it
OURS = "ours"  # acts on the plugin's own models only
KINDS = (FIX, CHECK, OURS)


class Patch(NamedTuple):
    """One patch function: its kind and what it acts on (its premise)."""
    kind: str
    name: str  # module.function
    acts_on: str


PATCHES = {}  # "module.function" -> Patch, as the modules are imported


def patch(kind, acts_on):
    """Mark a patch function, ``@patch(FIX, "...")``, with its kind and what it acts on;
    registered in :data:`PATCHES`, the function itself unchanged."""
    if kind not in KINDS:
        raise ValueError(f"kind {kind!r}: one of {KINDS}")

    def mark(function):
        name = f"{function.__module__.rsplit('.', 1)[-1]}.{function.__name__}"
        PATCHES[name] = Patch(kind, name, acts_on)
        return function
    return mark


def wrap_once(owner, name, wrap):
    """``owner.name = wrap(owner.name)``, unless ``wrap`` was applied already. A classmethod
    stays one: ``wrap`` gets, and returns, the function that takes the class first."""
    mark = f"__fairseq_luong_{wrap.__module__.rsplit('.', 1)[-1]}_{wrap.__name__}__"
    current = getattr(owner, name)
    if getattr(current, mark, False):
        return
    is_classmethod = isinstance(inspect.getattr_static(owner, name), classmethod)
    wrapped = wrap(current.__func__ if is_classmethod else current)
    setattr(wrapped, mark, True)
    setattr(owner, name, classmethod(wrapped) if is_classmethod else wrapped)


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
    return cfg.common.cpu or not torch.cuda.is_available()
