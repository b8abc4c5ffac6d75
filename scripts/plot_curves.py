#!/usr/bin/env python3
"""Learning curves from fairseq-train logs (Luong et al. 2015, Fig. 5): one line per run.

Reads each run's log (the console output of fairseq-train or its --log-file; --log-format
simple, tqdm or json) and plots the validation perplexity (fairseq's ``ppl``, 2^nll_loss)
against updates or epochs, and with ``--train-loss`` the training loss (every
--log-interval updates) on a second panel. Prints each run's best validation perplexity.

Example:
  python scripts/plot_curves.py global=train_global.log localp=train_localp.log \\
      --x updates --train-loss --png curves.png
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    parser.add_argument("logs", nargs="+", metavar="[NAME=]LOG", help="fairseq-train logs, one per run")
    parser.add_argument("--x", choices=("updates", "epochs"), default="updates")
    parser.add_argument("--subset", default="valid", help="validation subset to plot (default: valid)")
    parser.add_argument("--train-loss", action="store_true", help="also plot the training loss")
    parser.add_argument("--linear", action="store_true", help="linear perplexity axis (default: log)")
    parser.add_argument("--png", required=True, help="output PNG")
    args = parser.parse_args(argv)

    from fairseq_luong.analysis.text_files import named_files
    from fairseq_luong.analysis.plots import plot_curves
    from fairseq_luong.analysis.training_log import read_training_log

    def x_of(record):
        return record.num_updates if args.x == "updates" else record.epoch

    valid, train = [], []
    print(f"| run | validations | best {args.subset} ppl | at {args.x[:-1]} | last {args.subset} ppl |")
    print("|---|---|---|---|---|")
    for name, path in named_files(args.logs):
        try:
            log = read_training_log(path)
        except ValueError as err:
            raise SystemExit(f"error: {err}")
        records = [r for r in log.valid.get(args.subset, []) if "ppl" in r.stats]
        if not records:
            found = ", ".join(sorted(log.valid)) or "none"
            raise SystemExit(f"error: {path}: no validation on subset {args.subset!r} (subsets found: {found})")
        valid.append((name, [x_of(r) for r in records], [r.stats["ppl"] for r in records]))
        best = min(records, key=lambda r: r.stats["ppl"])
        print(f"| {name} | {len(records)} | {best.stats['ppl']:.2f} | {x_of(best)} | {records[-1].stats['ppl']:.2f} |")
        inner = [r for r in log.train_inner if "loss" in r.stats] or [r for r in log.train if "loss" in r.stats]
        train.append((name, [x_of(r) for r in inner], [r.stats["loss"] for r in inner]))
    plot_curves(valid, args.png, args.x, f"{args.subset} perplexity", log_y=not args.linear,
                extra=train if args.train_loss else (), extra_ylabel="training loss (base 2)")
    print(f"\nplot: {args.png}")


if __name__ == "__main__":
    main()
