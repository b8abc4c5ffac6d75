"""Errors in what the user gave (a file, a flag, a checkpoint) reach the terminal as one line.

fairseq's command-line tools (0.12 and main) let every exception escape as a traceback: for a
bad checkpoint or a wrong flag that is dozens of lines (46 for a refused checkpoint, with
torch's chained unpickler error) around the one line that says what to do.
``fairseq_fixes.errors.UserError`` marks an error whose message is complete; the fixes raise
it, and so may a plugin's models, data readers and checks. When one reaches the top of a
fairseq command, the patched ``sys.excepthook`` (:func:`patch_excepthook`) prints ``PROG:
error: MESSAGE`` and nothing else (exit status 1, as for any uncaught exception). Python
callers still get an ordinary exception to catch. ``FAIRSEQ_FIXES_TRACEBACK=1`` (or the
plugin's older name, ``FAIRSEQ_LUONG_TRACEBACK=1``) restores the full traceback for debugging.

A closed output pipe (``fairseq-generate ... | head``) ended in a ``BrokenPipeError``
traceback, and another at exit when Python flushed the output. When that error reaches the
top and standard output is the pipe whose reader has gone, the process ends as other
command-line tools do in a pipe: the exit handlers run, then it dies of SIGPIPE, without a
word. Any other ``BrokenPipeError`` (a pipe of the process's own) keeps its traceback.
"""
import atexit
import functools
import os
import select
import signal
import sys

from .errors import UserError
from .patching import FIX, patch, wrap_once


def stdout_reader_gone():
    """Whether standard output is a pipe whose reading end is closed (poll says POLLERR)."""
    try:
        fd = sys.__stdout__.fileno()
        poll = select.poll()
        poll.register(fd, select.POLLOUT)
        return any(event & select.POLLERR for _, event in poll.poll(0))
    except (AttributeError, OSError, ValueError):
        return False


def end_as_a_closed_pipe_ends():
    """Exit handlers, then death by SIGPIPE (the shell's status 141), standard output silenced
    first so that no flush at exit writes to the closed pipe."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.__stdout__.fileno())
    atexit._run_exitfuncs()
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    os.kill(os.getpid(), signal.SIGPIPE)


def _full_traceback():
    return any(os.environ.get(name) for name in ("FAIRSEQ_FIXES_TRACEBACK", "FAIRSEQ_LUONG_TRACEBACK"))


def _print_user_errors(hook):
    @functools.wraps(hook)
    def excepthook(exc_type, exc, tb):
        if issubclass(exc_type, BrokenPipeError) and stdout_reader_gone():
            end_as_a_closed_pipe_ends()
            return
        if issubclass(exc_type, UserError) and not _full_traceback():
            prog = os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else "fairseq"
            print(f"{prog}: error: {exc}", file=sys.stderr, flush=True)
            return
        hook(exc_type, exc, tb)

    return excepthook


@patch(FIX, "a UserError or a closed output pipe at the top of any fairseq command: one line, or SIGPIPE; every "
       "other exception as it was")
def patch_excepthook():
    """``sys.excepthook``: a ``UserError`` that reaches the top prints as ``PROG: error: MESSAGE``;
    a ``BrokenPipeError`` of a closed standard output ends the process quietly."""
    wrap_once(sys, "excepthook", _print_user_errors)
