#!/usr/bin/env python3
"""An ensemble as fairseq does it (mean of probabilities) and as Luong et al. (2015) did
it (mean of the pre-softmax scores), side by side, in sacreBLEU against raw references.

Translates a test subset with fairseq's SequenceGenerator (beam search) with each model
alone, with fairseq's ``EnsembleModel`` (what ``fairseq-generate --path a.pt:b.pt`` does:
p = 1/M sum_m softmax(z_m)) and with ``LogitAveragingEnsemble`` (the authors' code:
p = softmax(1/M sum_m z_m)), and prints BLEU, the difference to fairseq's ensemble, how
many translations differ from it, and the time taken.

Example:
  python scripts/eval/compare_ensembles.py data-raw --dataset-impl raw \\
      --path ck_a/checkpoint_best.pt:ck_b/checkpoint_best.pt --reference test.de --lowercase
"""
import argparse
import os
import sys
import time

from fairseq_luong.analysis.text_files import read_lines


def translate(generator, task, subset, batch_size, post_process, progress_name):
    """Best hypothesis per sentence id (strings, --post-process applied)."""
    import torch
    from fairseq.data import data_utils
    from tqdm import tqdm

    dataset = task.dataset(subset)
    itr = task.get_batch_iterator(dataset, max_sentences=batch_size, max_positions=(1024, 1024),
                                  ignore_invalid_inputs=False, required_batch_size_multiple=1)
    out = {}
    with torch.no_grad(), tqdm(total=len(dataset), desc=progress_name, file=sys.stderr, unit="sent") as bar:
        for sample in itr.next_epoch_itr(shuffle=False):
            for sid, hypos in zip(sample["id"].tolist(), generator.generate(None, sample)):
                text = task.target_dictionary.string(hypos[0]["tokens"])
                out[sid] = data_utils.post_process(text, post_process) if post_process else text
            bar.update(len(sample["id"]))
    return [out[i] for i in range(len(dataset))]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    parser.add_argument("data")
    parser.add_argument("--path", required=True, help="two or more checkpoints, colon-separated")
    parser.add_argument("--reference", required=True, help="raw reference translations of the subset")
    parser.add_argument("--subset", default="test")
    parser.add_argument("--dataset-impl", default=None, help="as for fairseq-generate (e.g. raw)")
    parser.add_argument("-s", "--source-lang", default=None)
    parser.add_argument("-t", "--target-lang", default=None)
    parser.add_argument("--beam", type=int, default=5)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--max-len-a", type=float, default=0, help="as fairseq-generate's: at most a x source + b")
    parser.add_argument("--max-len-b", type=int, default=200, help="as fairseq-generate's")
    parser.add_argument("--post-process", default=None, help="as fairseq's (sentencepiece, subword_nmt, ...)")
    parser.add_argument("--tokenize", default="13a", help="sacreBLEU tokenizer")
    parser.add_argument("--lowercase", action="store_true", help="case-insensitive BLEU")
    args = parser.parse_args(argv)

    import sacrebleu
    import torch
    from fairseq import checkpoint_utils
    from fairseq.sequence_generator import EnsembleModel, SequenceGenerator

    import fairseq_luong  # noqa: F401
    from fairseq_luong.modules.logit_averaging_ensemble import LogitAveragingEnsemble

    paths = args.path.split(":")
    if len(paths) < 2:
        raise SystemExit("error: --path needs two or more checkpoints (a:b)")
    references = read_lines(args.reference)
    overrides = {"data": args.data}
    for key, value in (("dataset_impl", args.dataset_impl), ("source_lang", args.source_lang),
                       ("target_lang", args.target_lang)):
        if value:
            overrides[key] = value
    torch.set_num_threads(min(2, os.cpu_count() or 1))
    models, _, task = checkpoint_utils.load_model_ensemble_and_task(paths, arg_overrides=overrides)
    for model in models:
        model.eval()
        model.make_generation_fast_(need_attn=False)  # as fairseq-generate without --print-alignment
    task.load_dataset(args.subset)
    if len(task.dataset(args.subset)) != len(references):
        raise SystemExit(f"error: {args.reference} has {len(references)} lines but subset {args.subset!r} "
                         f"has {len(task.dataset(args.subset))} sentences")

    def generator(ensemble):
        return SequenceGenerator(ensemble, task.target_dictionary, beam_size=args.beam, max_len_a=args.max_len_a,
                                 max_len_b=args.max_len_b)

    systems = [(os.path.basename(os.path.dirname(os.path.abspath(p))) or p, EnsembleModel([m]))
               for p, m in zip(paths, models)]
    systems += [("ensemble: mean of probabilities (fairseq)", EnsembleModel(models)),
                ("ensemble: mean of scores before the softmax (paper)", LogitAveragingEnsemble(models))]
    results = []
    for name, ensemble in systems:
        start = time.perf_counter()
        hyps = translate(generator(ensemble), task, args.subset, args.batch_size, args.post_process, name[:30])
        seconds = time.perf_counter() - start
        bleu = sacrebleu.corpus_bleu(hyps, [references], tokenize=args.tokenize, lowercase=args.lowercase)
        results.append((name, hyps, bleu.score, seconds))
    fairseq_hyps, fairseq_bleu = results[-2][1], results[-2][2]
    print(f"\n{len(references)} sentences of {args.subset!r}, beam {args.beam}, sacreBLEU "
          f"({args.tokenize}{', lowercased' if args.lowercase else ''}) against {args.reference}:\n")
    print("| system | BLEU | vs fairseq ensemble | sentences differing from it | seconds |")
    print("|---|---|---|---|---|")
    for name, hyps, score, seconds in results:
        differ = sum(a != b for a, b in zip(hyps, fairseq_hyps))
        print(f"| {name} | {score:.2f} | {score - fairseq_bleu:+.2f} | {differ} | {seconds:.1f} |")


if __name__ == "__main__":
    main()
