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
import itertools
import sys

from fairseq_luong.data.text import LINE_BREAKING, iter_lines, whole_output


def read_pairs(src, tgt):
    """(line number, source text, target text, reason to drop it or None) per line pair,
    read by the package's line reader (only "\\n" ends a line)."""
    invalid = set()  # (side, line number) that are not UTF-8, reported by iter_lines
    sides = [iter_lines(path, on_invalid=lambda lineno, _msg, side=side: invalid.add((side, lineno)))
             for side, path in enumerate((src, tgt))]
    lineno = 0
    for s, t in itertools.zip_longest(*sides):
        if s is None or t is None:
            raise SystemExit(f"filter_pairs.py: error: {src} and {tgt} differ in line count "
                             f"(one ends after line {lineno})")
        lineno = s[0]
        reason = None
        if (0, lineno) in invalid or (1, lineno) in invalid:
            reason = "not valid UTF-8"
            invalid.difference_update({(0, lineno), (1, lineno)})
        elif any("\r" in text or LINE_BREAKING.search(text) for text in (s[1], t[1])):
            # a \r inside the line too: fairseq-preprocess reads with universal newlines
            reason = "a character that readers take for a line break"
        yield lineno, s[1], t[1], reason


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
    with whole_output(outs[0]) as fs, whole_output(outs[1]) as ft:
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
    why = "; ".join(f"{n} {reason} (first: line {first})" for reason, (n, first) in dropped.items())
    print(f"kept {kept} of {total} pairs with 1..{args.max_words} words on both sides"
          + (f"; dropped: {why}" if why else ""), file=sys.stderr)


if __name__ == "__main__":
    main()
