#!/usr/bin/env python3
"""Alignment error rate of TEST word alignments against GOLD ones (Och & Ney 2003).

AER = 1 - (|A & S| + |A & P|) / (|A| + |S|), with A the test links, S the gold's sure
links and P its possible links (P includes S), counted over the whole corpus; also
precision |A & P| / |A| and recall |A & S| / |S|. Luong et al. (2015, section 5.4,
Table 6) score their models' one-to-one alignments this way.

Link files have one line per sentence, line-aligned: ``i-j`` is a sure link, ``ipj``
(TALP style) a possible one. Links are compared in the order the GOLD file writes them;
``--swap-test`` reads TEST links the other way round (e.g. force_align.py of a model
translating the gold's second side into its first). Indices are 1-based in gold files
such as KFTT's and RWTH's (``--gold-index 1``, the default) and 0-based in Pharaoh files
such as force_align.py's (``--test-index 0``, the default).

With ``--first-text``/``--second-text`` (the sentences of the gold's first and second
side) every link must lie inside its sentence: an out-of-range test link is an error; an
out-of-range gold link is an error too, unless ``--drop-out-of-range-gold``, which drops
it and names it on stderr (the KFTT ja-en gold set has 6, in sentences 351, 354, 355
and 356, which point past the end of the sentence).

Example (KFTT, a ja->en model aligned by force_align.py):
  python scripts/aer.py ../shared/data/kftt_gold_align_ja_en/jaen.gold kftt.align \\
      --first-text ../shared/data/kftt_gold_align_ja_en/jaen.ja \\
      --second-text ../shared/data/kftt_gold_align_ja_en/jaen.en --drop-out-of-range-gold
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from fairseq_luong.analysis.alignment import (  # noqa: E402
    AlignmentError,
    Links,
    aer_counts,
    out_of_range,
    read_links,
)


def read_text(path):
    try:
        with open(path, encoding="utf-8") as f:
            return [len(line.split()) for line in f]
    except (OSError, UnicodeDecodeError) as err:
        raise SystemExit(f"error: {path}: {err}")


def check_ranges(name, path, links, first, second, drop):
    kept = []
    for n, (sent, a, b) in enumerate(zip(links, first, second), 1):
        bad = out_of_range(sent, a, b)
        if bad and not drop:
            raise SystemExit(f"error: {path}:{n}: link(s) {bad} (0-based) outside the sentence "
                             f"({a} x {b} words){' (--drop-out-of-range-gold drops them)' if name == 'gold' else ''}")
        for link in bad:
            print(f"note: {path}:{n}: dropped gold link {link[0] + 1}-{link[1] + 1} "
                  f"outside the sentence ({a} x {b} words)", file=sys.stderr)
        kept.append(Links(sent.sure - set(bad), sent.possible - set(bad)))
    return kept


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    parser.add_argument("gold")
    parser.add_argument("test")
    parser.add_argument("--gold-index", type=int, choices=(0, 1), default=1, help="gold links' first index")
    parser.add_argument("--test-index", type=int, choices=(0, 1), default=0, help="test links' first index")
    parser.add_argument("--swap-test", action="store_true", help="test links put the gold's second side first")
    parser.add_argument("--first-text", default=None, help="sentences of the gold's first side (range check)")
    parser.add_argument("--second-text", default=None, help="sentences of the gold's second side")
    parser.add_argument("--drop-out-of-range-gold", action="store_true")
    args = parser.parse_args(argv)

    try:
        gold = read_links(args.gold, args.gold_index == 1, target_first=False)
        test = read_links(args.test, args.test_index == 1, target_first=args.swap_test)
    except AlignmentError as err:
        raise SystemExit(f"error: {err}")
    except (OSError, UnicodeDecodeError) as err:
        raise SystemExit(f"error: {err}")
    if len(gold) != len(test):
        raise SystemExit(f"error: {args.gold} has {len(gold)} lines but {args.test} has {len(test)}")
    if bool(args.first_text) != bool(args.second_text):
        raise SystemExit("error: give both --first-text and --second-text (or neither)")
    if args.first_text:
        first, second = read_text(args.first_text), read_text(args.second_text)
        for path, lengths in ((args.first_text, first), (args.second_text, second)):
            if len(lengths) != len(gold):
                raise SystemExit(f"error: {path} has {len(lengths)} lines but {args.gold} has {len(gold)}")
        gold = check_ranges("gold", args.gold, gold, first, second, args.drop_out_of_range_gold)
        check_ranges("test", args.test, test, first, second, drop=False)
    counts = aer_counts(gold, [t.sure | t.possible for t in test])
    n_possible = sum(len(g.sure | g.possible) for g in gold)
    print(f"AER = {counts.aer:.4f}  (precision {counts.precision:.4f}, recall {counts.recall:.4f}; "
          f"{len(gold)} sentences, |A| = {counts.a}, |S| = {counts.s}, |P| = {n_possible})")


if __name__ == "__main__":
    main()
