"""The error a user can act on: its message says what was wrong and what to do.

``UserError`` marks an error whose message is complete (a file, a flag, a checkpoint). At the
top of a fairseq command the excepthook of ``excepthook.py`` prints it as one line, ``PROG:
error: MESSAGE``; Python callers get an ordinary exception to catch. Standard library only:
importing it imports neither fairseq nor torch.
"""


class UserError(RuntimeError):
    """A problem the message fully explains, with what to do instead."""
