#!/usr/bin/env python3
"""Learning curves from fairseq-train logs (Luong et al. 2015, Fig. 5): one line per run.

Reads each run's log (the console output of fairseq-train or its --log-file; --log-format
simple, tqdm or json) and plots the validation perplexity (fairseq's ``ppl``, 2^nll_loss)
against updates, epochs or wall-clock minutes, one panel per ``--x`` given, and with
``--train-loss`` the training loss (every --log-interval updates) on a panel beside each.
Minutes are fairseq's ``wall`` clock: validation lines carry none, so a validation's time
is interpolated between the training lines around it. Prints each run's best validation
perplexity.

Example:
  python scripts/eval/plot_curves.py global=train_global.log localp=train_localp.log \\
      --x updates minutes --train-loss --png curves.png
"""
import argparse


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    parser.add_argument("logs", nargs="+", metavar="[NAME=]LOG", help="fairseq-train logs, one per run")
    parser.add_argument("--x", choices=("updates", "epochs", "minutes"), nargs="+", default=["updates"],
                        help="x axes, one panel each (default: updates)")
    parser.add_argument("--subset", default="valid", help="validation subset to plot (default: valid)")
    parser.add_argument("--train-loss", action="store_true", help="also plot the training loss")
    parser.add_argument("--linear", action="store_true", help="linear perplexity axis (default: log)")
    parser.add_argument("--png", required=True, help="output PNG")
    args = parser.parse_args(argv)

    from fairseq_luong.analysis.plots import plot_panels
    from fairseq_luong.analysis.text_files import named_files
    from fairseq_luong.analysis.training_log import read_training_log, wall_seconds

    def epochs_of(log, record):
        """The epochs trained at a record: E at epoch E's end; between two ends (a validation at
        a mid-epoch save, --save-interval-updates), E - 1 and the part of epoch E's updates done
        (every epoch has the first one's number of updates: the batches are fixed)."""
        ends = {0: 0, **{r.epoch: r.num_updates for r in log.train}}
        size, start = ends.get(1), ends.get(record.epoch - 1)
        if ends.get(record.epoch) == record.num_updates or not size or start is None:
            return record.epoch
        return record.epoch - 1 + round((record.num_updates - start) / size, 3)

    def x_of(log, record, x):
        if x == "updates":
            return record.num_updates
        if x == "epochs":
            return epochs_of(log, record)
        wall = record.stats["wall"] if "wall" in record.stats else wall_seconds(log, record.num_updates)
        if wall is None:
            raise SystemExit(f"error: {log.path}: no wall clock (fairseq's 'wall') for --x minutes")
        return wall / 60

    first = args.x[0]
    valid, train = {x: [] for x in args.x}, {x: [] for x in args.x}
    print(f"| run | validations | best {args.subset} ppl | at {first.rstrip('s')} | last {args.subset} ppl |")
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
        inner = [r for r in log.train_inner if "loss" in r.stats] or [r for r in log.train if "loss" in r.stats]
        for x in args.x:
            valid[x].append((name, [x_of(log, r, x) for r in records], [r.stats["ppl"] for r in records]))
            train[x].append((name, [x_of(log, r, x) for r in inner], [r.stats["loss"] for r in inner]))
        best = min(records, key=lambda r: r.stats["ppl"])
        at = x_of(log, best, first)
        at = f"{at:.1f}" if first == "minutes" else f"{at:g}"
        print(f"| {name} | {len(records)} | {best.stats['ppl']:.2f} | {at} | {records[-1].stats['ppl']:.2f} |")
    xlabels = {"updates": "updates", "epochs": "epochs", "minutes": "wall-clock minutes"}
    panels = []
    for x in args.x:
        panels.append((xlabels[x], f"{args.subset} perplexity", valid[x], not args.linear))
        if args.train_loss:
            panels.append((xlabels[x], "training loss (base 2)", train[x], False))
    plot_panels(panels, args.png)
    print(f"\nplot: {args.png}")


if __name__ == "__main__":
    main()
