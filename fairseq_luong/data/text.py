"""Raw text for the perSPE data path: one normalisation, line reading, whole outputs.

The English and Japanese text is normalised once, by :func:`normalize_line`,
before SentencePiece is trained or applied and before Japanese is chunked.
SentencePiece then runs with its ``identity`` rule, so pieces, phrases,
hypotheses and the normalised references all spell the same characters:
projection of phrases onto pieces cannot fail on two strings that print alike
(decomposed kana), and BLEU compares like with like.

Lines end at ``\\n`` and nowhere else (:func:`iter_lines`): Python's text mode
and ``str.splitlines`` also split at ``\\r``, ``\\x0b``, ``\\x1c``-``\\x1e``,
``\\x85`` and U+2028/9, which would shift every later line of one side
against its translation.
"""
import contextlib
import os
import sys
import unicodedata
from pathlib import Path
from typing import Iterator, Tuple

import regex

_CONTROL = regex.compile(r"\p{Cc}")  # \t \r \x0b \x1c ... \x7f \x85 ...
_FORMAT = regex.compile(r"\p{Cf}")  # zero-width space, BOM, soft hyphen, direction marks


class DataError(ValueError):
    """Input the data path cannot use; the message names the file and line."""


def normalize_line(text: str) -> str:
    """The one normalisation of raw text, applied before SentencePiece and chunking.

    1. control characters (Unicode category Cc: tab, a stray ``\\r``, ...)
       become spaces; format characters (Cf: zero-width space, byte-order
       mark, soft hyphen, direction marks) are removed;
    2. NFKC: decomposed kana are composed (``ハ`` + U+309A -> ``パ``),
       half-width katakana become full-width, full-width Latin letters, digits
       and the ideographic space U+3000 become ASCII;
    3. runs of whitespace become one space, and none is left at either end.

    NFKC is what SentencePiece's default ``nmt_nfkc`` rule starts with; doing it
    here, once, lets every later step (and the references) see the same text.
    The function is idempotent.
    """
    text = _FORMAT.sub("", _CONTROL.sub(" ", text))
    text = unicodedata.normalize("NFKC", text)
    return " ".join(text.split())


def why_not_normalized(text: str) -> str:
    """What :func:`normalize_line` would change in ``text`` (which it changes), for errors."""
    for column, char in enumerate(text, 1):
        if char != " " and normalize_line(char) != char:
            name = unicodedata.name(char, "a control character")
            return f"column {column} holds U+{ord(char):04X} ({name})"
    if unicodedata.normalize("NFKC", text) != text:
        return "it holds characters that NFKC composes (decomposed kana or accents)"
    return "it has spaces at an end or several in a row"


def iter_lines(path, name=None) -> Iterator[Tuple[int, str]]:
    """(line number, text without its ``\\n``) for each line of ``path`` ('-': stdin).

    Only ``\\n`` ends a line; any ``\\r`` stays in the text (the normalisation
    makes it a space). Raises :class:`DataError` naming the file and line for
    bytes that are not UTF-8, or naming the file if it cannot be read.
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
            try:
                yield lineno, raw.decode("utf-8")
            except UnicodeDecodeError as e:
                raise DataError(
                    f"{name}:{lineno}: not valid UTF-8 ({e.reason} at byte {e.start + 1})"
                ) from e


def count_lines(path) -> int:
    """Lines as :func:`iter_lines` reads them (None for stdin): for progress bars."""
    if path == "-":
        return None
    n, last = 0, b"\n"
    try:
        with open(path, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                n += block.count(b"\n")
                last = block[-1:]
    except OSError as e:
        raise DataError(f"cannot read {path}: {e.strerror}") from e
    return n + (last != b"\n")


@contextlib.contextmanager
def whole_output(path):
    """A text file to write ('-': stdout) that appears at ``path`` only when complete.

    Written to ``PATH.part`` and renamed at the end, so a file at ``path`` is
    always whole (recipes skip steps whose output exists) and a failure leaves
    nothing behind.
    """
    if path == "-":
        yield sys.stdout
        return
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    part = f"{path}.part"
    try:
        with open(part, "w", encoding="utf-8", newline="\n") as f:
            yield f
        os.replace(part, path)
    finally:
        if os.path.exists(part):
            os.remove(part)


def normalize_file(input, output, quiet=False):
    """Normalise every line of ``input`` into ``output``; returns what changed, by reason."""
    from tqdm import tqdm

    changed = {"lines": 0, "control characters": 0, "format characters": 0,
               "lines changed by NFKC": 0, "lines respaced": 0}
    n = 0
    with whole_output(output) as out:
        lines = tqdm(iter_lines(input), total=count_lines(input), unit="line", file=sys.stderr,
                     desc=f"normalizing {input}", disable=True if quiet else None)
        for n, line in lines:
            norm = normalize_line(line)
            if norm != line:
                changed["lines"] += 1
                changed["control characters"] += len(_CONTROL.findall(line))
                changed["format characters"] += len(_FORMAT.findall(line))
                stripped = _FORMAT.sub("", _CONTROL.sub(" ", line))
                changed["lines changed by NFKC"] += unicodedata.normalize("NFKC", stripped) != stripped
                changed["lines respaced"] += " ".join(stripped.split()) != stripped
            out.write(norm + "\n")
    return n, changed


def add_file_pair_arguments(parser, input_help, output_help):
    """``--input FILE...`` and ``--output FILE...`` (one output per input; '-': stdin, stdout)."""
    parser.add_argument("--input", "-i", nargs="+", default=["-"],
                        help=f"{input_help} (default: stdin)")
    parser.add_argument("--output", "-o", nargs="+", default=["-"],
                        help=f"{output_help}, one file per input (default: stdout)")


def file_pairs(parser, args):
    if len(args.input) != len(args.output):
        parser.error(f"{len(args.input)} input(s) but {len(args.output)} output(s)")
    return list(zip(args.input, args.output))


def normalize_main(argv=None):
    """Command line of scripts/normalize_text.py."""
    import argparse
    import textwrap

    parser = argparse.ArgumentParser(
        prog="normalize_text.py",
        description=textwrap.fill(
            "Normalise raw text for the perSPE data path, line by line: "
            + " ".join(normalize_line.__doc__.split("\n\n")[1].split()), 79),
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="Examples:\n"
               "  python scripts/normalize_text.py -i raw/train.ja -o train.ja\n"
               "  python scripts/normalize_text.py -i raw/train.en raw/train.ja -o train.en train.ja\n"
               "Output lines match input lines one for one (only \\n ends a line); prints\n"
               "how many lines changed and why.",
    )
    add_file_pair_arguments(parser, "UTF-8 text files", "normalised text")
    parser.add_argument("--quiet", action="store_true", help="no progress bar, no summary")
    args = parser.parse_args(argv)
    for input, output in file_pairs(parser, args):
        try:
            n, changed = normalize_file(input, output, args.quiet)
        except DataError as e:
            sys.exit(f"normalize_text.py: error: {e}")
        if not args.quiet:
            print(f"{input}: {n} lines, {changed.pop('lines')} changed ("
                  + ", ".join(f"{v} {k}" for k, v in changed.items()) + ")", file=sys.stderr)
