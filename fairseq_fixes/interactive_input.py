"""fairseq-interactive reads its input as UTF-8, whatever the locale.

Text that is not UTF-8 on fairseq-interactive's input: under a C.UTF-8 locale the bad bytes
became ``<unk>`` without a word; under en_US.UTF-8 a ``UnicodeDecodeError`` traceback that ended
the stream, losing the lines after it and those still in the buffer. Its ``buffered_read`` now
reads bytes and decodes each line itself, whatever the locale: a bad byte becomes U+FFFD, with a
warning naming the line (and its ``H-`` number), and every line before and after it is
translated, one ``H-`` line each, at any ``--buffer-size``.
"""
import functools
import logging
import sys

from .errors import UserError
from .lines import DataError, iter_lines
from .patching import FIX, fairseq_cli_modules, patch, wrap_once

logger = logging.getLogger(__name__)


def _utf8_lines(buffered_read):
    @functools.wraps(buffered_read)
    def wrapper(input, buffer_size):
        if input == "-" and not hasattr(sys.stdin, "buffer"):
            # a text stream put in place of stdin (io.StringIO: fairseq's own tests): its text is
            # decoded already, no locale to read it by; fairseq reads it as it is
            yield from buffered_read(input, buffer_size)
            return
        name = "standard input" if input == "-" else input

        def replaced(lineno, message):
            logger.warning("%s:%d: %s: its bad bytes are read as U+FFFD (\ufffd), and the line is translated as "
                           "such (H-%d); fairseq-interactive reads UTF-8 text", name, lineno, message, lineno - 1)

        buffer = []
        try:
            for _, text in iter_lines(input, name=name, on_invalid=replaced):
                buffer.append(text.strip())
                if len(buffer) >= buffer_size:
                    yield buffer
                    buffer = []
        except DataError as e:  # the input cannot be read at all
            raise UserError(f"{e}: fairseq-interactive reads UTF-8 text, one sentence a line") from e
        if buffer:
            yield buffer

    return wrapper


@patch(FIX, "fairseq-interactive's input, for every model: UTF-8 whatever the locale, a bad byte a warning")
def patch_interactive_input():
    """fairseq-interactive's ``buffered_read``: lines decoded as UTF-8 whatever the locale;
    a bad byte is replaced, with a warning naming the line."""
    for module in fairseq_cli_modules("interactive"):
        wrap_once(module, "buffered_read", _utf8_lines)
