"""The one line reader: only ``\\n`` ends a line, and bytes that are not UTF-8 are named by file
and line (or replaced, with a warning, where the caller asks).

Python's text mode and ``str.splitlines`` also split at a lone ``\\r``, ``\\x0b``,
``\\x1c``-``\\x1e``, ``\\x85`` and U+2028/9, which would shift every later line of one side of
a parallel corpus against its translation; and they decode by the locale. fairseq-interactive's
input (``interactive_input.py``) is read with it; a plugin's data path can use the same reader.
Standard library only.
"""
import contextlib
import sys
from typing import Callable, Iterator, Optional, Tuple


class DataError(ValueError):
    """Input the data path cannot use; the message names the file and line."""


def iter_lines(path, name=None,
               on_invalid: Optional[Callable[[int, str], None]] = None) -> Iterator[Tuple[int, str]]:
    """(line number, text without its ``\\n`` or ``\\r\\n``) for each line of ``path`` ('-': stdin).

    Only ``\\n`` ends a line; any other ``\\r`` stays in the text. Bytes that are not UTF-8
    raise :class:`DataError` naming the file and line, or, given ``on_invalid``, are
    passed to ``on_invalid(line number, message)`` and read as U+FFFD. A file that cannot
    be read raises :class:`DataError` naming it.
    """
    name = name or ("<stdin>" if path == "-" else str(path))
    try:
        f = sys.stdin.buffer if path == "-" else open(path, "rb")
    except OSError as e:
        raise DataError(f"cannot read {name}: {e.strerror}") from e
    with contextlib.ExitStack() as stack:
        if f is not sys.stdin.buffer:
            stack.enter_context(f)
        for lineno, raw in enumerate(f, 1):  # binary files split at b"\n" only
            if raw.endswith(b"\n"):
                raw = raw[:-1]
            if raw.endswith(b"\r"):  # \r\n, or a last line ending in \r: fairseq's line end too
                raw = raw[:-1]
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError as e:
                message = f"not valid UTF-8 ({e.reason} at byte {e.start + 1})"
                if on_invalid is None:
                    raise DataError(f"{name}:{lineno}: {message}") from e
                on_invalid(lineno, message)
                text = raw.decode("utf-8", errors="replace")
            yield lineno, text
