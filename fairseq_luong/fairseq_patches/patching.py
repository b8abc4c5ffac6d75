"""What the patches share: wrapping a fairseq function once, finding fairseq's CLI modules, and
naming an option in the user's terms.

Each patch is a wrapper around a function fairseq looks up at call time (a module
attribute or a class method), so fairseq's own code stays as it is. Applying a patch
twice must not wrap twice: the wrapper carries a mark named after it.

The same check runs for a command line and for a Python call (``from_pretrained``,
``translate``): inside :func:`python_call` its message names options as that call's keyword
arguments (``max_len_b=5``), elsewhere as flags (``--max-len-b 5``), through :func:`option`.
"""
import contextlib
import contextvars
import importlib
import inspect
import os
import sys

import torch


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


def runs_on_cpu(cfg):
    """Whether a fairseq run with config ``cfg`` computes on the CPU (``--cpu``, or no CUDA)."""
    return cfg.common.cpu or not torch.cuda.is_available()


_PYTHON_CALL = contextvars.ContextVar("fairseq_luong_python_call", default=None)
_NO_VALUE = object()


@contextlib.contextmanager
def python_call(name):
    """Inside, messages name options as the keyword arguments of the Python call ``name``
    ("from_pretrained", "translate"); the outermost call gives the name."""
    token = _PYTHON_CALL.set(_PYTHON_CALL.get() or name)
    try:
        yield
    finally:
        _PYTHON_CALL.reset(token)


def in_python_call():
    """The name of the Python call the messages are for (:func:`python_call`), or None."""
    return _PYTHON_CALL.get()


def option(dest, value=_NO_VALUE):
    """Option ``dest`` (a config field: ``max_len_b``), with ``value`` when given, as the user
    wrote it: ``--max-len-b 5`` on the command line, ``max_len_b=5`` in a Python call."""
    if in_python_call():
        return dest if value is _NO_VALUE else f"{dest}={value!r}"
    flag = "--" + dest.replace("_", "-")
    return flag if value is _NO_VALUE else f"{flag} {value}"
