#!/usr/bin/env python3
"""Attention heat maps (Luong et al. 2015, Fig. 7): one PNG per chosen sentence.

Draws the attention of a model (or an ensemble's, averaged: ``--path a.pt:b.pt``) with
the source tokens along the top and the target tokens down the side; each row is the
alignment of one target token (fairseq's reading: the step that predicts it;
``--paper-convention``: footnote 14's, a content-based score's a_t belongs to the input
word). The appended EOS column is not drawn. With ``--target`` the given translations are
teacher-forced; without it each sentence is translated first (beam search, ``--beam``)
and the translation's attention is drawn. For local attention (one model) every row
also shows its window [p_t - D, p_t + D] as a red outline and p_t as a blue dot.
``--gold`` adds gold links as crosses (word-level data; a links file as aer.py reads).

Sentences are chosen by their line numbers (1-based) in ``--source``. Tokens are the
model's: with ``--spm-model`` the words are encoded into pieces and the pieces drawn.

Example:
  python scripts/eval/plot_attention.py data-bin --path ckpt_localp/checkpoint_best.pt \\
      --source test.en --target test.de --lines 1 7 42 --out-dir attention/
"""
import argparse
import contextlib
import math
import os

from fairseq_luong.analysis.text_files import add_model_arguments, read_lines


def translate(models, task, source, beam):
    """The best beam-search translation of one source line, as target tokens."""
    import torch
    from fairseq.sequence_generator import SequenceGenerator

    from fairseq_luong.analysis.forced_attention import encode

    tokens = encode(task.source_dictionary, source)
    generator = SequenceGenerator(models, task.target_dictionary, beam_size=beam, max_len_a=1.5, max_len_b=10)
    sample = {"net_input": {"src_tokens": tokens.unsqueeze(0), "src_lengths": torch.tensor([len(tokens)])}}
    with torch.no_grad():
        best = generator.generate(models, sample)[0][0]
    return task.target_dictionary.string(best["tokens"])


def windows_of(p_values, n_tgt, input_word, window, n_src):
    """Per target row: the window (first, last source column) and p_t, from the recorded
    p_t of every step (n_tgt + 1 values), read like the attention rows."""
    import torch

    from fairseq_luong.analysis.alignment import rows_per_target_token

    p = rows_per_target_token(torch.cat([v.reshape(-1) for v in p_values]).unsqueeze(1), n_tgt, input_word)[:, 0]
    spans, centres = [], []
    for value in p.tolist():
        centre = min(math.floor(value), n_src)  # n_src: the EOS position (S - 1)
        first, last = max(centre - window, 0), min(centre + window, n_src - 1)
        spans.append((first, last) if first <= last else None)
        centres.append(min(max(value, -0.5), n_src - 0.5))
    return spans, centres


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    add_model_arguments(parser, target_help="translations to teacher-force (default: translate)")
    parser.add_argument("--lines", type=int, nargs="+", required=True, help="line numbers to draw (1-based)")
    parser.add_argument("--out-dir", required=True, help="where the PNGs go (attention_LINE.png)")
    parser.add_argument("--beam", type=int, default=5, help="beam size when translating")
    parser.add_argument("--gold", default=None, help="gold links to draw (word-level data)")
    parser.add_argument("--gold-index", type=int, choices=(0, 1), default=1)
    parser.add_argument("--swap-gold", action="store_true", help="gold links put the target side first")
    args = parser.parse_args(argv)

    src_lines = read_lines(args.source)
    tgt_lines = read_lines(args.target) if args.target else None
    if tgt_lines is not None and len(tgt_lines) != len(src_lines):
        raise SystemExit(f"error: {args.source} has {len(src_lines)} lines but {args.target} has {len(tgt_lines)}")
    for n in args.lines:
        if not 1 <= n <= len(src_lines):
            raise SystemExit(f"error: --lines {n}: {args.source} has {len(src_lines)} lines")

    import torch

    from fairseq_luong.analysis.alignment import AlignmentError, read_links
    from fairseq_luong.analysis.forced_attention import forced_attention, load_ensemble, recording_windows
    from fairseq_luong.analysis.plots import plot_attention
    from fairseq_luong.analysis.segmentation import Segmenter

    gold = None
    if args.gold:
        try:
            gold = read_links(args.gold, args.gold_index == 1, target_first=args.swap_gold)
        except (AlignmentError, OSError) as err:
            raise SystemExit(f"error: {err}")
    torch.set_num_threads(min(2, os.cpu_count() or 1))
    models, task = load_ensemble(args.path, args.data, args.source_lang, args.target_lang)
    seg_src, seg_tgt = Segmenter(args.spm_model), Segmenter(args.spm_model_target or args.spm_model)
    local = len(models) == 1 and hasattr(getattr(models[0].decoder, "attention", None), "aligned_position")
    from fairseq_luong.analysis.forced_attention import aligns_input_word

    input_word = args.paper_convention and aligns_input_word(models[0])
    for n in args.lines:
        try:
            source = seg_src(src_lines[n - 1], f"{args.source}:{n}")[0]
            target = seg_tgt(tgt_lines[n - 1], f"{args.target}:{n}")[0] if tgt_lines else translate(
                models, task, source, args.beam)
        except ValueError as err:
            raise SystemExit(f"error: {err}")
        recorder = recording_windows(models[0]) if local else contextlib.nullcontext(([], None))
        with recorder as (p_values, window):
            ((_, sent),) = forced_attention(models, task.source_dictionary, task.target_dictionary,
                                            [(source, target)], args.paper_convention, batch_size=1)
        spans = centres = None
        if p_values:
            spans, centres = windows_of(p_values, len(sent.target), input_word, window, len(sent.source))
        links = None
        if gold is not None and n <= len(gold):
            links = {(s, t) for s, t in gold[n - 1].sure | gold[n - 1].possible}
        name = ":".join(os.path.basename(os.path.dirname(os.path.abspath(p))) or p for p in args.path.split(":"))
        path = os.path.join(args.out_dir, f"attention_{n}.png")
        plot_attention(sent.rows.numpy(), sent.source, sent.target, path,
                       title=f"{name}, line {n}{' (footnote 14 rows)' if args.paper_convention else ''}",
                       windows=spans, centres=centres, gold=links)
        print(path)


if __name__ == "__main__":
    main()
