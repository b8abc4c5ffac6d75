"""Raw text: the one line reader, the one control-character policy, the one normalisation.

**Lines** (:func:`iter_lines`, from ``fairseq_fixes/lines.py``, and :func:`read_lines`): only
``\\n`` ends a line, everywhere in the package, its scripts and recipes (a ``\\r`` just before
it is part of that line end, ``\\r\\n``). Python's text mode and ``str.splitlines`` also split
at a lone ``\\r``, ``\\x0b``, ``\\x1c``-``\\x1e``, ``\\x85`` and U+2028/9, which would shift
every later line of one side against its translation. fairseq-preprocess (Python's text mode)
splits at a lone ``\\r`` too; ``scripts/data/check_parallel.py`` reports every such ``\\r``,
and on the files it passes, fairseq-preprocess reads exactly the lines this reader reads.

**Control characters** (:data:`CONTROL`): Unicode's category Cc except tab (whitespace) and
the ``\\n`` that ends a line, and the line and paragraph separators U+2028/9;
:data:`LINE_BREAKING` are those that ``str.splitlines``, and so many tools, read as a line
break. ``check_parallel.py`` reports them; :func:`normalize_line` makes each a space.

**Normalisation** (perSPE data path): the English and Japanese text is normalised once,
by :func:`normalize_line`, before SentencePiece is trained or applied and before Japanese
is chunked. SentencePiece then runs with its ``identity`` rule, so pieces, phrases,
hypotheses and the normalised references all spell the same characters: projection of
phrases onto pieces cannot fail on two strings that print alike (decomposed kana), and
BLEU compares like with like.
"""
import contextlib
import os
import sys
import unicodedata
from pathlib import Path
from typing import List

import regex

from fairseq_fixes.lines import DataError, iter_lines  # noqa: F401 (the package's names for them)

# the one control-character policy (module docstring)
CONTROL = regex.compile(r"[^\P{Cc}\t\n]|[\u2028\u2029]")
LINE_BREAKING = regex.compile(r"[\x0b\x0c\x1c-\x1e\x85\u2028\u2029]")
_FORMAT = regex.compile(r"\p{Cf}")  # zero-width space, BOM, soft hyphen, direction marks
# C1 controls: in web-crawled text (WMT's) they are mojibake, Windows-1252 bytes read as Latin-1
C1 = regex.compile(r"[\x80-\x9f]")


def normalize_line(text: str) -> str:
    """The one normalisation of raw text, applied before SentencePiece and chunking.

    1. control characters (:data:`CONTROL`: a stray ``\\r``, ``\\x07``, U+2028, ...)
       become spaces; format characters (Cf: zero-width space, byte-order
       mark, soft hyphen, direction marks) are removed;
    2. NFKC: decomposed kana are composed (``ハ`` + U+309A -> ``パ``),
       half-width katakana become full-width, full-width Latin letters, digits
       and the ideographic space U+3000 become ASCII;
    3. runs of whitespace (tab included) become one space, and none is left at either end.

    NFKC is what SentencePiece's default ``nmt_nfkc`` rule starts with; doing it
    here, once, lets every later step (and the references) see the same text.
    The function is idempotent.
    """
    text = _FORMAT.sub("", CONTROL.sub(" ", text))
    text = unicodedata.normalize("NFKC", text)
    return " ".join(text.split())


def repair_c1(text: str) -> str:
    """Each C1 control character (U+0080-U+009F) becomes the Windows-1252 character of the
    same byte, what the text's author typed (U+0096 -> '\u2013', U+0092 -> '\u2019',
    U+0085 -> '\u2026'); the five bytes Windows-1252 leaves undefined (0x81, 0x8D, 0x8F,
    0x90, 0x9D) become a space. Nothing else changes, so the line count stays."""
    return C1.sub(lambda m: _CP1252.get(m.group(), " "), text)


def _cp1252_table():
    table = {}
    for byte in range(0x80, 0xA0):
        try:
            table[chr(byte)] = bytes([byte]).decode("cp1252")
        except UnicodeDecodeError:  # undefined in Windows-1252
            pass
    return table


_CP1252 = _cp1252_table()


def why_not_normalized(text: str) -> str:
    """What :func:`normalize_line` would change in ``text`` (which it changes), for errors."""
    for column, char in enumerate(text, 1):
        if char != " " and normalize_line(char) != char:
            name = unicodedata.name(char, "a control character")
            return f"column {column} holds U+{ord(char):04X} ({name})"
    if unicodedata.normalize("NFKC", text) != text:
        return "it holds characters that NFKC composes (decomposed kana or accents)"
    return "it has spaces at an end or several in a row"


def read_lines(path) -> List[str]:
    """Every line of ``path`` as :func:`iter_lines` reads it; :class:`DataError` naming the
    file (and line) when it cannot be read or is not UTF-8."""
    return [text for _, text in iter_lines(path)]


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
                changed["control characters"] += len(CONTROL.findall(line))
                changed["format characters"] += len(_FORMAT.findall(line))
                stripped = _FORMAT.sub("", CONTROL.sub(" ", line))
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
    """Command line of scripts/data/normalize_text.py."""
    import argparse
    import textwrap

    parser = argparse.ArgumentParser(
        prog="normalize_text.py",
        description=textwrap.fill(
            "Normalise raw text for the perSPE data path, line by line: "
            + " ".join(normalize_line.__doc__.split("\n\n")[1].split()), 79),
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="Examples:\n"
               "  python scripts/data/normalize_text.py -i raw/train.ja -o train.ja\n"
               "  python scripts/data/normalize_text.py -i raw/train.en raw/train.ja -o train.en train.ja\n"
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


def repair_c1_main(argv=None):
    """Command line of scripts/data/repair_c1.py."""
    import argparse

    parser = argparse.ArgumentParser(
        prog="repair_c1.py",
        description="Repair C1 mojibake (U+0080-U+009F, Windows-1252 text read as Latin-1, common in "
                    "WMT data) line by line: " + " ".join(repair_c1.__doc__.split()),
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="Example (check_parallel.py names such characters):\n"
               "  python scripts/data/repair_c1.py -i data/train.en data/train.de -o fixed/train.en fixed/train.de\n"
               "Output lines match input lines one for one (only \\n ends a line).")
    add_file_pair_arguments(parser, "UTF-8 text files", "repaired text")
    args = parser.parse_args(argv)
    for input, output in file_pairs(parser, args):
        n = lines_changed = chars = 0
        try:
            with whole_output(output) as out:
                for n, line in iter_lines(input):
                    found = len(C1.findall(line))
                    chars, lines_changed = chars + found, lines_changed + bool(found)
                    out.write((repair_c1(line) if found else line) + "\n")
        except DataError as e:
            sys.exit(f"repair_c1.py: error: {e}")
        print(f"{input}: {n} lines, {chars} C1 characters repaired on {lines_changed} lines", file=sys.stderr)
