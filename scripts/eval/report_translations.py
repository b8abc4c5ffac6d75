#!/usr/bin/env python3
"""Score fairseq-generate output with sacreBLEU against the raw reference text; show alignments.

Reads the S-/T-/H-/D-/A- lines fairseq-generate prints (``--print-alignment``
gives the A- lines: ``srcpos-tgtpos`` pairs, 0-based positions of the H- words) and
scores the best hypothesis of each sentence with sacreBLEU's own API (fairseq-score
--sacrebleu is broken with sacrebleu 2) against --ref, the reference file itself: line
N + 1 is the reference of sample N. The hypothesis is the D- line, fairseq's
detokenised output (what --tokenizer/--bpe give back; the H- line without them), or
the H- line where there is no D- line. The score line ends with what was scored
against what and sacreBLEU's signature (tokenizer, case). Never against fairseq's T- lines: there
every word outside the target dictionary is ``<<unk>>``, which sacreBLEU
splits into 5 tokens, so the reference is longer and partly made up (on a
Multi30k slice the reference scored against itself got 52.5 BLEU).

Usage: python scripts/eval/report_translations.py generate.out --ref data/test.de [--examples 3] [--tokenize 13a]
"""
import argparse
import logging
import sys

from sacrebleu.metrics import BLEU

# fairseq's first import sets up logging at DEBUG and logs INFO lines ("Please install
# tensorboardX"); this script's output is its own lines, so logging is set up first
logging.basicConfig(format="%(levelname)s: %(message)s", level=logging.WARNING)
from fairseq_luong.analysis.generate_output import GenerateOutputError, read_generate_output  # noqa: E402
from fairseq_luong.analysis.text_files import read_lines  # noqa: E402


def read_references(path, ids, generate_out):
    """The lines of ``path`` for sample ids ``ids``; every line must have a translation."""
    refs = read_lines(path)
    if ids[-1] >= len(refs):
        raise SystemExit(f"error: {generate_out}: sample {ids[-1]} has no reference: {path} has only "
                         f"{len(refs)} lines (is it the test set's target side?)")
    missing = sorted(set(range(len(refs))) - set(ids))
    if missing:
        raise SystemExit(f"error: {path}:{missing[0] + 1}: no translation of this line (and "
                         f"{len(missing) - 1} more) in {generate_out}: was fairseq-generate's output cut "
                         "short, or given another --gen-subset?")
    return [refs[i] for i in ids]


def show_alignment(src, hyp, alignment):
    src_words, hyp_words = src.split(), hyp.split()
    pairs = []
    for link in alignment.split():
        s, t = (int(x) for x in link.split("-"))
        if s < len(src_words) and t < len(hyp_words):
            pairs.append(f"{hyp_words[t]}<-{src_words[s]}")
    return " ".join(pairs)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("generate_out")
    parser.add_argument("--ref", required=True,
                        help="the raw reference text, one sentence a line (the test set's target file)")
    parser.add_argument("--examples", type=int, default=3, help="translations to show")
    parser.add_argument("--tokenize", default="13a", help="sacreBLEU tokenizer (13a, ja-mecab, ...)")
    args = parser.parse_args(argv)
    try:
        entries = read_generate_output(args.generate_out)
    except GenerateOutputError as err:
        raise SystemExit(f"error: {err}")
    if not entries:
        raise SystemExit(f"error: {args.generate_out}: no fairseq-generate output lines (S-/T-/H-) found")
    ids = [i for i, e in entries.items() if e.hypothesis is not None]
    if not ids:
        raise SystemExit(f"error: {args.generate_out}: no hypothesis (H- line)")
    scored = "detokenized" if all(entries[i].detokenized is not None for i in ids) else "hypothesis"
    hyps = [getattr(entries[i], scored) for i in ids]
    refs = read_references(args.ref, ids, args.generate_out)
    unk_lines = sum("<unk>" in (entries[i].target or "") for i in ids)
    if unk_lines:
        print(f"note: {unk_lines} of {len(ids)} T- lines hold <unk> (words outside the dictionary); "
              f"scored against {args.ref} as it is")
    metric = BLEU(tokenize=args.tokenize)
    bleu = metric.corpus_score(hyps, [refs])
    what = "D- lines (detokenised)" if scored == "detokenized" else "H- lines (no D- lines in it)"
    print(f"sacreBLEU = {bleu.score:.2f}  ({bleu})  [{what} of {args.generate_out} against {args.ref} as it is; "
          f"{metric.get_signature()}]")
    exact = sum(h == r for h, r in zip(hyps, refs))
    print(f"exact matches: {exact}/{len(ids)} sentences")
    for i, ref in list(zip(ids, refs))[: args.examples]:
        e = entries[i]
        print(f"\n  source     : {e.source or ''}\n  reference  : {ref}\n  translation: {getattr(e, scored)}")
        if e.alignment is not None:
            shown = show_alignment(e.source or "", e.hypothesis, e.alignment)
            print(f"  alignment  : {e.alignment}\n  (hyp<-src) : {shown}")


if __name__ == "__main__":
    sys.exit(main())
