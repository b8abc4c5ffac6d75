#!/usr/bin/env python3
"""Check parallel text before fairseq-preprocess: every problem named by file and line.

Reads each file with fairseq_luong's line reader (only \\n ends a line) and reports,
with file:line, where fairseq-preprocess would read it differently or badly:

* a carriage return inside a line: fairseq-preprocess splits the line there,
  so every later sentence pair is shifted by one (the error names the fix);
* a UTF-8 byte order mark: it would become part of the first word;
* other control characters (fairseq_luong/data/text.py's policy: Unicode Cc but tab,
  and U+2028, U+2029; U+0085 and those two are line breaks for str.splitlines and many
  tools); with --control-characters keep, those that nothing reads as a line break are
  one warning per file instead. C1 characters (U+0080-U+009F) in web-crawled text such
  as WMT's are Windows-1252 bytes read as Latin-1: scripts/data/repair_c1.py writes
  repaired copies (U+0096 -> an en dash), line for line;
* invalid UTF-8, different line counts, a line empty on one side only;
* a sentence longer than the model takes: fairseq appends EOS, so a sentence
  of N words needs N + 1 of the model's --max-positions (default 1024, the
  models' --max-source-positions / --max-target-positions). fairseq-train
  would drop it with a warning inside its log; fairseq-generate would stop.

With --trainpref, held-out pairs (--validpref, --testpref) that also occur in
the training data are counted in a warning, and a prefix given for both is an
error. Line endings \\r\\n are fine (fairseq reads them as one line break).

Usage:
  python scripts/data/check_parallel.py -s en -t de --trainpref data/train \\
      --validpref data/valid --testpref data/test
  python scripts/data/check_parallel.py -s en -t de data/extra   # any prefixes, no overlap check
Exit status 1 after listing the problems (at most --max-problems per file).
"""
import argparse
import itertools
import logging
import os
import sys

from tqdm import tqdm

# fairseq's first import sets up logging at DEBUG and logs INFO lines ("Please install
# tensorboardX"); this script's output is its own lines, so logging is set up first
logging.basicConfig(format="%(levelname)s: %(message)s", level=logging.WARNING)
from fairseq_luong.data.text import C1, CONTROL, LINE_BREAKING, DataError, iter_lines, repair_c1  # noqa: E402

BOM = "\ufeff"


class Problems:
    """Collects ``path:line: message`` errors, at most ``limit`` per file."""

    def __init__(self, limit, keep_control=False):
        self.limit, self.count, self.shown = limit, {}, []
        self.unreadable = set()
        # --control-characters keep: path -> [lines holding one, first line, char, column]
        self.keep_control, self.kept = keep_control, {}

    def keep(self, path, lineno, char, column):
        seen = self.kept.setdefault(path, [0, lineno, char, column])
        seen[0] += 1

    def warn_kept(self):
        for path, (n, lineno, char, column) in self.kept.items():
            print(f"warning: {path}: {n} line{'s hold' if n > 1 else ' holds'} control characters (first: line "
                  f"{lineno}, U+{ord(char):04X} at column {column}); kept (--control-characters keep): "
                  "none of them breaks a line, so no sentence pair shifts", file=sys.stderr)

    def add(self, path, lineno, message):
        n = self.count[path] = self.count.get(path, 0) + 1
        if n <= self.limit:
            where = f"{path}:{lineno}" if lineno else path
            self.shown.append(f"error: {where}: {message}")

    def report(self):
        for line in self.shown:
            print(line, file=sys.stderr)
        for path, n in self.count.items():
            if n > self.limit:
                print(f"error: {path}: ... and {n - self.limit} more problems", file=sys.stderr)
        total = sum(self.count.values())
        if total:
            files = ", ".join(f"{path} {n}" for path, n in self.count.items())
            print(f"error: {total} problem{'s' if total > 1 else ''} in all ({files}); nothing was changed: "
                  "fix the files and check them again", file=sys.stderr)
        return total


def control_message(char, column):
    """What a control character is, and the ways past it."""
    where = f"control character U+{ord(char):04X} at column {column}"
    keep = "" if LINE_BREAKING.match(char) else ", or keep such characters with --control-characters keep"
    if C1.match(char):
        meant = repair_c1(char)
        meant = f"'{meant}'" if meant.strip() else "a byte Windows-1252 leaves undefined"
        return (f"{where}, C1 mojibake of Windows-1252 {meant}: repair the files with "
                f"scripts/data/repair_c1.py{keep}")
    return f"{where}: remove or replace it{keep}"


def checked_lines(path, problems):
    """Yield the lines of ``path`` (``iter_lines``: only \\n ends a line) after checking each
    one; nothing if the file cannot be read."""
    lines = iter_lines(path, on_invalid=lambda i, message: problems.add(path, i, message))
    try:
        for i, text in lines:  # a \r\n line end is one line break for fairseq too
            if "\r" in text:
                problems.add(path, i, "carriage return (\\r) inside the line: fairseq-preprocess reads "
                                      "it as a line break, which shifts every later sentence pair; "
                                      f"remove them all first: sed -i 's/\\r//g' {path}")
            if BOM in text:
                where = "at the start of the file" if i == 1 and text.startswith(BOM) else "inside the line"
                problems.add(path, i, f"UTF-8 byte order mark (U+FEFF) {where}: it would become part "
                                      f"of a word; remove it: sed -i 's/\\xEF\\xBB\\xBF//g' {path}")
            control = CONTROL.search(text.replace("\r", ""))  # \r: reported above
            if control and problems.keep_control and not LINE_BREAKING.search(text):
                problems.keep(path, i, control.group(), control.start() + 1)
            elif control:
                problems.add(path, i, control_message(control.group(), control.start() + 1))
            yield text
    except DataError as e:  # the file cannot be read
        problems.add(path, 0, f"cannot read: {e.__cause__.strerror}")
        problems.unreadable.add(path)


def check_pair(prefix, src, tgt, max_positions, problems, on_pair=None):
    """Check PREFIX.SRC and PREFIX.TGT line by line; calls ``on_pair(line, (s, t))`` for each
    pair and returns the number of lines (of the longer file)."""
    src_path, tgt_path = f"{prefix}.{src}", f"{prefix}.{tgt}"
    n_src = n_tgt = both_empty = 0
    pairs = itertools.zip_longest(checked_lines(src_path, problems), checked_lines(tgt_path, problems))
    for i, (s, t) in enumerate(tqdm(pairs, desc=prefix, unit=" lines", disable=None, leave=False), 1):
        n_src += s is not None
        n_tgt += t is not None
        if s is None or t is None:
            continue
        s_len, t_len = len(s.split()), len(t.split())
        if (s_len == 0) != (t_len == 0):
            empty, other = (src_path, tgt_path) if s_len == 0 else (tgt_path, src_path)
            problems.add(empty, i, f"empty line, but {other}:{i} is not: are the files out of step?")
        both_empty += s_len == 0 and t_len == 0
        for path, n in ((src_path, s_len), (tgt_path, t_len)):
            if n + 1 > max_positions:
                problems.add(path, i, f"{n} words + EOS = {n + 1} positions, more than --max-positions "
                                      f"{max_positions}: split or drop the sentence, or train with larger "
                                      "--max-source-positions/--max-target-positions and pass that here")
        if on_pair is not None:
            on_pair(i, (s, t))
    if {src_path, tgt_path} & problems.unreadable:
        pass
    elif n_src != n_tgt:
        problems.add(src_path, 0, f"{n_src} lines but {tgt_path} has {n_tgt}: "
                                  "parallel files must be line-aligned")
    elif n_src == 0:
        problems.add(src_path, 0, "empty file")
    if both_empty:
        print(f"note: {prefix}: {both_empty} line pairs are empty on both sides", file=sys.stderr)
    return max(n_src, n_tgt)


class Overlap:
    """Held-out sentence pairs, and where the training data repeats them."""

    def __init__(self):
        self.held = {}  # pair -> [(prefix, line), ...]
        self.found = {}  # held-out prefix -> [(line, training line), ...]

    def remember(self, prefix):
        return lambda i, pair: self.held.setdefault(pair, []).append((prefix, i))

    def look_up(self, i, pair):
        for prefix, line in self.held.pop(pair, ()):  # first training occurrence only
            self.found.setdefault(prefix, []).append((line, i))

    def warn(self, train_prefix, sizes):
        for prefix, shared in self.found.items():
            line, train_line = min(shared)
            print(f"warning: {prefix}: {len(shared)} of {sizes[prefix]} sentence pairs also occur in "
                  f"{train_prefix} (first: line {line} = line {train_line} there): scores on them "
                  "measure memory, not translation", file=sys.stderr)


def split_prefixes(value):
    return [p for p in (value or "").split(",") if p]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter,
                                     epilog=__doc__.split("\n\n", 1)[1])
    parser.add_argument("prefixes", nargs="*", help="more file prefixes to check (PREFIX.SRC, PREFIX.TGT)")
    parser.add_argument("-s", "--source-lang", required=True)
    parser.add_argument("-t", "--target-lang", required=True)
    parser.add_argument("--trainpref", help="training data prefix (held-out sets are checked against it)")
    parser.add_argument("--validpref", help="validation prefix(es), comma-separated as for fairseq-preprocess")
    parser.add_argument("--testpref", help="test prefix(es), comma-separated")
    parser.add_argument("--max-positions", type=int, default=1024,
                        help="the model's --max-source/target-positions; a sentence of N words needs N + 1")
    parser.add_argument("--max-problems", type=int, default=10, help="problems listed per file")
    parser.add_argument("--control-characters", choices=["error", "keep"], default="error",
                        help="keep: control characters that no reader takes for a line break (such "
                             "as C1 mojibake, U+0080-U+009F, in WMT data) are counted in one warning "
                             "per file instead of errors (default: %(default)s)")
    args = parser.parse_args(argv)
    held_out = split_prefixes(args.validpref) + split_prefixes(args.testpref)
    named = split_prefixes(args.trainpref) + held_out
    if not named and not args.prefixes:
        parser.error("give --trainpref/--validpref/--testpref or file prefixes")
    if args.trainpref and any(os.path.abspath(p) == os.path.abspath(args.trainpref) for p in held_out):
        parser.error(f"{args.trainpref} is given as training data and as a held-out set: scores on it "
                     "would measure memory, not translation")

    problems = Problems(args.max_problems, keep_control=args.control_characters == "keep")
    overlap, sizes = Overlap(), {}
    for prefix in held_out + args.prefixes:  # held-out sets first: the training pass looks them up
        remember = overlap.remember(prefix) if prefix in held_out else None
        sizes[prefix] = check_pair(prefix, args.source_lang, args.target_lang, args.max_positions,
                                   problems, on_pair=remember)
    if args.trainpref:
        sizes[args.trainpref] = check_pair(args.trainpref, args.source_lang, args.target_lang,
                                           args.max_positions, problems, on_pair=overlap.look_up)
    problems.warn_kept()
    if problems.report():
        return 1
    if args.trainpref:
        overlap.warn(args.trainpref, sizes)
    for prefix in named + args.prefixes:
        print(f"ok: {prefix}.{{{args.source_lang},{args.target_lang}}}: {sizes[prefix]} sentence pairs",
              file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
