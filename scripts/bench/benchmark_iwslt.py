#!/usr/bin/env python3
"""Training and beam-search speed at the IWSLT'15 En-Vi recipe's shapes, end to end, against
fairseq's ``lstm``.

  python scripts/bench/benchmark_iwslt.py WORK [--systems luong_global_general lstm] [--updates 60]
         [--warmup 10] [--repeats 2] [--threads 2] [--before PATH] [--beams 5 10]

WORK is the recipe's work folder after ``examples/iwslt15_en_vi/run.sh --work-dir WORK prepare``
(its ``data-bin``: the anchors' vocabularies, 17,188 English and 7,706 Vietnamese words, pairs of
at most 50 words). Each system trains with exactly the options the recipe gives it
(``run.sh options NAME``: 2 x 512, bidirectional encoder, ``--max-tokens 4000``, float32 or ``--amp``,
Adam, label smoothing), as ``fairseq-train`` in a fresh process, for ``--warmup`` untimed
updates and then ``--updates`` timed ones; the systems alternate, ``--repeats`` times. The
table gives each system's target words per second (fairseq-train's own ``wpb`` and ``wps`` of
the timed updates: their words over their time), its ratio to ``lstm`` in the same repetition
(median and range), and the process's peak resident memory. ``--before PATH`` also runs each of
our systems with the plugin of the checkout at PATH (a ``git worktree`` of the commit before a
change) as NAME@before, with the same options, in the same alternation. ``--updates 0``: no
training, beam search alone.

Beam search (``--beams``; ``--beams`` with no value: none): each system's model after one update
(saved once per system) translates all of tst2012 (1,553 sentences) at each beam, with
the recipe's ``--batch-size 64``, in a fresh process, the systems alternating ``--repeats``
times. A model one update old never chooses the end of a sentence, so every hypothesis runs to
its length limit, here ``--max-len-a 1.2 --max-len-b 1`` (tst2012 has 1.23 Vietnamese tokens an
English one): every system decodes the same number of steps, near the references' length. The
table gives fairseq-generate's own sentences per second (its generation time, not its start),
the ratio to ``lstm``, and the tokens a hypothesis (equal when the lengths are). It is a
benchmark, not a test: run it with nothing else on the machine.
"""
import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys

from bench_device import commit, git_commit

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
RUN = os.path.join(REPO, "examples", "iwslt15_en_vi", "run.sh")

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


def fairseq(plugin, threads, module, args):
    """fairseq's command ``module`` (fairseq_cli.train, .generate) in a fresh process with the
    plugin of the checkout at ``plugin``: its stdout and stderr."""
    env = dict(os.environ, OMP_NUM_THREADS=str(threads), PYTHONWARNINGS="ignore")
    code = f"import sys; from {module} import cli_main; sys.argv = ['fairseq'] + sys.argv[1:]; cli_main()"
    proc = subprocess.run([sys.executable, "-c", code, *args, "--user-dir", os.path.join(plugin, "fairseq_luong")],
                          capture_output=True, text=True, env=env, cwd=plugin)  # cwd: see train_once
    if proc.returncode != 0:
        raise SystemExit(f"benchmark_iwslt.py: {module} failed:\n{proc.stderr[-3000:]}")
    return proc.stdout + proc.stderr


def one_update_model(work, name, options, threads, save, plugin=REPO):
    """NAME's model after one update of the recipe's training, saved as save/checkpoint_last.pt
    (save emptied first: fairseq-train would resume from a checkpoint left there)."""
    shutil.rmtree(save, ignore_errors=True)
    os.makedirs(save)
    fairseq(plugin, threads, "fairseq_cli.train",
            [os.path.join(work, "data-bin"), *options, "--max-update", "1", "--disable-validation",
             "--no-epoch-checkpoints", "--save-dir", save, "--num-workers", "0", "--no-progress-bar"])
    return os.path.join(save, "checkpoint_last.pt")


GENERATED = re.compile(r"Translated ([\d,]+) sentences \(([\d,]+) tokens\) in [\d.]+s \(([\d.]+) sentences/s")


def beam_once(work, model, beam, threads, plugin=REPO):
    """tst2012 translated by ``model`` at ``beam``: fairseq-generate's
    sentences per second and the tokens a hypothesis."""
    out = fairseq(plugin, threads, "fairseq_cli.generate",
                  [os.path.join(work, "data-bin"), "--path", model, "--gen-subset", "valid", "--beam", str(beam),
                   "--batch-size", "64", "--max-len-a", "1.2", "--max-len-b", "1",
                   "--num-workers", "0", "--quiet", "--no-progress-bar"])
    found = GENERATED.search(out)
    if not found:
        raise SystemExit(f"benchmark_iwslt.py: no 'Translated ...' line from fairseq-generate:\n{out[-2000:]}")
    sentences, tokens, rate = (float(g.replace(",", "")) for g in found.groups())
    return rate, tokens / sentences, int(sentences)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    parser.add_argument("work", help="the recipe's work folder (prepared)")
    parser.add_argument("--systems", nargs="+", default=["luong_global_general", "lstm"])
    parser.add_argument("--updates", type=int, default=60,
                        help="timed updates per run (default: %(default)s; 0: no training, beam search alone)")
    parser.add_argument("--warmup", type=int, default=10, help="untimed updates first (default: %(default)s)")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--before", metavar="PATH", help="also our systems with the plugin of the checkout "
                        "at PATH, as NAME@before")
    parser.add_argument("--beams", nargs="*", type=int, default=[5, 10],
                        help="beam sizes timed on tst2012 (default: %(default)s; none: no beam search)")
    args = parser.parse_args(argv)
    if args.before and not os.path.isfile(os.path.join(args.before, "fairseq_luong", "__init__.py")):
        parser.error(f"--before {args.before}: no fairseq_luong/ there")
    if not os.path.isfile(os.path.join(args.work, "data-bin", "dict.vi.txt")):
        parser.error(f"{args.work} has no data-bin/dict.vi.txt: run examples/iwslt15_en_vi/run.sh --work-dir "
                     f"{args.work} prepare first")
    if "lstm" not in args.systems:
        parser.error("--systems: add lstm, the reference the ratios are measured against in the same run")
    for n in (args.warmup, args.repeats, args.threads, *args.beams):
        if n < 1:
            parser.error("--warmup, --repeats, --threads and --beams: give 1 or more")
    if args.updates < 0 or args.updates == 0 and not args.beams:
        parser.error("--updates: give 0 (beam search alone, with --beams) or more")
    options = {name: recipe_options(name) for name in args.systems}
    runs = list(args.systems)  # the rows: NAME, and NAME@before for our systems with --before
    if args.before:
        runs = [r for n in args.systems for r in ([n] if n == "lstm" else [n, n + "@before"])]
    rates = {n: [] for n in runs}
    peaks = {n: [] for n in runs}
    save = os.path.join(args.work, "bench")
    for r in range(args.repeats if args.updates else 0):
        for name in runs:  # alternate the systems
            system, at_before = name.split("@")[0], name.endswith("@before")
            rate, peak = train_once(args.work, system, options[system], args.warmup, args.updates, args.threads,
                                    save, plugin=args.before if at_before else REPO)
            rates[name].append(rate)
            peaks[name].append(peak)
            print(f"[benchmark_iwslt] repetition {r + 1}: {name} {rate:.0f} words/s", file=sys.stderr, flush=True)
    beam_rates = {(n, b): [] for n in runs for b in args.beams}
    lengths = {(n, b): [] for n in runs for b in args.beams}
    counts = set()  # sentences each fairseq-generate says it translated
    if args.beams:
        models = {}
        for name in runs:
            system, at_before = name.split("@")[0], name.endswith("@before")
            models[name] = one_update_model(args.work, system, options[system], args.threads,
                                            os.path.join(save, name.replace("@", "_")),
                                            plugin=args.before if at_before else REPO)
        for r in range(args.repeats):
            for beam in args.beams:
                for name in runs:
                    rate, length, translated = beam_once(args.work, models[name], beam, args.threads,
                                             plugin=args.before if name.endswith("@before") else REPO)
                    beam_rates[name, beam].append(rate)
                    lengths[name, beam].append(length)
                    counts.add(translated)
                    print(f"[benchmark_iwslt] repetition {r + 1}: {name} beam {beam} {rate:.2f} sentences/s",
                          file=sys.stderr, flush=True)
    import torch
    from machine import count, describe_cpu

    kernels = torch.backends.cpu.get_cpu_capability()
    precision = "--amp" if "--amp" in options["lstm"] else "float32"
    print(f"# {describe_cpu()}, {count(args.threads, 'thread')}, torch {torch.__version__} (kernels {kernels}), "
          f"commit {commit()}; IWSLT'15 En-Vi "
          f"(run.sh's options: 2 x 512, --max-tokens 4000, {precision}); "
          + (f"{args.updates} timed updates after {args.warmup}, " if args.updates else "no training, ")
          + count(args.repeats, "alternating repetition")
          + (f"; @before: {args.before} (commit {git_commit(args.before)})" if args.before else ""))
    if args.updates:
        print("| system | train words/s (median) | ratio to lstm | ratio range | peak MB |")
        print("|---|---|---|---|---|")
        for name in runs:
            ratios = [a / b for a, b in zip(rates[name], rates["lstm"])]
            print(f"| {name} | {statistics.median(rates[name]):.0f} | {statistics.median(ratios):.2f} | "
                  f"{min(ratios):.2f}-{max(ratios):.2f} | {max(p or 0 for p in peaks[name]):.0f} |")
    if args.beams:
        translated = " or ".join(map(str, sorted(counts)))
        print(f"\nBeam search: tst2012, {translated} sentences translated, --batch-size 64, every hypothesis to its "
              "length limit (--max-len-a 1.2 --max-len-b 1), fairseq-generate's sentences/s")
        print("| system | beam | sentences/s (median) | ratio to lstm | ratio range | tokens a hypothesis |")
        print("|---|---|---|---|---|---|")
        for beam in args.beams:
            for name in runs:
                ratios = [a / b for a, b in zip(beam_rates[name, beam], beam_rates["lstm", beam])]
                print(f"| {name} | {beam} | {statistics.median(beam_rates[name, beam]):.2f} | "
                      f"{statistics.median(ratios):.2f} | {min(ratios):.2f}-{max(ratios):.2f} | "
                      f"{statistics.median(lengths[name, beam]):.1f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
