#!/usr/bin/env python3
"""Learning curves of luong_global_general and fairseq's built-in ``lstm``, side by side.

Trains each system with fairseq-train on Multi30k En-De (SentencePiece 8K joint
vocabulary, shared embeddings, 2 x 256 unless --layers/--hidden say otherwise, dropout
0.2, Adam 1e-3, clip 5, --max-tokens 4000, label smoothing 0.1, seed 1; the same flags
for every system) and prints the validation perplexity after each epoch as a table, with
each system's ratio to ``lstm``. Systems:

* ``lstm``: fairseq's LSTM with Luong global-general attention and input feeding
  (``--decoder-attention 1``), fairseq's ``label_smoothed_cross_entropy``; fairseq
  initialises its LSTMs, embeddings and output layer ~ U[-0.1, 0.1];
* ``luong_global_general``: ours with the default initialisation, U[-0.1, 0.1] for every
  parameter (Luong et al. 2015, section 4.1);
* ``luong_global_general+pytorch_init``: ours with ``--init-uniform 0`` (PyTorch's
  initialisation, embeddings N(0, 1/d): the default before issue 13).

Our systems train with ``fused_label_smoothed_cross_entropy`` (the same loss and gradients
as fairseq's criterion, tested in tests/test_fused_criterion.py and tests/test_cli.py),
which only makes them faster. Writes the learning curves to --png.

Usage: python scripts/bench/benchmark_init.py [--epochs 3] [--systems lstm luong_global_general ...]
       [--work DIR] [--png curves.png] [--reuse-logs]
About 7 minutes per system and 3 epochs on 2 CPU cores at 2 x 256: a benchmark, not a test.
"""
import argparse
import os
import subprocess
import sys

from benchmark_speed import DEFAULT_DATA, REPO, data_stats, prepare_data

from fairseq_luong.analysis.training_log import read_training_log

SYSTEMS = {
    # name: (arch, extra flags, criterion)
    "lstm": ("lstm", ["--decoder-attention", "1"], "label_smoothed_cross_entropy"),
    "luong_global_general": ("luong_global_general", [], "fused_label_smoothed_cross_entropy"),
    "luong_global_general+pytorch_init": ("luong_global_general", ["--init-uniform", "0"],
                                          "fused_label_smoothed_cross_entropy"),
}


def train_flags(name, layers, hidden):
    arch, extra, criterion = SYSTEMS[name]
    flags = ["--arch", arch, *extra, "--criterion", criterion, "--label-smoothing", "0.1",
             "--encoder-embed-dim", str(hidden), "--encoder-hidden-size", str(hidden),
             "--decoder-embed-dim", str(hidden), "--decoder-hidden-size", str(hidden),
             "--encoder-layers", str(layers), "--decoder-layers", str(layers),
             "--share-all-embeddings", "--dropout", "0.2"]
    if arch == "lstm":
        flags += ["--decoder-out-embed-dim", str(hidden)]
    return flags + ["--optimizer", "adam", "--lr", "1e-3", "--clip-norm", "5", "--max-tokens", "4000",
                    "--seed", "1", "--num-workers", "0", "--log-format", "simple", "--log-interval", "50",
                    "--no-save"]


def train(bin_dir, name, args, log_path):
    cmd = [os.path.join(os.path.dirname(sys.executable), "fairseq-train"), bin_dir,
           "--user-dir", os.path.join(REPO, "fairseq_luong"), *train_flags(name, args.layers, args.hidden),
           "--max-epoch", str(args.epochs), "--save-dir", os.path.join(args.work, "ckpt_" + name)]
    print(f"[{name}] training {args.epochs} epochs, log {log_path}", file=sys.stderr, flush=True)
    with open(log_path, "w", encoding="utf-8") as log:
        proc = subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT)
    if proc.returncode != 0:
        raise SystemExit(f"error: fairseq-train failed for {name}: see {log_path}")


def complete(log_path, epochs):
    if not os.path.exists(log_path):
        return False
    try:
        return len(read_training_log(log_path).valid.get("valid", [])) == epochs
    except ValueError:
        return False


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    parser.add_argument("--data", default=DEFAULT_DATA, help="Multi30k En-De raw text (default: %(default)s)")
    parser.add_argument("--work", default="/tmp/fairseq_luong_bench", help="data and logs (cached data)")
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--hidden", type=int, default=256)
    parser.add_argument("--systems", nargs="+", default=list(SYSTEMS), choices=list(SYSTEMS))
    parser.add_argument("--png", default=None, help="learning curves PNG (default: WORK/init_curves.png)")
    parser.add_argument("--reuse-logs", action="store_true",
                        help="a system whose log in WORK already holds all epochs is not trained again "
                        "(so that systems can be trained in separate runs)")
    args = parser.parse_args(argv)
    if "lstm" not in args.systems:
        args.systems = ["lstm"] + args.systems  # the reference every ratio is to
    bin_dir = prepare_data(args.data, args.work)
    logs, minutes = {}, {}
    for name in args.systems:
        log_path = os.path.join(args.work, f"train_{name}_{args.layers}x{args.hidden}_{args.epochs}ep.log")
        if not (args.reuse_logs and complete(log_path, args.epochs)):
            train(bin_dir, name, args, log_path)
        log = read_training_log(log_path)
        logs[name] = log.valid.get("valid", [])
        # fairseq logs each epoch's training time (train_wall) at the end of the epoch
        minutes[name] = sum(r.stats.get("train_wall", float("nan")) for r in log.train) / 60
        if len(logs[name]) != args.epochs:
            raise SystemExit(f"error: {log_path}: {len(logs[name])} validations for {args.epochs} epochs")

    vocab = data_stats(bin_dir)[0]  # 8K pieces and fairseq's 4 symbols; fewer in small data
    print(f"\nValid perplexity after each epoch ({args.data}, SentencePiece joint vocabulary of {vocab}, "
          f"{args.layers}x{args.hidden}; ratio = system / lstm):\n")
    header = ["epoch"]
    for name in args.systems:
        header += [name] + ([] if name == "lstm" else ["ratio"])
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    for e in range(args.epochs):
        ref = logs["lstm"][e].stats["ppl"]
        row = [str(e + 1)]
        for name in args.systems:
            ppl = logs[name][e].stats["ppl"]
            row += [f"{ppl:.1f}"] + ([] if name == "lstm" else [f"{ppl / ref:.2f}"])
        print("| " + " | ".join(row) + " |")
    row = ["train wall minutes"]
    for name in args.systems:
        row += [f"{minutes[name]:.1f}"] + ([] if name == "lstm" else [""])
    print("| " + " | ".join(row) + " |")

    from fairseq_luong.analysis.plots import plot_curves

    png = args.png or os.path.join(args.work, "init_curves.png")
    plot_curves([(n, [r.epoch for r in logs[n]], [r.stats["ppl"] for r in logs[n]]) for n in args.systems],
                png, "epoch", "valid perplexity", title=f"Multi30k En-De {args.layers}x{args.hidden}", log_y=True)
    print(f"\nlearning curves: {png}")


if __name__ == "__main__":
    main()
