#!/usr/bin/env python3
"""How often --print-alignment links a word to the source word it translates.

  python scripts/eval/lexicon_alignment.py GENERATE_OUT --source TEST.SRC --lexicon LEXICON.TSV

For every hypothesis word that LEXICON.TSV lists (a target word, a TAB, the source words
it translates: ``scripts/data/make_number_corpus.py`` writes one for its corpus), its A-
link (fairseq's convention: target position -> source position) is right when the linked
source word is one of its partners. Prints the share of right links, their count and the
words most often linked wrong. The source is the raw test source file (S- lines may hold
<unk>), one sentence a line, in test order.
"""
import argparse
import collections
import sys

from fairseq_luong.analysis.generate_output import GenerateOutputError, read_generate_output
from fairseq_luong.data.text import DataError, read_lines


def read_lexicon(path):
    out = {}
    for lineno, line in enumerate(read_lines(path), 1):
        target, tab, sources = line.partition("\t")
        if not tab or not target or not sources.split():
            raise DataError(f"{path}:{lineno}: lexicon lines are 'TARGET<TAB>SOURCE [SOURCE ...]', got {line!r}")
        out[target] = set(sources.split())
    if not out:
        raise DataError(f"{path} is empty: no word to check")
    return out


def link_accuracy(translations, sources, lexicon):
    """(right, total, Counter of (target word, linked source word) linked wrong)."""
    right = total = 0
    wrong = collections.Counter()
    for i, t in translations.items():
        if t.alignment is None:
            raise DataError(f"sentence {i} has no A- line: translate with --print-alignment")
        hyp = (t.hypothesis or "").split()
        for link in t.alignment.split():
            s, j = map(int, link.split("-"))
            if j < len(hyp) and hyp[j] in lexicon:
                total += 1
                ok = s < len(sources[i]) and sources[i][s] in lexicon[hyp[j]]
                right += ok
                if not ok:
                    wrong[(hyp[j], sources[i][s] if s < len(sources[i]) else "</s>")] += 1
    return right, total, wrong


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], epilog=__doc__.split("\n\n", 1)[1],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("generate_out", help="fairseq-generate output with --print-alignment")
    parser.add_argument("--source", required=True, help="the raw test source, one sentence a line")
    parser.add_argument("--lexicon", required=True, help="TARGET<TAB>SOURCE words, one target word a line")
    args = parser.parse_args(argv)
    try:
        translations = read_generate_output(args.generate_out)
        sources = [line.split() for line in read_lines(args.source)]
        lexicon = read_lexicon(args.lexicon)
        if not translations:
            raise DataError(f"{args.generate_out}: no translation in it")
        if max(translations) >= len(sources):
            raise DataError(f"{args.generate_out} has sentence {max(translations)}, {args.source} only "
                            f"{len(sources)} lines")
        right, total, wrong = link_accuracy(translations, sources, lexicon)
    except (DataError, GenerateOutputError) as err:
        raise SystemExit(f"error: {err}")
    if not total:
        raise SystemExit(f"error: no hypothesis word of {args.generate_out} is in {args.lexicon}")
    worst = ", ".join(f"{t}<-{s} ({n})" for (t, s), n in wrong.most_common(3))
    print(f"alignment: {100 * right / total:.1f}% of the {total:,} hypothesis words with a lexicon partner are "
          f"linked to it ({right:,}; fairseq's --print-alignment: the most attended source word)"
          + (f"; most often wrong: {worst}" if wrong else ""), file=sys.stdout)


if __name__ == "__main__":
    main()
