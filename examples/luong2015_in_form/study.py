#!/usr/bin/env python3
"""The papers' claims in form: the study's command line (called by run.sh) and its plan.

  systems [--corpus C]     the trainings, one "NAME SEED CORPUS" a line, in run order
  args NAME                fairseq-train options of system NAME (one word a line)
  plan                     every training with its epochs and expected minutes, the total
  report WORK              report.md and figures from what WORK holds

The study's parts; each imports only parts above it in this list:
  systems.py    what it trains: the protocol at small scale and where it differs from the
                paper's, the corpora, the systems, the paper's rows, the trainings in run order
  published.py  what it published, read back: scores, result.json, the training logs
  verdicts.py   the seeds, the paired bootstraps and the rules that decide each verdict
  claims.py     the report's tables of the papers' claims, with their verdicts
  report.py     the report: verdicts, tables, convergence, targets, figures, and the command
                that remakes each training
  runner.py     the study as it runs: the scheduler, each training published as it ends
  study.py      this command line
"""
import argparse
import os
import statistics
import sys
from typing import List, Optional

import report
import runner
from claims import fmt
from published import convergence, load_json, with_minutes
from systems import (
    AER_SYSTEMS,
    BY_NAME,
    ENSEMBLE,
    FLAT_PERCENT,
    HALVE_BELOW,
    HALVINGS,
    MAX_EPOCHS,
    PERSPE_MAX_UPDATE,
    PERSPE_PATIENCE,
    PERSPE_SEEDS,
    PERSPE_SYSTEMS,
    PRECISION,
    SIZES,
    Label,
    System,
    perspe_options,
    trainings,
)

from fairseq_luong.data.text import read_lines

# ---------------------------------------------------------------------------------
# The budget (run.sh --plan), before the study has measured its own trainings.
# Minutes per epoch (validation not counted), one thread each, two trainings at a time, on the
# project's machine (2 cores of an AMD EPYC with AVX-512 BF16, torch 2.13.0), 2026-11-27:
# `bash run.sh --size S time SYSTEM [-- --bf16]` for m30k_localp_general_feed (m30k),
# kftt_localp_general_feed (kftt), kftt_rnnsearch, perspe_spe_spe (its preset's size). The
# systems without attention are counted as the attention ones of their corpus (an upper bound);
# KFTT's were timed with SGD, whose update costs what Adam's does to within a few percent.
EPOCH_MINUTES = {  # kind: {(size, precision): minutes}
    "m30k": {(128, "float32"): 1.12, (128, "bf16"): 1.00, (256, "float32"): 2.76, (256, "bf16"): 1.68},
    "kftt": {(128, "float32"): 2.45, (128, "bf16"): 2.06, (256, "float32"): 5.23, (256, "bf16"): 3.64},
    "kftt_rnnsearch": {(128, "float32"): 3.62, (128, "bf16"): 3.12, (256, "float32"): 6.03, (256, "bf16"): 4.78},
    "perspe": {(128, "float32"): 2.60, (128, "bf16"): 2.24},
}
# Epochs to convergence with the study's schedule: estimates from the pilots of the README's plan
# (Multi30k local-p at 2 x 128 was at epoch 23 with the rate at 1/8, gaining 1.6 % an epoch;
# KFTT local-p with Adam at 2 x 256 gained 55, 25, 22 and 20 % in its epochs 2-5);
# perSPE: a guess. The plan replaces them with
# the epochs of the trainings published so far.
EXPECTED_EPOCHS = {"m30k": 27, "kftt": 20, "perspe": 20}
EVAL_MINUTES = 3.0  # per training: test perplexity, beam search, unk replacement, alignment


def budget_key(system: System) -> str:
    return "kftt_rnnsearch" if system.name == "kftt_rnnsearch" else system.corpus


def epoch_minutes(kind: str) -> float:
    size = 128 if kind == "perspe" else SIZES[kind.split("_")[0]]
    return EPOCH_MINUTES[kind][(size, "bf16" if "--bf16" in PRECISION and kind != "perspe" else "float32")]


def measured_minutes(results: Optional[str]) -> dict:
    """{(system, seed): (fairseq-train minutes, epochs)} of the trainings published in RESULTS."""
    out = {}
    for root in (os.path.join(results, "systems"), os.path.join(results, "perspe", "systems")) if results else ():
        for dirpath, _, files in os.walk(root):
            if "result.json" in files:
                r = with_minutes(load_json(os.path.join(dirpath, "result.json")), os.path.join(dirpath, "train.log"))
                if r.get("train_minutes") is not None and r.get("study", {}).get("slice") == "0":
                    c = convergence(os.path.join(dirpath, "train.log"), r["system"].startswith("perspe_"))
                    out[(r["system"], r["seed"])] = (r["train_minutes"], c.epochs if c else None)
    return out


def cmd_plan(args):
    """Every training with its epochs and minutes: measured where the study has published it,
    else the mean measured for its kind, else EXPECTED_EPOCHS x EPOCH_MINUTES; the wall clock
    with --jobs trainings at a time."""
    measured = measured_minutes(args.results)
    kinds: dict = {}
    for (name, _), m in measured.items():
        kinds.setdefault("perspe" if name.startswith("perspe_") else budget_key(BY_NAME[name]), []).append(m)
    total, n_measured = 0.0, 0
    print(f"The study's protocol: Multi30k 2 x {SIZES['m30k']}, KFTT 2 x {SIZES['kftt']} (Adam), "
          f"{'bfloat16' if '--bf16' in PRECISION else 'float32'}; the rate "
          f"halved after each epoch that lowers the validation loss by less than {100 * HALVE_BELOW:.1f} %, "
          f"stopping once it has been halved {HALVINGS} times and validation perplexity fell by less than "
          f"{FLAT_PERCENT:.0f} % over two epochs, or after {MAX_EPOCHS} epochs; perSPE: its preset until "
          f"{PERSPE_PATIENCE} epochs without improvement (at most {PERSPE_MAX_UPDATE} updates)")
    print(f"{'training':40s} {'seed':>4s} {'epochs':>6s} {'minutes':>8s}  source")
    rows = [(s.name, seed, budget_key(s), s.corpus) for s, seed in trainings()]
    rows += [(f"perspe_{n}", seed, "perspe", "perspe") for seed in PERSPE_SEEDS for n in PERSPE_SYSTEMS]
    for name, seed, kind, corpus in rows:
        if (name, seed) in measured:
            minutes, epochs = measured[(name, seed)]
            source = "measured"
            n_measured += 1
        elif kind in kinds:
            minutes = statistics.mean(m for m, _ in kinds[kind])
            epochs = statistics.mean(e for _, e in kinds[kind] if e is not None) if any(
                e is not None for _, e in kinds[kind]) else None
            source = f"mean of {len(kinds[kind])} measured"
        else:
            epochs = EXPECTED_EPOCHS[corpus]
            minutes = epochs * epoch_minutes(kind) + EVAL_MINUTES
            source = f"{epochs} epochs x {epoch_minutes(kind):.2f} min (run.sh time) + evaluation"
        total += minutes
        print(f"{name:40s} {seed:4d} {fmt(epochs, '.0f'):>6s} {minutes:8.1f}  {source}")
    n = len(rows)
    print(f"total: {n} trainings, {total / 60:.1f} hours of training at one thread each; about "
          f"{total / args.jobs / 60:.1f} hours of wall clock with {args.jobs} at a time (run.sh --jobs "
          f"{args.jobs}, one thread each); {n_measured} of {n} measured (fairseq-train's wall clock of the "
          "published trainings), the rest from the measured ones of their kind or from the pilots and `run.sh time`")


def cmd_systems(args):
    for system, seed in trainings(args.corpus):
        print(system.name, seed, system.corpus)


def cmd_report(args):
    report.write(args.work, args.shared, args.out)


def cmd_attention(args):
    """exit status 0 when system NAME has attention (its translations get unk replacement)"""
    sys.exit(0 if BY_NAME[args.name].attention else 1)


def cmd_ensemble(args):
    print(" ".join(f"{name}.s{seed}" for name, seed in ENSEMBLE))


def cmd_long_line(args):
    """The heat maps' sentence: the test line (1-based) of 30-40 source words closest to 35."""
    lengths = [len(line.split()) for line in read_lines(args.source)]
    candidates = [i for i, n in enumerate(lengths) if 30 <= n <= 40] or range(len(lengths))
    print(1 + min(candidates, key=lambda i: (abs(lengths[i] - 35), i)))


def study_options(args) -> List[str]:
    opts = list(args.study_opts)
    if len(opts) % 2:
        raise SystemExit(f"error: study options come in pairs: {opts}")
    return opts


def cmd_publish(args):
    opts = study_options(args)
    if args.check_all:
        runner.check_all(args.results, opts)
    elif args.finish:
        runner.publish_finish(args.work, args.results, opts)
    elif args.name is None or args.seed is None:
        raise SystemExit("error: publish NAME SEED (or --check-all, --finish)")
    elif args.check:
        if runner.is_own(args.results) and runner.code_commit(args.results)[1]:
            runner.check_all(args.results, opts)  # refuses, naming the changes
        runner.state(Label(args.name, args.seed), args.results, opts)
    else:
        runner.publish(Label(args.name, args.seed), args.work, args.results, opts)


def cmd_lock_path(args):
    print(runner.lock_path(args.work, Label(args.name, args.seed)))


def cmd_run(args):
    runner.run_all(args.jobs, args.run_sh, args.results, study_options(args))


def cmd_perspe_options(args):
    if args.name not in PERSPE_SYSTEMS:
        raise SystemExit(f"error: unknown perSPE system {args.name!r} (known: "
                         f"{' '.join('perspe_' + n for n in PERSPE_SYSTEMS)})")
    print("\n".join(perspe_options(args.name)))


def cmd_args(args):
    if args.name not in BY_NAME:
        raise SystemExit(f"error: unknown system {args.name!r} (known: {' '.join(BY_NAME)})")
    print("\n".join(BY_NAME[args.name].options(args.epochs, args.size)))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], epilog=__doc__.split("\n\n", 1)[1],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("systems")
    p.add_argument("--corpus", choices=["m30k", "kftt"])
    p.set_defaults(fn=cmd_systems)
    p = sub.add_parser("args")
    p.add_argument("name")
    p.add_argument("--epochs", type=int, default=MAX_EPOCHS, help="at most this many epochs")
    p.add_argument("--size", type=int, default=0, help="units of every layer (0: the study's, SIZES)")
    p.set_defaults(fn=cmd_args)
    p = sub.add_parser("plan")
    p.add_argument("--results", help="minutes measured by the trainings published there")
    p.add_argument("--jobs", type=int, default=2)
    p.set_defaults(fn=cmd_plan)
    p = sub.add_parser("default", help="(run.sh) a default of the study: max-epochs or perspe-max-update")
    p.add_argument("what", choices=["max-epochs", "perspe-max-update"])
    p.set_defaults(fn=lambda a: print({"max-epochs": MAX_EPOCHS, "perspe-max-update": PERSPE_MAX_UPDATE}[a.what]))
    p = sub.add_parser("perspe-options", help="(run.sh) fairseq-train options of perSPE system NAME")
    p.add_argument("name")
    p.set_defaults(fn=cmd_perspe_options)
    p = sub.add_parser("attention")
    p.add_argument("name")
    p.set_defaults(fn=cmd_attention)
    sub.add_parser("ensemble").set_defaults(fn=cmd_ensemble)
    sub.add_parser("aer-systems").set_defaults(fn=lambda a: print(" ".join(AER_SYSTEMS)))
    sub.add_parser("heatmap-systems").set_defaults(
        fn=lambda a: print(" ".join(["kftt_global_location_feed", "kftt_localp_general_feed", "kftt_rnnsearch"])))
    sub.add_parser("perspe-systems").set_defaults(fn=lambda a: print(" ".join(PERSPE_SYSTEMS)))
    p = sub.add_parser("long-line")
    p.add_argument("source")
    p.set_defaults(fn=cmd_long_line)
    p = sub.add_parser("publish", help="(run.sh) publish one training's results, or check that it may be")
    p.add_argument("name", nargs="?")
    p.add_argument("seed", nargs="?", type=int)
    p.add_argument("--check", action="store_true", help="only refuse when it may not be published")
    p.add_argument("--check-all", action="store_true", help="refuse when RESULTS holds other code's results")
    p.add_argument("--finish", action="store_true", help="the ensembles and the diagonal")
    p.add_argument("--work", required=True)
    p.add_argument("--results", required=True)
    p.set_defaults(fn=cmd_publish)
    p = sub.add_parser("lock-path", help="(run.sh one) the file held while SYSTEM SEED trains")
    p.add_argument("name")
    p.add_argument("seed", type=int)
    p.add_argument("--work", required=True)
    p.set_defaults(fn=cmd_lock_path)
    p = sub.add_parser("run", help="(run.sh study) every training not yet published, --jobs at a time")
    p.add_argument("--jobs", type=int, default=2)
    p.add_argument("--run-sh", required=True)
    p.add_argument("--results", required=True)
    p.set_defaults(fn=cmd_run)
    p = sub.add_parser("report")
    p.add_argument("work", help="the results folder (run.sh --results)")
    p.add_argument("--out", help="report.md (default: WORK/report.md, figures in WORK/figures)")
    p.add_argument("--shared", required=True, help="the data folder (kftt_gold_align_ja_en)")
    p.set_defaults(fn=cmd_report)
    argv = list(sys.argv[1:] if argv is None else argv)
    # run.sh passes the study's own options (STUDY_OPTS) after --
    rest = argv[argv.index("--") + 1:] if "--" in argv else []
    args = parser.parse_args(argv[:argv.index("--")] if "--" in argv else argv)
    args.study_opts = rest
    args.fn(args)


if __name__ == "__main__":
    main()
