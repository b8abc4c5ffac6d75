#!/usr/bin/env python3
"""Keep the training pairs of the WMT'14 release that the paper trains on, read as fairseq reads them.

  python filter_pairs.py SRC TGT OUT_PREFIX --src-lang en --tgt-lang de --max-words 50

Luong et al. (2015), section 4.1: "we filter out sentence pairs whose lengths exceed 50
words". A pair is kept when both sides have 1 to --max-words words (whitespace-separated,
as fairseq-preprocess splits them). The files are read line by line at "\\n" only, as
bytes, so one odd character cannot shift one side against the other; a pair is also
dropped (and counted, with the first line) when a side is not valid UTF-8 (fairseq-
preprocess would stop on it) or holds a character that some reader takes for a line break:
a carriage return inside the line (fairseq-preprocess reads text with universal newlines
and would split the line there, shifting every later pair), U+000B, U+000C, U+001C-U+001E,
U+0085, U+2028, U+2029 (str.splitlines and many tools). Both files must have as many
lines. The kept pairs go to OUT_PREFIX.SRC and OUT_PREFIX.TGT, written whole or not at
all; one summary line goes to stderr. The real release is 4.5M pairs: memory stays
constant (one pair at a time).
"""
import argparse
import os
import re
import sys

LINE_BREAKING = re.compile("[\r\x0b\x0c\x1c-\x1e\x85\u2028\u2029]")


def read_pairs(src, tgt):
    """(line number, source text or None, target text or None, reason) per line pair."""
    with open(src, "rb") as fs, open(tgt, "rb") as ft:
        lineno = 0
        for lineno, (s, t) in enumerate(zip(fs, ft), 1):
            sides, reason = [], None
            for raw in (s, t):
                raw = raw.rstrip(b"\n")
                if raw.endswith(b"\r"):  # \r\n: one line break for every reader
                    raw = raw[:-1]
                try:
                    text = raw.decode("utf-8")
                except UnicodeDecodeError:
                    reason = reason or "not valid UTF-8"
                    text = ""
                if LINE_BREAKING.search(text):
                    reason = reason or "a character that readers take for a line break"
                sides.append(text)
            yield lineno, sides[0], sides[1], reason
        if fs.readline() or ft.readline():
            raise SystemExit(f"filter_pairs.py: error: {src} and {tgt} differ in line count "
                             f"(one ends after line {lineno})")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], epilog=__doc__.split("\n\n", 1)[1],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("src")
    parser.add_argument("tgt")
    parser.add_argument("out_prefix")
    parser.add_argument("--src-lang", required=True)
    parser.add_argument("--tgt-lang", required=True)
    parser.add_argument("--max-words", type=int, required=True)
    args = parser.parse_args(argv)
    outs = [f"{args.out_prefix}.{lang}" for lang in (args.src_lang, args.tgt_lang)]
    total = kept = 0
    dropped = {}  # reason -> [count, first line]
    try:
        with open(outs[0] + ".part", "w", encoding="utf-8") as fs, \
                open(outs[1] + ".part", "w", encoding="utf-8") as ft:
            for lineno, s, t, reason in read_pairs(args.src, args.tgt):
                total += 1
                if reason is None:
                    n_s, n_t = len(s.split()), len(t.split())
                    if n_s == 0 or n_t == 0:
                        reason = "empty on a side"
                    elif n_s > args.max_words or n_t > args.max_words:
                        reason = f"over {args.max_words} words"
                if reason:
                    seen = dropped.setdefault(reason, [0, lineno])
                    seen[0] += 1
                    continue
                fs.write(s + "\n")
                ft.write(t + "\n")
                kept += 1
        for out in outs:
            os.replace(out + ".part", out)
    finally:
        for out in outs:
            if os.path.exists(out + ".part"):
                os.remove(out + ".part")
    why = "; ".join(f"{n} {reason} (first: line {first})" for reason, (n, first) in dropped.items())
    print(f"kept {kept} of {total} pairs with 1..{args.max_words} words on both sides"
          + (f"; dropped: {why}" if why else ""), file=sys.stderr)


if __name__ == "__main__":
    main()
