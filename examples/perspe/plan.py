#!/usr/bin/env python3
"""`run.sh plan`: what the perSPE run will do and need, before it starts.

Reads "system<TAB>NAME<TAB>fairseq-train options" lines from run.sh on stdin and prints:
per system its size, seeds, updates, the checkpoints kept and their size; the GPUs, the
tokens per GPU and step and --update-freq; the expected time on a named GPU from a
published figure (said which); the disk still to be written against the free disk.
Exit status 1 when it does not fit.

The figure: Vaswani et al. (2017), section 5.2, Transformer base: "each training step took
about 0.4 seconds" on "one machine with 8 NVIDIA P100 GPUs", with batches of "approximately
25000 source tokens and 25000 target tokens" (section 5.1): about 7,800 target tokens a
second per P100. The estimate assumes time in proportion to the tokens of an update and
inversely to the GPUs; the perSPE paper gives no training time.
"""
import argparse
import os
import sys

import plan_tools as pt  # examples/common/, on PYTHONPATH (run.sh plan)

P100_TOKENS_PER_S = 25000 / 0.4 / 8  # Vaswani et al. 2017, sections 5.1-5.2
ASPEC_TRAIN_1 = 1_000_000  # ASPEC-JE train-1.txt: the 1M pairs of best alignment score


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    for name in ("--work", "--seeds", "--preset"):
        parser.add_argument(name, required=True)
    for name in ("--gpus", "--max-tokens", "--update-freq", "--batch", "--vocab", "--average", "--reserve"):
        parser.add_argument(name, type=int, required=True)
    args = parser.parse_args(argv)
    systems = {}
    for line in sys.stdin:
        kind, name, opts = line.rstrip("\n").split("\t")
        systems[name] = opts
    seeds = args.seeds.split()
    out = []
    seen, names = pt.gpus()
    out.append(f"GPUs here: {seen} ({', '.join(sorted(set(names))) or 'none'}); each seed trains on --gpus {args.gpus} "
               f"(--distributed-world-size {args.gpus}): {args.max_tokens} tokens per GPU and step x "
               f"--update-freq {args.update_freq} x {args.gpus} GPU(s) = {args.batch} tokens per update")
    if seen and args.gpus > seen:
        out.append(f"warning: --gpus {args.gpus} but only {seen} GPU(s) here: fairseq-train will fail")
    if not seen:
        out.append("no GPU here: training would run on the CPU; the times below are for the GPU named")
    dict_path = os.path.join(args.work, "data-bin", "dict.ja.txt")
    if os.path.exists(dict_path):
        with open(dict_path, encoding="utf-8") as f:
            vocab = sum(1 for _ in f) + 4
    else:
        vocab = args.vocab + 4
    tokens = pt.binarized_sizes(os.path.join(args.work, "data-bin", "train.en-ja.ja"))
    if tokens:
        pieces, source = tokens[1] + tokens[0], f"the prepared data ({tokens[0]:,} pairs)"
    else:
        pieces, source = None, "not prepared yet"
    params = pt.count_parameters(systems, vocab, vocab, src="en", tgt="ja")
    out.append(f"training data: {source}")
    out.append("")
    out.append("| system | M params | seeds | updates | epochs (about) | checkpoint | kept per seed | "
               "time per seed, 1 P100 (Vaswani et al.'s speed) |")
    out.append("|---|---|---|---|---|---|---|---|")
    kept_total = biggest = 0
    for name, opts in systems.items():
        updates = pt.option(opts, "--max-update", 0, int)
        keep = pt.option(opts, "--keep-interval-updates", 0, int)
        ckpt = params[name] * ((2 if pt.has_flag(opts, "--fp16") else 4) + 8)  # Adam: 2 x fp32 state
        n_kept = keep + 3  # interval checkpoints, checkpoint_last, checkpoint_best, model.pt
        for seed in seeds:
            existing = sum(pt.size_on_disk(os.path.join(args.work, "systems", name, f"seed{seed}", p))
                           for p in ("checkpoints", "model.pt"))
            kept_total += max(0, n_kept * ckpt - existing)
        biggest = max(biggest, ckpt)
        epochs = f"{updates * args.batch / pieces:.1f}" if pieces else "?"
        per_update = args.batch / (P100_TOKENS_PER_S * args.gpus)
        out.append(f"| {name} | {params[name] / 1e6:.1f} | {len(seeds)} | {updates:,} | {epochs} | {pt.gb(ckpt)} | "
                   f"{n_kept} = {pt.gb(n_kept * ckpt)} | {pt.hours(per_update * updates)} on {args.gpus} "
                   f"({per_update:.2f} s an update) |")
    out.append("")
    out.append(f"Kept per seed: the last {keep} interval checkpoints, checkpoint_last.pt, checkpoint_best.pt and "
               f"model.pt (the last {args.average} averaged). Time: from Vaswani et al. (2017, 5.1-5.2), base "
               "model, 0.4 s a step with about 25,000 target tokens on 8 P100s, i.e. about 7,800 tokens a "
               "second per P100, assumed to scale with tokens and GPUs; this code has not been timed on a GPU "
               "(docs/gpu.md).")
    prepared = pt.size_on_disk(os.path.join(args.work, "data-bin"))
    data = 0
    if not prepared:
        raw = pt.size_on_disk(os.path.join(args.work, "raw"))
        guess = raw * 4.5 if raw else ASPEC_TRAIN_1 * 2 * 130 * 4.5  # raw, text, pieces, chunks, binarized
        data = guess
        basis = "4.5 x the raw text" if raw else "ASPEC train-1: 1M pairs of about 130 bytes, x 4.5"
        out.append(f"prepared data: about {pt.gb(data)} ({basis}: an estimate)")
    needed = data + kept_total + biggest + 50 * 1024 ** 2
    out.append(f"checkpoints still to be written: {pt.gb(kept_total)} (+{pt.gb(biggest)} while one is being saved)")
    ok = pt.disk_verdict(needed, args.work, args.reserve, out,
                         advice="free disk, choose another --work-dir, or plan fewer systems or --seeds")
    print("\n".join(out))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
