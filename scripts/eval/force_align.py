#!/usr/bin/env python3
"""Forced alignment from a model's (or an ensemble's) attention: Pharaoh links per sentence.

Teacher-forces each reference translation (TARGET, line-aligned with SOURCE) through the
models, and links every target word to the source word of highest attention, one link
per target word as in Luong et al. (2015, section 5.4). A last line on stderr says what
was written and with which conventions (indexing, sides, rows, subwords). With an ensemble
(``--path a.pt:b.pt``) the attention is averaged over the models. The appended EOS is
never a link (its column is dropped). Writes one line per sentence of 0-based links
``i-j`` (i: source word, j: target word); an empty source or target line gives an empty
line.

Which step's attention aligns a word: by default row t (the step that predicts y_t)
aligns y_t, as fairseq's --print-alignment. ``--paper-convention``: footnote 14, a
content-based score's (dot, general, concat) a_t aligns the INPUT word y_{t-1}, so word
y_t takes the next step's row; the location score's rows stay as they are (models other
than ours: as they are).

Subwords: with ``--spm-model`` (SentencePiece, the model the data was encoded with;
``--spm-model-target`` if the target side has its own) each line of words is encoded
into pieces; with ``--bpe-marker @@`` the lines are already subword-nmt pieces. Pieces
are folded into words: a source word receives the sum of its pieces' weights, a target
word the mean of its pieces' rows; links and indices are words.

Example:
  python scripts/eval/force_align.py data-bin --path ckpt/checkpoint_best.pt \\
      --source test.ja --target test.en -s ja -t en --paper-convention > test.align
  python scripts/eval/aer.py gold.align test.align
"""
import argparse
import os
import sys

from fairseq_luong.analysis.text_files import add_model_arguments, read_lines


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    add_model_arguments(parser, target_help=None)
    parser.add_argument("--bpe-marker", default=None, help="the text is already subword-nmt pieces ('@@')")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--output", default="-", help="links file (default: stdout)")
    args = parser.parse_args(argv)

    src_lines, tgt_lines = read_lines(args.source), read_lines(args.target)
    if not src_lines:
        raise SystemExit(f"error: {args.source} is empty: no sentence to align")
    if len(src_lines) != len(tgt_lines):
        raise SystemExit(f"error: {args.source} has {len(src_lines)} lines but {args.target} has {len(tgt_lines)}")
    from fairseq_luong.analysis.segmentation import Segmenter

    pairs, groups = [], []
    try:
        seg_src = Segmenter(args.spm_model, args.bpe_marker)
        seg_tgt = Segmenter(args.spm_model_target or args.spm_model, args.bpe_marker)
        for n, (s, t) in enumerate(zip(src_lines, tgt_lines), 1):
            (s_tok, s_grp), (t_tok, t_grp) = seg_src(s, f"{args.source}:{n}"), seg_tgt(t, f"{args.target}:{n}")
            pairs.append((s_tok, t_tok))
            groups.append((s_grp, t_grp))
    except ValueError as err:
        raise SystemExit(f"error: {err}")

    import torch
    from tqdm import tqdm

    from fairseq_luong.analysis.alignment import fold_into_words, format_links, one_to_one_links
    from fairseq_luong.analysis.forced_attention import forced_attention, load_ensemble

    torch.set_num_threads(min(2, os.cpu_count() or 1))
    models, task = load_ensemble(args.path, args.data, args.source_lang, args.target_lang)
    out_lines = [""] * len(pairs)
    with tqdm(total=len(pairs), desc="force_align", unit="sent", file=sys.stderr,
              disable=len(pairs) < 200) as progress:
        for i, sent in forced_attention(models, task.source_dictionary, task.target_dictionary, pairs,
                                        args.paper_convention, args.batch_size, progress):
            s_grp, t_grp = groups[i]
            if len(sent.source) != len(s_grp) or len(sent.target) != len(t_grp):
                raise SystemExit(f"error: line {i + 1}: the dictionaries split the text differently from the "
                                 "segmenter (check --spm-model / --bpe-marker)")
            words = fold_into_words(sent.rows, s_grp, t_grp)
            out_lines[i] = format_links(one_to_one_links(words))
    out = sys.stdout if args.output == "-" else open(args.output, "w", encoding="utf-8")
    out.write("\n".join(out_lines) + ("\n" if out_lines else ""))
    if out is not sys.stdout:
        out.close()
    print(summary(args, models, out_lines), file=sys.stderr)


def summary(args, models, lines):
    """The result line: what was written, and every convention that decides the links."""
    from fairseq_luong.analysis.forced_attention import aligns_input_word

    n_links = sum(len(line.split()) for line in lines)
    where = "stdout" if args.output == "-" else args.output
    if args.paper_convention:
        paper = sum(aligns_input_word(m) for m in models)
        rows = (f"footnote 14 (--paper-convention): {paper} of {len(models)} model(s) read a_t as the input "
                "word y_{t-1}'s (content-based scores), the others as y_t's")
    else:
        rows = "a_t aligns the predicted word y_t, as fairseq's --print-alignment (not --paper-convention)"
    if args.spm_model:
        words = f"SentencePiece pieces ({args.spm_model}) folded into words (source sum, target mean)"
    elif args.bpe_marker:
        words = f"subword-nmt pieces ('{args.bpe_marker}') folded into words (source sum, target mean)"
    else:
        words = "words as in the text, one token each"
    ensemble = f"; attention averaged over {len(models)} models" if len(models) > 1 else ""
    return (f"force_align.py: {len(lines)} sentences, {n_links} links to {where}: 0-indexed i-j, i the source word "
            f"({args.source}), j the target word ({args.target}), one link per target word; rows: {rows}; "
            f"{words}{ensemble}")


if __name__ == "__main__":
    main()
