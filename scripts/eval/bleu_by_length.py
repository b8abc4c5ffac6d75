#!/usr/bin/env python3
"""BLEU by source sentence length (Luong et al. 2015, Fig. 6): a table and a PNG plot.

Groups the test sentences by the number of words (whitespace tokens) of their source,
computes sacreBLEU per group for each system against the raw reference text (never
fairseq's T- lines), prints a table and writes a line plot (--png). Default groups are
the paper's: <=10, 11-20, ..., 61-70, >70 (``--edges 10 20 30 40 50 60 70``). A system
file is plain text (one translation a line) or fairseq-generate output (its D- lines,
i.e. detokenised hypotheses, the best of --nbest, in sentence order). Also prints the
whole test set's BLEU. The line above the table names what decides the numbers:
sacreBLEU's signature (tokenizer, case), the buckets, the reference file and which lines
of each system file were read; a source split into subword pieces gets a warning (the
buckets would count pieces).

Example:
  python scripts/eval/bleu_by_length.py --source test.en --reference test.de \\
      global=gen_global.out localp=gen_localp.out --png bleu_by_length.png
"""
import argparse
import os
import sys

from fairseq_luong.analysis.text_files import read_lines


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    parser.add_argument("systems", nargs="+", metavar="[NAME=]FILE", help="translations of each system")
    parser.add_argument("--source", required=True, help="source sentences (their lengths group the test set)")
    parser.add_argument("--reference", required=True, help="raw reference translations")
    parser.add_argument("--edges", type=int, nargs="+", default=None,
                        help="upper bucket edges in words (default: the paper's 10 20 ... 70)")
    parser.add_argument("--tokenize", default="13a", help="sacreBLEU tokenizer (13a, intl, ja-mecab, ...)")
    parser.add_argument("--lowercase", action="store_true", help="case-insensitive BLEU (sacreBLEU -lc)")
    parser.add_argument("--png", required=True, help="where to write the line plot of BLEU per bucket")
    args = parser.parse_args(argv)

    from sacrebleu.metrics import BLEU

    from fairseq_luong.analysis.bleu_by_length import (
        PAPER_EDGES,
        bleu_by_length,
        buckets,
        read_system,
        subword_marks,
    )
    from fairseq_luong.analysis.text_files import named_files

    sources, references = read_lines(args.source), read_lines(args.reference)
    if not sources:
        raise SystemExit(f"error: {args.source} is empty: no sentence to group and score")
    if len(sources) != len(references):
        raise SystemExit(f"error: {args.source} has {len(sources)} lines but {args.reference} has {len(references)}")
    try:
        groups = buckets(args.edges or PAPER_EDGES)
        read = {name: (path, *read_system(path, len(sources))) for name, path in named_files(args.systems)}
    except ValueError as err:
        raise SystemExit(f"error: {err}")
    systems = {name: lines for name, (_, lines, _) in read.items()}
    marks = subword_marks(sources)
    if marks:
        print(f"warning: {args.source} looks split into {marks} pieces: the buckets count its pieces, not its "
              "words; give the source text in words", file=sys.stderr)
    lengths = [len(s.split()) for s in sources]
    scores, counts = bleu_by_length(lengths, references, systems, groups, args.tokenize, args.lowercase)
    names = list(systems)
    metric = BLEU(tokenize=args.tokenize, lowercase=args.lowercase)
    total = [metric.corpus_score(systems[n], [references]).score for n in names]
    # the result line: every convention that decides the numbers
    print(f"sacreBLEU ({metric.get_signature()}) by source length: the {len(sources)} sentences of {args.source} "
          f"grouped by their number of whitespace-separated tokens ({groups[0].label}, ..., {groups[-1].label}), "
          f"against {args.reference} as it is; "
          + "; ".join(f"{n}: {path}, {what}" for n, (path, _, what) in read.items()) + "\n")
    print("| source words | sentences | " + " | ".join(names) + " |")
    print("|---|---|" + "---|" * len(names))
    for k, group in enumerate(groups):
        cells = ["-" if scores[n][k] is None else f"{scores[n][k]:.2f}" for n in names]
        print(f"| {group.label} | {counts[k]} | " + " | ".join(cells) + " |")
    print(f"| all | {len(sources)} | " + " | ".join(f"{t:.2f}" for t in total) + " |")
    from fairseq_luong.analysis.plots import plot_bleu_by_length

    plot_bleu_by_length([g.label for g in groups], [(n, scores[n]) for n in names], args.png,
                        title=f"BLEU by source length ({os.path.basename(args.reference)})")
    print(f"\nplot: {args.png}")


if __name__ == "__main__":
    main()
