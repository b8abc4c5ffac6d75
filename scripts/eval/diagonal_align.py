#!/usr/bin/env python3
"""A trivial aligner for scale: target word j -> source word floor((j + 0.5) * S / T).

One link per target word on the diagonal of the S x T sentence pair (S source and T
target words), in force_align.py's format: one line per sentence of 0-based Pharaoh
links ``i-j`` (source-target), and a line on stderr saying so. An AER baseline that
knows only the sentence lengths.

Example:
  python scripts/eval/diagonal_align.py --source jaen.ja --target jaen.en > diagonal.align
  python scripts/eval/aer.py jaen.gold diagonal.align --first-text jaen.ja --second-text jaen.en \\
      --drop-out-of-range-gold
"""
import argparse
import logging
import sys

# fairseq's first import sets up logging at DEBUG and logs INFO lines ("Please install
# tensorboardX"); this script's output is its own lines, so logging is set up first
logging.basicConfig(format="%(levelname)s: %(message)s", level=logging.WARNING)
from fairseq_luong.analysis.text_files import read_lines  # noqa: E402


def diagonal_links(n_source, n_target):
    if n_source == 0:
        return []
    return [(min(int((j + 0.5) * n_source / n_target), n_source - 1), j) for j in range(n_target)]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    parser.add_argument("--source", required=True)
    parser.add_argument("--target", required=True)
    args = parser.parse_args(argv)
    src = [len(line.split()) for line in read_lines(args.source)]
    tgt = [len(line.split()) for line in read_lines(args.target)]
    if not src:
        raise SystemExit(f"error: {args.source} is empty: no sentence to align")
    if len(src) != len(tgt):
        raise SystemExit(f"error: {args.source} has {len(src)} lines but {args.target} has {len(tgt)}")
    n_links = 0
    for s, t in zip(src, tgt):
        links = diagonal_links(s, t)
        n_links += len(links)
        print(" ".join(f"{i}-{j}" for i, j in links))
    print(f"diagonal_align.py: {len(src)} sentences, {n_links} links: 0-indexed i-j, i the source word "
          f"({args.source}), j the target word ({args.target}), target word j -> source word "
          "floor((j + 0.5) S / T)", file=sys.stderr)


if __name__ == "__main__":
    main()
