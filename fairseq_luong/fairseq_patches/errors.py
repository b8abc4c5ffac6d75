"""Errors in what the user gave (a file, a flag, a checkpoint) reach the terminal as one line.

fairseq's command-line tools let every exception escape as a traceback: for a bad
checkpoint or a wrong flag that is dozens of lines (46 for a refused checkpoint, with
torch's chained unpickler error) around the one line that says what to do.
``fairseq_luong.errors.UserError`` marks an error whose message is complete; the
package's models, criterions, data readers and patches raise it (``ConfigError`` for
option values). When one reaches the
top of a fairseq command, the patched ``sys.excepthook`` (:func:`patch_excepthook`)
prints ``PROG: error: MESSAGE`` and nothing else (exit status 1, as for any uncaught
exception). Python callers still get an ordinary exception to catch.
``FAIRSEQ_LUONG_TRACEBACK=1`` restores the full traceback for debugging.
"""
import functools
import os
import sys

from ..errors import UserError
from .patching import wrap_once


def _print_user_errors(hook):
    @functools.wraps(hook)
    def excepthook(exc_type, exc, tb):
        if issubclass(exc_type, UserError) and not os.environ.get("FAIRSEQ_LUONG_TRACEBACK"):
            prog = os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else "fairseq"
            print(f"{prog}: error: {exc}", file=sys.stderr, flush=True)
            return
        hook(exc_type, exc, tb)

    return excepthook


def patch_excepthook():
    """``sys.excepthook``: a ``UserError`` that reaches the top prints as ``PROG: error: MESSAGE``."""
    wrap_once(sys, "excepthook", _print_user_errors)
