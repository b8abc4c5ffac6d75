#!/usr/bin/env python3
"""`run.sh plan`: what the WMT'14 run will do and need, before it starts.

Reads the rows and models from run.sh on stdin ("row<TAB>NAME<TAB>models<TAB>what",
"model<TAB>NAME<TAB>fairseq-train options") and prints: the rows; per model its size,
epochs, updates, the checkpoints kept and their size; the GPUs, the batch per GPU; the
expected time per epoch on a named GPU from a published figure (which one is said); the
disk still to be written against the free disk. Exit status 1 when it does not fit.

Sources of the figures (all stated again in the output):
  - Luong et al. (2015), section 4.1: 4.5M training pairs, 116M English and 110M German
    words; "When running on a single GPU device Tesla K40, we achieve a speed of 1K target
    words per second. It takes 7-10 days to completely train a model." (their MATLAB code)
  - Bahdanau et al. (2014), section 4.2: "We trained each model for approximately 5 days"
    (English-French, GPU not named there): no per-word speed.
"""
import argparse
import math
import os
import sys

import plan_tools as pt  # examples/common/, on PYTHONPATH (run.sh plan)

PAPER_PAIRS, PAPER_WORDS_EN, PAPER_WORDS_DE = 4_500_000, 116_000_000, 110_000_000
K40_WORDS_PER_S = 1000  # Luong et al. 2015, section 4.1
BYTES_PER_WORD = 6  # a tokenized German or English word and its space, for an estimate only
RELEASE_VOCAB = 50_000 + 4  # vocab.50K.* (<unk>, <s>, </s> are fairseq's own) + fairseq's 4 specials


def data_figures(args):
    """(pairs, target words, source words, where from) of the training data as fairseq sees it."""
    for lang_first in ("de",):
        de = pt.binarized_sizes(os.path.join(args.bin, f"train.en-de.{lang_first}"))
        en = pt.binarized_sizes(os.path.join(args.bin, "train.en-de.en"))
        if de and en:
            return de[0], de[1], en[1], f"the prepared data ({args.bin}: pairs of at most 50 words)"
    return (PAPER_PAIRS, PAPER_WORDS_DE, PAPER_WORDS_EN,
            "the paper's figures before the 50-word filter (4.5M pairs, 110M German words: an upper bound)")


def vocab_sizes(args):
    sizes = []
    for lang in ("en", "de"):
        path = os.path.join(args.bin, f"dict.{lang}.txt")
        if os.path.exists(path):
            with open(path, encoding="utf-8") as f:
                sizes.append(sum(1 for _ in f) + 4)
        else:
            sizes.append(RELEASE_VOCAB)
    return sizes


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--work", required=True)
    parser.add_argument("--src-dir", required=True)
    parser.add_argument("--bin", required=True)
    parser.add_argument("--gpus", type=int, default=1)
    parser.add_argument("--reserve", type=int, default=0)
    parser.add_argument("--have-release", action="store_true", help="--data-dir given: nothing to download")
    args = parser.parse_args(argv)
    rows, models = [], {}
    for line in sys.stdin:
        kind, name, *rest = line.rstrip("\n").split("\t")
        if kind == "row":
            rows.append((name, rest[0], rest[1]))
        elif kind == "model":
            models[name] = rest[0]
    out = []
    seen, names = pt.gpus()
    gpu_names = ", ".join(sorted(set(names))) or "none"
    fp16 = any(pt.has_flag(a, "--fp16") for a in models.values())
    out.append(f"GPUs here: {seen} ({gpu_names}); each training uses {args.gpus} "
               f"(--distributed-world-size {args.gpus}): the paper's 128 sentences per update are "
               f"{128 // args.gpus} per GPU (RNNsearch: 80, {80 // args.gpus} per GPU); "
               f"{'--fp16' if fp16 else 'float32: no GPU, so no --fp16'}")
    if seen and args.gpus > seen:
        out.append(f"warning: --gpus {args.gpus} but only {seen} GPU(s) here: fairseq-train will fail")
    if not seen:
        out.append("no GPU here: these trainings would run on the CPU (`run.sh time-epoch ROW` measures "
                   "how slowly); the figures below assume the GPU the paper names")
    pairs, words_de, words_en, source = data_figures(args)
    out.append(f"training data: {pairs:,} pairs, {words_de:,} German words, from {source}")
    src_vocab, tgt_vocab = vocab_sizes(args)
    params = pt.count_parameters(models, src_vocab, tgt_vocab)

    out.append("")
    out.append("| row | models | what |")
    out.append("|---|---|---|")
    for name, ms, what in rows:
        out.append(f"| {name} | {ms.replace(',', ' ')} | {what} |")
    out.append("")
    out.append("| model | M params | epochs | sentences per update | updates (about) | checkpoint "
               "| kept: last, best, model.pt | time per epoch, Tesla K40 (paper's speed) |")
    out.append("|---|---|---|---|---|---|---|---|")
    kept_total = biggest = 0
    for name, a in models.items():
        epochs = pt.option(a, "--max-epoch", 0, int)
        batch = pt.option(a, "--batch-size", 128, int) * args.gpus
        updates = epochs * math.ceil(pairs / batch)
        optimizer = pt.option(a, "--optimizer", "sgd")
        bytes_per = (2 if pt.has_flag(a, "--fp16") else 4) + {"adadelta": 8, "adam": 8}.get(optimizer, 0)
        ckpt = params[name] * bytes_per
        existing = sum(pt.size_on_disk(os.path.join(args.work, "systems", name, p))
                       for p in ("checkpoints", "model.pt"))
        kept_total += max(0, 3 * ckpt - existing)
        biggest = max(biggest, ckpt)
        if optimizer == "adadelta":
            speed = "unknown (Bahdanau et al.: about 5 days a model, GPU and data not these)"
        else:
            per_epoch = words_de / K40_WORDS_PER_S
            speed = f"{pt.hours(per_epoch)} ({pt.hours(per_epoch * epochs)} for {epochs})"
        out.append(f"| {name} | {params[name] / 1e6:.1f} | {epochs} | {batch} | {updates:,} | "
                   f"{pt.gb(ckpt)} | {pt.gb(3 * ckpt)} | {speed} |")
    out.append("")
    out.append("Time: Luong et al. (2015, section 4.1) report 1K target words per second on one Tesla K40 "
               "with their MATLAB code and 7-10 days per model; this fairseq implementation has not been "
               "timed on a GPU (docs/gpu.md). Updates: fairseq groups sentences of similar length, so an "
               "epoch has about pairs / 128 updates.")
    # disk: what is still to be written
    release = 0
    if not args.have_release:
        present = sum(pt.size_on_disk(os.path.join(args.src_dir, f)) for f in os.listdir(args.src_dir)) \
            if os.path.isdir(args.src_dir) else 0
        release = max(0, (PAPER_WORDS_EN + PAPER_WORDS_DE) * BYTES_PER_WORD - present)
    text = max(0, (words_en + words_de) * BYTES_PER_WORD - pt.size_on_disk(os.path.join(args.work, "text")))
    binarized = max(0, (words_en + words_de + 2 * pairs) * 2 + 2 * pairs * 12
                    - pt.size_on_disk(args.bin))
    outputs = 100 * 1024 ** 2  # translations, scores, logs
    needed = release + text + binarized + kept_total + biggest + outputs
    out.append(f"disk still to be written: release download {pt.gb(release)}, filtered text {pt.gb(text)}, "
               f"binarized data {pt.gb(binarized)}, checkpoints {pt.gb(kept_total)} (+{pt.gb(biggest)} "
               f"while one is being saved), translations and logs {pt.gb(outputs)} (estimates: "
               f"{BYTES_PER_WORD} bytes a word of text, 2 per token binarized)")
    ok = pt.disk_verdict(needed, args.work, args.reserve, out)
    print("\n".join(out))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
