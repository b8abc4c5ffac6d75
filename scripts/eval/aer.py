#!/usr/bin/env python3
"""Alignment error rate of TEST word alignments against GOLD ones (Och & Ney 2003).

AER = 1 - (|A & S| + |A & P|) / (|A| + |S|), with A the test links, S the gold's sure
links and P its possible links (P includes S), counted over the whole corpus; also
precision |A & P| / |A| and recall |A & S| / |S|. Luong et al. (2015, section 5.4,
Table 6) score their models' one-to-one alignments this way.

Link files have one line per sentence, line-aligned: ``i-j`` is a sure link, ``ipj``
(TALP style) a possible one. Links are compared in the order the GOLD file writes them;
``--swap-test`` reads TEST links the other way round (e.g. force_align.py of a model
translating the gold's second side into its first).

Indexing is read off each file unless given (``--gold-index``, ``--test-index``): a file
with a position 0 is 0-indexed (force_align.py's and diagonal_align.py's Pharaoh links:
every non-empty line links the first target word), one without is 1-indexed (TALP gold
files such as RWTH's and KFTT's). So two files in the same format give AER 0 against
each other, whatever the format. The result line says how each file was read.

With ``--first-text``/``--second-text`` (the sentences of the gold's first and second
side) every link must lie inside its sentence: an out-of-range test link is an error; an
out-of-range gold link is an error too, unless ``--drop-out-of-range-gold``, which drops
it and names it on stderr (the KFTT ja-en gold set has 6, in sentences 351, 354, 355
and 356, which point past the end of the sentence). The sentences also check what a
file cannot show by itself: a file without position 0 must link some sentence's last
word by its 1-indexed position (else 0- and 1-indexed readings both fit, and it is an
error naming the option), and TEST links that fit their sentences only with the sides
the other way round are an error naming --swap-test.

Example (KFTT, a ja->en model aligned by force_align.py):
  python scripts/eval/aer.py ../shared/data/kftt_gold_align_ja_en/jaen.gold kftt.align \\
      --first-text ../shared/data/kftt_gold_align_ja_en/jaen.ja \\
      --second-text ../shared/data/kftt_gold_align_ja_en/jaen.en --drop-out-of-range-gold
"""
import argparse
import sys

from fairseq_luong.analysis.alignment import (
    AlignmentError,
    Links,
    aer_counts,
    out_of_range,
    read_link_file,
    read_links,
)
from fairseq_luong.analysis.text_files import read_lines
from fairseq_luong.data.text import DataError


def sentence_lengths(path):
    """Words per line of ``path``."""
    return [len(line.split()) for line in read_lines(path)]


def outside(sentences, first, second):
    """(number of links outside their sentences, first line with one)."""
    count, line = 0, None
    for n, (sent, a, b) in enumerate(zip(sentences, first, second), 1):
        bad = out_of_range(sent, a, b)
        count += len(bad)
        if bad and line is None:
            line = n
    return count, line


def check_indexing(path, links, option, swapped, first, second):
    """A file read as 1-indexed for want of a position 0 must show it with the sentences at
    hand: some link to a sentence's last word by its 1-indexed position n, which a
    0-indexed file cannot have. A file with neither could be both: an error naming the
    option that says which."""
    if not links.one_based or links.why.startswith("--"):
        return
    as_written = read_links(path, False, swapped)  # (first side, second side) positions as written
    for sent, a, b in zip(as_written, first, second):
        if any(s == a or t == b for s, t in sent.sure | sent.possible):
            return
    raise SystemExit(f"error: {path}: cannot tell whether its links are 0- or 1-indexed: none has position 0 "
                     "(only 0-indexed files have one) or the position of a sentence's last word counted from 1 "
                     f"(only 1-indexed files have one); give {option} 0 or {option} 1")


def check_sides(path, test, swap, first, second):
    """TEST links that fit their sentences only with the sides the other way round are an
    error naming --swap-test."""
    n_here, line = outside(test.sentences, first, second)
    n_other, _ = outside(read_links(path, test.one_based, not swap), first, second)
    if n_here and not n_other:
        how, other, fix = (("with --swap-test", "in the gold's order", "drop --swap-test") if swap else
                           ("in the gold's order", "the other way round", "give --swap-test"))
        raise SystemExit(f"error: {path}: read {how}, {n_here} of its links fall outside their sentences (first: "
                         f"line {line}); read {other}, none does: {fix}")


def check_ranges(name, path, links, first, second, drop):
    kept, dropped = [], 0
    for n, (sent, a, b) in enumerate(zip(links, first, second), 1):
        bad = out_of_range(sent, a, b)
        if bad and not drop:
            raise SystemExit(f"error: {path}:{n}: link(s) {bad} (0-based) outside the sentence "
                             f"({a} x {b} words){' (--drop-out-of-range-gold drops them)' if name == 'gold' else ''}")
        for link in bad:
            print(f"note: {path}:{n}: dropped gold link {link[0] + 1}-{link[1] + 1} "
                  f"outside the sentence ({a} x {b} words)", file=sys.stderr)
        dropped += len(bad)
        kept.append(Links(sent.sure - set(bad), sent.possible - set(bad)))
    return kept, dropped


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    parser.add_argument("gold")
    parser.add_argument("test")
    parser.add_argument("--gold-index", type=int, choices=(0, 1), default=None,
                        help="gold links' first index (default: read off the file, see below)")
    parser.add_argument("--test-index", type=int, choices=(0, 1), default=None,
                        help="test links' first index (default: read off the file)")
    parser.add_argument("--swap-test", action="store_true", help="test links put the gold's second side first")
    parser.add_argument("--first-text", default=None, help="sentences of the gold's first side (range check)")
    parser.add_argument("--second-text", default=None, help="sentences of the gold's second side")
    parser.add_argument("--drop-out-of-range-gold", action="store_true")
    args = parser.parse_args(argv)

    try:
        gold = read_link_file(args.gold, args.gold_index, False, "--gold-index")
        test = read_link_file(args.test, args.test_index, args.swap_test, "--test-index")
    except (AlignmentError, DataError) as err:
        raise SystemExit(f"error: {err}")
    if not gold.sentences:
        raise SystemExit(f"error: {args.gold} is empty: no gold alignment to score against")
    if len(gold.sentences) != len(test.sentences):
        raise SystemExit(f"error: {args.gold} has {len(gold.sentences)} lines but {args.test} has "
                         f"{len(test.sentences)}")
    if bool(args.first_text) != bool(args.second_text):
        raise SystemExit("error: give both --first-text and --second-text (or neither)")
    gold_links, dropped = gold.sentences, 0
    if args.first_text:
        first, second = sentence_lengths(args.first_text), sentence_lengths(args.second_text)
        for path, lengths in ((args.first_text, first), (args.second_text, second)):
            if len(lengths) != len(gold.sentences):
                raise SystemExit(f"error: {path} has {len(lengths)} lines but {args.gold} has {len(gold.sentences)}")
        check_indexing(args.gold, gold, "--gold-index", False, first, second)
        gold_links, dropped = check_ranges("gold", args.gold, gold.sentences, first, second,
                                           args.drop_out_of_range_gold)
        check_indexing(args.test, test, "--test-index", args.swap_test, first, second)
        check_sides(args.test, test, args.swap_test, first, second)
        check_ranges("test", args.test, test.sentences, first, second, drop=False)
    counts = aer_counts(gold_links, [t.sure | t.possible for t in test.sentences])
    n_possible = sum(len(g.sure | g.possible) for g in gold_links)
    order = "second side first (--swap-test)" if args.swap_test else "the gold's order"
    print(f"AER = {counts.aer:.4f}  (precision {counts.precision:.4f}, recall {counts.recall:.4f}; "
          f"{len(gold_links)} sentences, |A| = {counts.a}, |S| = {counts.s}, |P| = {n_possible}; "
          f"gold {gold.indexing}, test {test.indexing}, {order}"
          f"{f'; {dropped} out-of-range gold links dropped' if dropped else ''})")


if __name__ == "__main__":
    main()
