#!/usr/bin/env python3
"""Training speed at the IWSLT'15 En-Vi recipe's shapes, end to end, against fairseq's ``lstm``.

  python scripts/bench/benchmark_iwslt.py WORK [--systems luong_global_general lstm] [--updates 60]
         [--warmup 10] [--repeats 2] [--threads 2] [--before PATH]

WORK is the recipe's work folder after ``examples/iwslt15_en_vi/run.sh --work-dir WORK prepare``
(its ``data-bin``: the anchors' vocabularies, 17,188 English and 7,706 Vietnamese words, pairs of
at most 50 words). Each system trains with exactly the options the recipe gives it
(``run.sh options NAME``: 2 x 512, bidirectional encoder, ``--max-tokens 4000``, ``--amp``,
Adam, label smoothing), as ``fairseq-train`` in a fresh process, for ``--warmup`` untimed
updates and then ``--updates`` timed ones; the systems alternate, ``--repeats`` times. The
table gives each system's target words per second (fairseq-train's own ``wpb`` and ``wps`` of
the timed updates: their words over their time), its ratio to ``lstm`` in the same repetition
(median and range), and the process's peak resident memory. ``--before PATH`` also runs each of
our systems with the plugin of the checkout at PATH (a ``git worktree`` of the commit before a
change) as NAME@before, with the same options, in the same alternation. It is a benchmark, not a
test: run it with nothing else on the machine.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
RUN = os.path.join(REPO, "examples", "iwslt15_en_vi", "run.sh")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_device import commit, git_commit  # noqa: E402

# fairseq-train in this interpreter, its peak resident memory printed at exit
TRAIN = ("import atexit, resource, sys; atexit.register(lambda: print('PEAK_KB', "
         "resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, file=sys.stderr, flush=True)); "
         "from fairseq_cli.train import cli_main; sys.argv = ['fairseq-train'] + sys.argv[1:]; cli_main()")


def recipe_options(name):
    """The fairseq-train options the recipe trains NAME with (one a line from run.sh options)."""
    proc = subprocess.run(["bash", RUN, "options", name], capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"benchmark_iwslt.py: run.sh options {name} failed: {proc.stderr.strip()[-500:]}")
    options = proc.stdout.splitlines()
    # the training's own length and budget are not the benchmark's
    for flag in ("--max-epoch", "--stop-time-hours"):
        if flag in options:
            i = options.index(flag)
            del options[i:i + 2]
    return options


def train_once(work, name, options, warmup, updates, threads, save, plugin=REPO):
    """One timed fairseq-train of NAME with the plugin of the checkout at ``plugin``: its target
    words per second and the process's peak resident memory (MB)."""
    cmd = [sys.executable, "-c", TRAIN, os.path.join(work, "data-bin"), *options, "--max-update",
           str(warmup + updates), "--log-interval", "1", "--log-format", "json", "--no-progress-bar",
           "--disable-validation", "--no-save", "--save-dir", save, "--num-workers", "0",
           # the recipe's criterion and schedule are the plugin's, for lstm too
           "--user-dir", os.path.join(plugin, "fairseq_luong")]
    env = dict(os.environ, OMP_NUM_THREADS=str(threads), PYTHONWARNINGS="ignore")
    # run in the plugin's checkout: fairseq puts --user-dir's folder first on sys.path, and the
    # working folder ('' on sys.path) holds no other fairseq_luong
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=plugin)
    if proc.returncode != 0:
        raise SystemExit(f"benchmark_iwslt.py: fairseq-train failed for {name}:\n{proc.stderr[-3000:]}")
    words = seconds = 0.0
    peak = None
    for line in (proc.stdout + proc.stderr).splitlines():
        if line.startswith("PEAK_KB"):
            peak = int(line.split()[1]) / 1024
        if "train_inner" not in line or "{" not in line:
            continue
        stats = json.loads(line[line.index("{"):])
        if int(stats["num_updates"]) > warmup:
            words += float(stats["wpb"])
            seconds += float(stats["wpb"]) / float(stats["wps"])
    if not seconds:
        raise SystemExit(f"benchmark_iwslt.py: no timed update logged for {name}")
    return words / seconds, peak


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    parser.add_argument("work", help="the recipe's work folder (prepared)")
    parser.add_argument("--systems", nargs="+", default=["luong_global_general", "lstm"])
    parser.add_argument("--updates", type=int, default=60, help="timed updates per run (default: %(default)s)")
    parser.add_argument("--warmup", type=int, default=10, help="untimed updates first (default: %(default)s)")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--before", metavar="PATH", help="also our systems with the plugin of the checkout "
                        "at PATH, as NAME@before")
    args = parser.parse_args(argv)
    if args.before and not os.path.isfile(os.path.join(args.before, "fairseq_luong", "__init__.py")):
        parser.error(f"--before {args.before}: no fairseq_luong/ there")
    if not os.path.isfile(os.path.join(args.work, "data-bin", "dict.vi.txt")):
        parser.error(f"{args.work} has no data-bin/dict.vi.txt: run examples/iwslt15_en_vi/run.sh --work-dir "
                     f"{args.work} prepare first")
    if "lstm" not in args.systems:
        parser.error("--systems: add lstm, the reference the ratios are measured against in the same run")
    for n in (args.updates, args.warmup, args.repeats, args.threads):
        if n < 1:
            parser.error("--updates, --warmup, --repeats and --threads: give 1 or more")
    options = {name: recipe_options(name) for name in args.systems}
    runs = list(args.systems)  # the rows: NAME, and NAME@before for our systems with --before
    if args.before:
        runs = [r for n in args.systems for r in ([n] if n == "lstm" else [n, n + "@before"])]
    rates = {n: [] for n in runs}
    peaks = {n: [] for n in runs}
    save = os.path.join(args.work, "bench")
    for r in range(args.repeats):
        for name in runs:  # alternate the systems
            system, at_before = name.split("@")[0], name.endswith("@before")
            rate, peak = train_once(args.work, system, options[system], args.warmup, args.updates, args.threads,
                                    save, plugin=args.before if at_before else REPO)
            rates[name].append(rate)
            peaks[name].append(peak)
            print(f"[benchmark_iwslt] repetition {r + 1}: {name} {rate:.0f} words/s", file=sys.stderr, flush=True)
    import torch

    from fairseq_luong.recipes.machine import count, describe_cpu

    kernels = torch.backends.cpu.get_cpu_capability()
    print(f"# {describe_cpu()}, {count(args.threads, 'thread')}, torch {torch.__version__} (kernels {kernels}), "
          f"commit {commit()}; IWSLT'15 En-Vi "
          f"(run.sh's options: 2 x 512, --max-tokens 4000, --amp); {args.updates} timed updates after "
          f"{args.warmup}, {args.repeats} alternating repetitions"
          + (f"; @before: {args.before} (commit {git_commit(args.before)})" if args.before else ""))
    print("| system | train words/s (median) | ratio to lstm | ratio range | peak MB |")
    print("|---|---|---|---|---|")
    for name in runs:
        ratios = [a / b for a, b in zip(rates[name], rates["lstm"])]
        print(f"| {name} | {statistics.median(rates[name]):.0f} | {statistics.median(ratios):.2f} | "
              f"{min(ratios):.2f}-{max(ratios):.2f} | {max(p or 0 for p in peaks[name]):.0f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
