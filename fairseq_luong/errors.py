"""The errors a user can act on: the message says what was wrong and what to do.

``UserError`` (``fairseq_fixes.errors``: the fixes raise it too) marks an error whose message is
complete (a file, a flag, a checkpoint); the package's models, criterions, data readers and
checks raise it, ``ConfigError`` for option values. At the top of a fairseq command the
excepthook of ``fairseq_fixes/excepthook.py`` prints it as one line, ``PROG: error: MESSAGE``;
Python callers get an ordinary exception to catch. Standard library only: model code and tools
import it without importing fairseq or any patch.
"""
from fairseq_fixes.errors import UserError


class ConfigError(UserError, ValueError):
    """An option value, or a combination of options, that a model, task or criterion
    cannot use (found while building it), or a value a Python call cannot use. One line at
    the terminal like any ``UserError``; also a ``ValueError``, what Python code catches."""


class ArgumentError(UserError, TypeError):
    """An argument of a Python call of a type it does not take (``translate(None)``); also a
    ``TypeError``, what Python code catches."""


__all__ = ["ArgumentError", "ConfigError", "UserError"]
