"""Naming an option in the user's terms: a flag on the command line, a keyword in a Python call.

The same check runs for a command line and for a Python call (``from_pretrained``,
``translate``): inside :func:`python_call` its message names options as that call's keyword
arguments (``max_len_b=5``), elsewhere as flags (``--max-len-b 5``), through :func:`option`.
Standard library only: fairseq_fixes' messages and a plugin's checks and Python interface use it.
"""
import contextlib
import contextvars

_PYTHON_CALL = contextvars.ContextVar("fairseq_fixes_python_call", default=None)
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
