#!/usr/bin/env python3
"""The papers' claims in form: what the study trains, and its report (called by run.sh).

  systems [--corpus C]     the trainings, one "NAME SEED CORPUS" a line, in run order
  args NAME                fairseq-train options of system NAME (one word a line)
  plan                     every training with its epochs and expected minutes, the total
  report WORK              report.md and figures from what WORK holds

Everything the study compares is defined once, here: the corpora, the systems (model
and training options), the rows of Luong et al.'s Tables 1, 4 and 6 with the paper's
numbers, Bahdanau et al.'s Figure 2 and perSPE's claim.
"""
import argparse
import json
import math
import os
import random
import statistics
import sys
from typing import List, NamedTuple, Optional, Sequence, Tuple

from fairseq_luong.data.text import read_lines
from fairseq_luong.protocols import bahdanau2014, luong2015, oka2022

# ---------------------------------------------------------------------------------
# The protocol (Luong et al. 2015, section 4.1: fairseq_luong/protocols/luong2015.py) at
# small scale. What differs from the paper's, and why:
EPOCHS = luong2015.EPOCHS            # every system, every row: the paper's 10 (it gave dropout
HALVE_AFTER = luong2015.HALVE_AFTER  # models 12, halving after 8): one schedule for the ladder
SEEDS = (1, 2, 3)  # the ladder rows
# 2 x 128 (the paper: 4 x 1000): the size at which the whole study fits in ~6 hours on 2 cores
SIZE = ["--encoder-layers", "2", "--decoder-layers", "2", "--encoder-embed-dim", "128",
        "--decoder-embed-dim", "128", "--encoder-hidden-size", "128", "--decoder-hidden-size", "128"]
# the paper's initialisation, output layer, optimiser and halving, with the study's schedule
PAPER_TRAIN = (luong2015.INIT + luong2015.optimizer() + luong2015.halving(EPOCHS, HALVE_AFTER)
               + ["--no-epoch-checkpoints", "--log-interval", "50"])
# RNNsearch (Bahdanau et al. 2014): its own initialisation (appendix B.1) and optimiser
# (appendix B.2: fairseq_luong/protocols/bahdanau2014.py), the same epochs
RNNSEARCH_SIZE = ["--encoder-embed-dim", "128", "--decoder-embed-dim", "128",
                  "--encoder-hidden-size", "128", "--decoder-hidden-size", "128",
                  "--attention-dim", "128", "--maxout-dim", "128"]
RNNSEARCH_TRAIN = bahdanau2014.train(EPOCHS) + ["--no-epoch-checkpoints", "--log-interval", "50"]


class System(NamedTuple):
    name: str
    corpus: str  # m30k (en->de words) or kftt (ja->en SentencePiece)
    seeds: Tuple[int, ...]
    args: Tuple[str, ...]
    attention: bool

    def options(self, epochs: int = EPOCHS, size: int = 128) -> List[str]:
        """fairseq-train options; other ``epochs`` (the lr halved after half of them) and
        ``size`` (units of every layer, embeddings and attention) make the same system smaller
        or shorter, for tests (the study itself uses the defaults)."""
        out = list(self.args)
        sized = {"--encoder-embed-dim", "--decoder-embed-dim", "--encoder-hidden-size",
                 "--decoder-hidden-size", "--attention-dim", "--maxout-dim"}
        for i, word in enumerate(out[:-1]):
            if word in sized:
                out[i + 1] = str(size)
            elif word == "--max-epoch":
                out[i + 1] = str(epochs)
            elif word == "--force-anneal":
                out[i + 1] = str(epochs // 2 + 1)
        return out


def luong(name, corpus, seeds, model, *extra):
    """System NAME: the protocol's MODEL (its arch, options, reversal and dropout) at the
    study's size and schedule, then EXTRA."""
    m = luong2015.MODELS[model]
    args = (["--arch", m.arch] + SIZE + PAPER_TRAIN + list(m.flags) + (luong2015.REVERSE if m.reverse else [])
            + luong2015.dropout(m.dropout) + list(extra))
    return System(name, corpus, tuple(seeds), tuple(args), m.arch != "luong_base")


KFTT_LOCATION = ("--location-max-len", "256")  # KFTT: up to 200 pieces (gold set), more than 100
SYSTEMS: List[System] = [
    # Table 1: each row adds one thing to the one above it (three seeds each)
    luong("m30k_base", "m30k", SEEDS, "base"),
    luong("m30k_reverse", "m30k", SEEDS, "reverse"),
    luong("m30k_dropout", "m30k", SEEDS, "dropout"),
    luong("m30k_global_location", "m30k", SEEDS, "global_location"),
    luong("m30k_global_location_feed", "m30k", SEEDS, "global_location_feed"),
    luong("m30k_localp_general_feed", "m30k", SEEDS, "localp_general_feed"),
    # Table 4: the other scores and attentions, one seed (input feeding, reverse, dropout)
    luong("m30k_global_dot_feed", "m30k", (1,), "global_dot_feed"),
    luong("m30k_global_general_feed", "m30k", (1,), "global_general_feed"),
    luong("m30k_localm_dot_feed", "m30k", (1,), "localm_dot_feed"),
    luong("m30k_localm_general_feed", "m30k", (1,), "localm_general_feed"),
    luong("m30k_localp_dot_feed", "m30k", (1,), "localp_dot_feed"),
    # KFTT ja->en: Table 6 (AER) and Bahdanau et al.'s Figure 2 (BLEU by length)
    luong("kftt_global_location_feed", "kftt", (1,), "global_location_feed", *KFTT_LOCATION),
    luong("kftt_localm_general_feed", "kftt", (1,), "localm_general_feed"),
    luong("kftt_localp_general_feed", "kftt", (1,), "localp_general_feed"),
    luong("kftt_base_dropout", "kftt", (1,), "dropout"),
    System("kftt_rnnsearch", "kftt", (1,), ("--arch", "rnnsearch", *RNNSEARCH_SIZE, *RNNSEARCH_TRAIN), True),
]
BY_NAME = {s.name: s for s in SYSTEMS}
# The ensemble row: eight attention models, as the paper's (its 8 mix scores and attentions)
ENSEMBLE = [("m30k_global_location_feed", 1), ("m30k_global_dot_feed", 1), ("m30k_global_general_feed", 1),
            ("m30k_localm_dot_feed", 1), ("m30k_localm_general_feed", 1), ("m30k_localp_dot_feed", 1),
            ("m30k_localp_general_feed", 1), ("m30k_localp_general_feed", 2)]
AER_SYSTEMS = ["kftt_global_location_feed", "kftt_localm_general_feed", "kftt_localp_general_feed"]
FIG2_SYSTEMS = [("RNNsearch", "kftt_rnnsearch"), ("RNNencdec (luong_base)", "kftt_base_dropout"),
                ("global (location)", "kftt_global_location_feed"), ("local-p (general)", "kftt_localp_general_feed")]
# perSPE's SPE/SPE and SPE/perSPE (k = 1, per phrase), as fairseq_luong/protocols/oka2022.py writes them
PERSPE_SYSTEMS = {name: list(oka2022.BY_NAME[name].options) for name in ("spe_spe", "spe_perspe")}
PERSPE_SEEDS = (1, 2, 3)


class Row(NamedTuple):
    name: str
    what: str
    system: Optional[str]  # None: the ensemble
    unk: bool
    paper_ppl: Optional[float]
    paper_bleu: Optional[float]


# Luong et al. (2015), Table 1 (WMT'14 En->De, newstest2014: test perplexity, tokenised
# BLEU), its rows and the paper's numbers as the protocol has them; each on its m30k system
TABLE1 = [Row(r.name[len("t1_"):], r.what[len("Table 1: "):],
              None if len(r.models) > 1 else f"m30k_{r.models[0]}", r.unk == "yes",
              luong2015.paper_ppl(r.name), luong2015.paper_bleu(r.name))
          for r in luong2015.ROWS if r.name.startswith("t1_")]
# Table 4: (label, system, paper ppl, paper BLEU, paper BLEU + unk); None = the paper's "x"
TABLE4 = [(r.what[len("Table 4: "):], f"m30k_{r.models[0]}", luong2015.paper_ppl(r.name),
           luong2015.paper_bleu(r.name), luong2015.paper_bleu(r.name, unk=True))
          for r in luong2015.ROWS if r.name.startswith("t4_")]
# Table 6 (RWTH En-De gold alignments, AER): the KFTT system of each row's model
TABLE6_PAPER = {("ensemble" if len(r.models) > 1 else f"kftt_{r.models[0]}"): r.paper_aer
                for r in luong2015.ROWS if r.paper_aer is not None and r.name != "t2_ensemble"}
TABLE6_PAPER["Berkeley aligner"] = luong2015.BERKELEY_AER


def trainings(corpus: Optional[str] = None) -> List[Tuple[System, int]]:
    """Every (system, seed) to train, seed 1 of every system first (so that a study cut
    short has one of each), then the other seeds."""
    chosen = [s for s in SYSTEMS if corpus in (None, s.corpus)]
    order = [(s, 1) for s in chosen if 1 in s.seeds]
    order += [(s, seed) for seed in (2, 3) for s in chosen if seed in s.seeds]
    return order


# ---------------------------------------------------------------------------------
# The budget (run.sh --plan), before the study has measured its own trainings. Minutes per
# epoch measured on this machine (2 cores of an AMD EPYC, AVX2, no GPU, torch 2.13.0, nothing
# else running, OMP_NUM_THREADS=2) with `bash run.sh time SYSTEM` (200 updates of SYSTEM,
# extrapolated to its epoch; validation not counted); with one thread the same took 1.25
# times as long (m30k local-p: 0.95 against 0.76 minutes). perSPE: examples/perspe/README.md's
# minutes per seed of PRESET=small
# (2,000 updates of 2,048 tokens) on small_parallel_enja. Evaluation: an estimate.
MINUTES_PER_EPOCH = {"m30k_base": 0.38, "m30k_attention": 0.76, "kftt_base": 0.98,
                     "kftt_attention": 1.27, "kftt_rnnsearch": 2.19}
ONE_THREAD_FACTOR = 1.25
PERSPE_MINUTES_PER_SEED = 11.0
EVAL_MINUTES = 30.0


def budget_key(system: System) -> str:
    if system.name == "kftt_rnnsearch":
        return "kftt_rnnsearch"
    return f"{system.corpus}_{'attention' if system.attention else 'base'}"


def measured_minutes(results: Optional[str]) -> dict:
    """{label: fairseq-train minutes} of the trainings published in RESULTS (result.json)."""
    out = {}
    for root in (os.path.join(results, "systems"), os.path.join(results, "perspe", "systems")) if results else ():
        for dirpath, _, files in os.walk(root):
            if "result.json" in files:
                r = load_json(os.path.join(dirpath, "result.json"))
                if r.get("train_minutes") is not None and r.get("study", {}).get("slice") == "0":
                    out[(r["system"], r["seed"])] = r["train_minutes"]
    return out


def cmd_plan(args):
    """Every training with its minutes: measured where the study has published it (two
    trainings at a time, one thread each), else the mean measured for its kind, else the
    estimate of MINUTES_PER_EPOCH; the wall clock with --jobs trainings at a time."""
    measured = measured_minutes(args.results)
    kinds: dict = {}
    for (name, seed), m in measured.items():
        kind = "perspe" if name.startswith("perspe_") else budget_key(BY_NAME[name])
        kinds.setdefault(kind, []).append(m)
    total, n_measured = 0.0, 0
    print(f"{'training':40s} {'seed':>4s} {'epochs':>6s} {'minutes':>8s}  source")
    rows = [(s.name, seed, budget_key(s), EPOCHS * MINUTES_PER_EPOCH[budget_key(s)] * ONE_THREAD_FACTOR, str(EPOCHS))
            for s, seed in trainings()]
    rows += [(f"perspe_{n}", seed, "perspe", PERSPE_MINUTES_PER_SEED * ONE_THREAD_FACTOR, "2000u")
             for n in PERSPE_SYSTEMS for seed in PERSPE_SEEDS]
    for name, seed, kind, estimate, epochs in rows:
        if (name, seed) in measured:
            minutes, source = measured[(name, seed)], "measured"
            n_measured += 1
        elif kind in kinds:
            minutes, source = statistics.mean(kinds[kind]), f"mean of {len(kinds[kind])} measured"
        else:
            minutes, source = estimate, "estimate"
        total += minutes
        print(f"{name:40s} {seed:4d} {epochs:>6s} {minutes:8.1f}  {source}")
    print(f"{'evaluation after each training':40s} {'':4s} {'':6s} {EVAL_MINUTES:8.1f}  estimate")
    total += EVAL_MINUTES
    n = len(rows)
    print(f"total: {n} trainings, {total / 60:.1f} hours of training at one thread each; about "
          f"{total / args.jobs / 60:.1f} hours of wall clock with {args.jobs} at a time (run.sh --jobs "
          f"{args.jobs}, one thread each); {n_measured} of {n} measured (fairseq-train's wall clock of the "
          "published trainings), the rest from the measured ones of their kind or from `run.sh time`")


def cmd_systems(args):
    for system, seed in trainings(args.corpus):
        print(system.name, seed, system.corpus)


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
    import runner

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
        runner.state(runner.Label(args.name, args.seed), args.results, opts)
    else:
        runner.publish(runner.Label(args.name, args.seed), args.work, args.results, opts)


def cmd_run(args):
    import runner

    runner.run_all(args.jobs, args.run_sh, args.results, study_options(args))


def cmd_args(args):
    if args.name not in BY_NAME:
        raise SystemExit(f"error: unknown system {args.name!r} (known: {' '.join(BY_NAME)})")
    print("\n".join(BY_NAME[args.name].options(args.epochs, args.size)))


# ---------------------------------------------------------------------------------
# The report
def load_json(path: str):
    if not os.path.exists(path):
        return None
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def mean_sd(values: Sequence[float]) -> Tuple[Optional[float], Optional[float]]:
    values = [v for v in values if v is not None]
    if not values:
        return None, None
    return statistics.mean(values), (statistics.stdev(values) if len(values) > 1 else None)


def fmt(x, spec=".2f", none="-"):
    return none if x is None else format(x, spec)


def fmt_ms(values: Sequence[float], spec=".2f") -> str:
    m, sd = mean_sd(values)
    if m is None:
        return "-"
    return f"{m:{spec}}" + ("" if sd is None else f" ± {sd:{spec}}")


class Study:
    """What WORK holds: scores of each system and seed, written by run.sh eval."""

    def __init__(self, work: str, gold: str):
        self.work = work
        self.gold = gold  # kftt_gold_align_ja_en

    def path(self, *parts) -> str:
        return os.path.join(self.work, *parts)

    def system_dir(self, name: str, seed: int) -> str:
        return self.path("systems", f"{name}.s{seed}")

    def bleu(self, name: str, seed: int, unk: bool = False) -> Optional[float]:
        s = load_json(os.path.join(self.system_dir(name, seed), "test.unk.bleu.json" if unk else "test.bleu.json"))
        return None if s is None else s["score"]

    def ppl(self, name: str, seed: int) -> Optional[float]:
        s = load_json(os.path.join(self.system_dir(name, seed), "test_ppl.json"))
        return None if s is None else s["ppl"]

    def hyp(self, name: str, seed: int, unk: bool = False) -> str:
        return os.path.join(self.system_dir(name, seed), "test.unk.detok" if unk else "test.detok")

    def seeds(self, name: str) -> Tuple[int, ...]:
        return BY_NAME[name].seeds

    def closest_to_mean(self, name: str, unk: bool) -> Optional[int]:
        scores = {s: self.bleu(name, s, unk) for s in self.seeds(name)}
        scores = {s: b for s, b in scores.items() if b is not None}
        if not scores:
            return None
        m = statistics.mean(scores.values())
        return min(scores, key=lambda s: (abs(scores[s] - m), s))


def paired_bootstrap(ref: str, baseline: str, system: str, n: int = 1000) -> Optional[dict]:
    """``sacrebleu REF -i BASELINE SYSTEM --paired-bs`` (Koehn 2004; 1,000 resamples,
    sacreBLEU's fixed seed): {"p": p-value of SYSTEM against BASELINE, "base", "score"}.
    Both files detokenised, one translation a line, against the raw reference."""
    import subprocess

    if not (os.path.exists(baseline) and os.path.exists(system)):
        return None
    proc = subprocess.run(["sacrebleu", ref, "-i", baseline, system, "--paired-bs", "--paired-bs-n", str(n),
                           "-m", "bleu", "-f", "json"], capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"error: sacrebleu --paired-bs failed on {baseline} {system}:\n{proc.stderr[-2000:]}")
    base, other = json.loads(proc.stdout)
    return {"p": other["BLEU"]["p_value"], "base": base["BLEU"]["score"], "score": other["BLEU"]["score"]}


def verdict(gain: Optional[float], se: Optional[float], p: Optional[float], higher_is_better: bool = True) -> str:
    """holds: in the paper's direction beyond twice the seeds' standard error and the
    paired bootstrap (p < 0.05); does not hold: the opposite, by the same two tests;
    inconclusive otherwise (a difference inside the seed spread, or untested)."""
    if gain is None:
        return "not run"
    sign = 1 if higher_is_better else -1
    signed = sign * gain
    beyond_seeds = se is not None and abs(gain) > 2 * se
    significant = p is not None and p < 0.05
    if signed > 0 and beyond_seeds and significant:
        return "holds"
    if signed < 0 and beyond_seeds and significant:
        return "does not hold"
    return "inconclusive"


def se_of_difference(a: Sequence[float], b: Sequence[float]) -> Optional[float]:
    """Standard error of mean(b) - mean(a) from the seeds (Welch); None with one seed on a side."""
    a, b = [x for x in a if x is not None], [x for x in b if x is not None]
    if len(a) < 2 or len(b) < 2:
        return None
    return math.sqrt(statistics.variance(a) / len(a) + statistics.variance(b) / len(b))


# ---------------------------------------------------------------------------------
# AER with a paired bootstrap over the gold sentences
def aer_sentences(gold: str, test: str, first_text: str, second_text: str):
    """Per gold sentence, its AER counts (|A & S|, |A & P|, |A|, |S|): the gold 1-indexed,
    the test 0-indexed (force_align.py, diagonal_align.py), both Japanese first; gold links
    past the end of their sentence dropped (6 in the KFTT set), as aer.py
    --drop-out-of-range-gold does."""
    from fairseq_luong.analysis.alignment import Links, aer_counts, read_links

    golds = read_links(gold, one_based=True, target_first=False)
    tests = read_links(test, one_based=False, target_first=False)
    firsts, seconds = read_lines(first_text), read_lines(second_text)
    if not (len(golds) == len(tests) == len(firsts) == len(seconds)):
        raise SystemExit(f"error: {gold}, {test}, {first_text}, {second_text} differ in line count")
    rows = []
    for g, t, a, b in zip(golds, tests, firsts, seconds):
        n, m = len(a.split()), len(b.split())
        inside = lambda link: 0 <= link[0] < n and 0 <= link[1] < m  # noqa: E731
        g = Links({x for x in g.sure if inside(x)}, {x for x in g.possible if inside(x)})
        rows.append(aer_counts([g], [t.sure | t.possible]))
    return rows


def aer_of(rows) -> float:
    """AER of the summed counts of ``rows`` (AERCounts of aer_sentences)."""
    from fairseq_luong.analysis.alignment import AERCounts

    return AERCounts(*(sum(r[k] for r in rows) for k in range(4))).aer


def paired_bootstrap_aer(rows_a, rows_b, n: int = 1000, seed: int = 12345) -> float:
    """p-value that B's AER is not below A's: the share of resamples (sentences drawn with
    replacement, the same for both) in which AER(B) >= AER(A)."""
    rng = random.Random(seed)
    k = len(rows_a)
    worse = 0
    for _ in range(n):
        idx = [rng.randrange(k) for _ in range(k)]
        if aer_of([rows_b[i] for i in idx]) >= aer_of([rows_a[i] for i in idx]):
            worse += 1
    return worse / n


# ---------------------------------------------------------------------------------
# BLEU on groups of sentences
def corpus_bleu(hyps: Sequence[str], refs: Sequence[str], **kw) -> float:
    import sacrebleu

    return sacrebleu.corpus_bleu(list(hyps), [list(refs)], **kw).score


def long_short_drop(hyps, refs, lengths, cut) -> float:
    """BLEU of the sentences longer than ``cut`` source words minus BLEU of the others."""
    long = [i for i, n in enumerate(lengths) if n > cut]
    short = [i for i, n in enumerate(lengths) if n <= cut]
    return (corpus_bleu([hyps[i] for i in long], [refs[i] for i in long])
            - corpus_bleu([hyps[i] for i in short], [refs[i] for i in short]))


def bootstrap_drop_difference(sys_a, sys_b, refs, lengths, cut, n=1000, seed=12345):
    """p-value that A falls off with length no more than B: resampling sentences (the same
    for both), the share of resamples where drop(A) >= drop(B)."""
    rng = random.Random(seed)
    k = len(refs)
    hits = 0
    for _ in range(n):
        idx = [rng.randrange(k) for _ in range(k)]
        pick = lambda xs: [xs[i] for i in idx]  # noqa: E731
        d_a = long_short_drop(pick(sys_a), pick(refs), pick(lengths), cut)
        d_b = long_short_drop(pick(sys_b), pick(refs), pick(lengths), cut)
        hits += d_a >= d_b
    return hits / n


# ---------------------------------------------------------------------------------
# The report itself
def published(study: "Study") -> List[dict]:
    """The result.json of every published training, in the study's run order."""
    import runner

    out = []
    for label in runner.all_labels(sys.modules[__name__]):
        r = load_json(study.path(label.rel, "result.json"))
        if r is not None:
            out.append(r)
    return out


def git_commits(study: "Study") -> List[str]:
    """The commits that trained what RESULTS holds (each result.json names its own)."""
    return sorted({r["commit"] for r in published(study)})


def trainings_table(study: "Study", w):
    """Every training with its commit, its time, its scores and the command that remakes it."""
    rows = published(study)
    w("## The trainings and how to remake each")
    w("")
    w("Each row was trained, evaluated and published (`run.sh one SYSTEM SEED`) by the commit it "
      "names, two trainings at a time, one thread each, on the project's machine (2 cores of an AMD "
      "EPYC, AVX2, no GPU). To remake one: `git checkout COMMIT`, then the command; it trains into "
      "`--work-dir` and, where the result is published already, says whether its scores are the same.")
    w("")
    w("| training | commit | minutes | scores | command |")
    w("|---|---|---|---|---|")
    for r in rows:
        scores = ", ".join(f"{k} {v:.2f}" for k, v in r["scores"].items() if v is not None)
        commit = r["commit"][:10] + (" with uncommitted changes" if "+" in r["commit"] else "")
        w(f"| {r['system']} seed {r['seed']} | {commit} | {fmt(r.get('train_minutes'), '.1f')} | "
          f"{scores} | `bash examples/luong2015_in_form/run.sh one {r['system']} {r['seed']}` |")
    missing = (load_json(study.path("eval", "missing.json")) or {}).get("missing", {})
    for row, lost in missing.items():
        w("")
        w(f"**{row}** lacks the checkpoints of {', '.join(lost)} (not in the work folder where `finish` ran): "
          + "; ".join(f"`bash examples/luong2015_in_form/run.sh one {m.rsplit('.s', 1)[0]} {m.rsplit('.s', 1)[1]}`"
                      for m in lost) + ", then `run.sh finish`.")
    w("")


def training_minutes(log_path: str) -> Optional[float]:
    """fairseq's wall clock at the end of training (minutes), from its train.log."""
    from fairseq_luong.analysis.training_log import read_training_log, wall_seconds

    if not os.path.exists(log_path):
        return None
    log = read_training_log(log_path)
    records = log.train_inner + log.train
    if not records:
        return None
    wall = wall_seconds(log, max(r.num_updates for r in records))
    return None if wall is None else wall / 60


def valid_curve(log_path: str) -> Tuple[List[float], List[float]]:
    """(epochs, valid ppl) of a fairseq-train log."""
    from fairseq_luong.analysis.training_log import read_training_log

    if not os.path.exists(log_path):
        return [], []
    log = read_training_log(log_path)
    rows = [(r.epoch, r.stats["ppl"]) for r in log.valid.get("valid", []) if "ppl" in r.stats]
    return [e for e, _ in rows], [p for _, p in rows]


def cmd_report(args):
    study = Study(args.work, os.path.join(args.shared, "kftt_gold_align_ja_en"))
    out = args.out or study.path("report.md")
    fig_dir = os.path.join(os.path.dirname(os.path.abspath(out)), "figures")
    os.makedirs(fig_dir, exist_ok=True)
    lines: List[str] = []
    verdicts: List[Tuple[str, str, str, str]] = []  # (claim, paper, ours, verdict)
    w = lines.append
    commits = git_commits(study)
    w("# The papers' claims in form, at small scale: report")
    w("")
    w(f"Written by `bash examples/luong2015_in_form/run.sh report` from the published results "
      f"(`{os.path.relpath(os.path.abspath(args.work), os.getcwd())}`). Trainings made by commit(s) "
      f"{', '.join(c[:10] + (' with uncommitted changes' if '+' in c else '') for c in commits) or '(none published)'}"
      f" ({len(published(study))} of {len(trainings()) + len(PERSPE_SYSTEMS) * len(PERSPE_SEEDS)} trainings).")
    w("")
    table1(study, w, verdicts, fig_dir)
    table4(study, w, verdicts)
    table6(study, w, verdicts)
    figure2(study, w, verdicts, fig_dir)
    perspe(study, w, verdicts)
    curves(study, w, fig_dir)
    heatmaps(study, w, fig_dir)
    budget(study, w)
    trainings_table(study, w)
    summary = ["## Verdicts", "",
               "| claim | the paper | here | verdict |", "|---|---|---|---|"]
    summary += [f"| {c} | {p} | {o} | {v} |" for c, p, o, v in verdicts]
    summary += ["", "holds: in the paper's direction beyond twice the seeds' standard error of the "
                "difference and by the paired bootstrap (p < 0.05); does not hold: significantly the "
                "other way by the same tests; inconclusive: neither (inside the seed spread, or one "
                "seed only where no spread can be estimated).", ""]
    text = "\n".join(lines[:4] + summary + lines[4:]) + "\n"
    with open(out, "w", encoding="utf-8") as f:
        f.write(text)
    print(text)


def rel(path: str, out_dir: str) -> str:
    return os.path.relpath(path, out_dir)


def row_scores(study: Study, row: Row) -> Tuple[List[Optional[float]], List[Optional[float]]]:
    if row.system is None:
        s = load_json(study.path("eval", "ensemble", "test.unk.bleu.json"))
        return [None if s is None else s["score"]], []
    seeds = study.seeds(row.system)
    bleus = [study.bleu(row.system, s, row.unk) for s in seeds]
    ppls = [] if row.unk else [study.ppl(row.system, s) for s in seeds]
    return bleus, ppls


def row_hyp(study: Study, row: Row) -> Optional[str]:
    """The translation the paired bootstrap compares: the seed closest to the row's mean."""
    if row.system is None:
        return study.path("eval", "ensemble", "test.unk.detok")
    seed = study.closest_to_mean(row.system, row.unk)
    return None if seed is None else study.hyp(row.system, seed, row.unk)


def table1(study: Study, w, verdicts, fig_dir):
    ref = study.path("data", "m30k", "raw", "test.de")
    w("## Table 1 in form: the ladder (Multi30k En→De, words)")
    w("")
    w("Each row adds one change to the row above it, as Luong et al. (2015) Table 1. "
      "BLEU: sacreBLEU (13a, mixed case) of the detokenised output against the raw German "
      "reference of test_2016_flickr (1,000 sentences); ppl: perplexity of the test set "
      "(as the paper's newstest2014 column), `<unk>` included. Mean ± sample sd over the seeds; "
      "Δ: change from the row above (mean of ours; the paper's single runs); p: paired "
      "bootstrap (sacreBLEU `--paired-bs`, 1,000 resamples) of the seed closest to the row's "
      "mean against the row above's.")
    w("")
    w("| row | seeds | BLEU | Δ BLEU | p | paper BLEU (Δ) | test ppl | Δ ppl | paper ppl (Δ) "
      "| verdict BLEU | verdict ppl |")
    w("|---|---|---|---|---|---|---|---|---|---|---|")
    prev = None
    for row in TABLE1:
        bleus, ppls = row_scores(study, row)
        m_b, _ = mean_sd(bleus)
        m_p, _ = mean_sd(ppls)
        d_b = d_p = p = se_b = se_p = None
        paper_d = paper_dp = None
        if prev is not None:
            pb, pp = row_scores(study, prev)
            if m_b is not None and mean_sd(pb)[0] is not None:
                d_b = m_b - mean_sd(pb)[0]
                se_b = se_of_difference(pb, bleus)
                if row.system is None or prev.system is None:
                    se_b = None
                test = paired_bootstrap(ref, row_hyp(study, prev) or "", row_hyp(study, row) or "")
                p = None if test is None else test["p"]
            if m_p is not None and mean_sd(pp)[0] is not None:
                d_p = m_p - mean_sd(pp)[0]
                se_p = se_of_difference(pp, ppls)
            if row.paper_bleu is not None and prev.paper_bleu is not None:
                paper_d = row.paper_bleu - prev.paper_bleu
            if row.paper_ppl is not None and prev.paper_ppl is not None:
                paper_dp = row.paper_ppl - prev.paper_ppl
        v_b = verdict(d_b, se_b, p) if prev is not None else ""
        v_p = verdict_seeds(d_p, se_p, higher_is_better=False) if prev is not None and ppls else ""
        n_seeds = sum(b is not None for b in bleus)
        w(f"| {row.what} | {n_seeds} | {fmt_ms(bleus)} | {fmt(d_b, '+.2f')} | {fmt(p, '.3f')} | "
          f"{fmt(row.paper_bleu, '.1f')} ({fmt(paper_d, '+.1f')}) | {fmt_ms(ppls)} | {fmt(d_p, '+.2f')} | "
          f"{fmt(row.paper_ppl, '.1f')} ({fmt(paper_dp, '+.1f')}) | {v_b} | {v_p} |")
        if prev is not None:
            verdicts.append((f"Table 1: {row.what}", f"{fmt(paper_d, '+.1f')} BLEU"
                             + (f", {fmt(paper_dp, '+.1f')} ppl" if paper_dp is not None else ""),
                             f"{fmt(d_b, '+.2f')} BLEU (p {fmt(p, '.3f')})"
                             + (f", {fmt(d_p, '+.2f')} ppl" if d_p is not None else ""),
                             v_b + (f" (BLEU); {v_p} (ppl)" if v_p else "")))
        prev = row
    w("")


def verdict_seeds(gain, se, higher_is_better=True) -> str:
    """A verdict from the seeds alone (perplexity has no paired bootstrap here)."""
    if gain is None:
        return "not run"
    if se is None:
        return "inconclusive"
    signed = gain if higher_is_better else -gain
    if abs(gain) <= 2 * se:
        return "inconclusive"
    return "holds" if signed > 0 else "does not hold"


def table4(study: Study, w, verdicts):
    ref = study.path("data", "m30k", "raw", "test.de")
    w("## Table 4 in form: attention and score functions (Multi30k En→De)")
    w("")
    w("All with input feeding, reversed source and dropout, as the paper's. global (location) "
      "and local-p (general) are the ladder's models (3 seeds: mean ± sd); the others one seed "
      "(seed 1). +unk: unknown words replaced from the attended source word through an IBM "
      "Model 1 dictionary of the training data (the paper's dictionary came from its own "
      "aligner); p(unk): paired bootstrap of +unk against the same model without it.")
    w("")
    w("| attention (score) | seeds | test ppl | BLEU | BLEU +unk | p(unk) | paper ppl | paper BLEU | paper +unk |")
    w("|---|---|---|---|---|---|---|---|---|")
    means = {}
    for label, name, pppl, pbleu, punk in TABLE4:
        seeds = study.seeds(name)
        ppls = [study.ppl(name, s) for s in seeds]
        b = [study.bleu(name, s) for s in seeds]
        bu = [study.bleu(name, s, True) for s in seeds]
        seed = study.closest_to_mean(name, False)
        test = None if seed is None else paired_bootstrap(ref, study.hyp(name, seed), study.hyp(name, seed, True))
        means[label] = (mean_sd(b)[0], mean_sd(bu)[0], mean_sd(ppls)[0], test)
        w(f"| {label} | {sum(x is not None for x in b)} | {fmt_ms(ppls)} | {fmt_ms(b)} | {fmt_ms(bu)} | "
          f"{fmt(test and test['p'], '.3f')} | {pppl} | {fmt(pbleu, '.1f', 'x')} | {fmt(punk, '.1f', 'x')} |")
    w("")
    # the seed spread of the ladder's two 3-seed models: the noise a one-seed difference must beat
    spread = [mean_sd([study.bleu(n, s) for s in study.seeds(n)])[1] for n in
              ("m30k_global_location_feed", "m30k_localp_general_feed")]
    spread = [x for x in spread if x is not None]
    sd = max(spread) if spread else None
    gains = {k: (v[1] - v[0]) for k, v in means.items() if v[0] is not None and v[1] is not None}
    if gains:
        ok = [k for k, v in means.items() if v[3] is not None and v[3]["p"] < 0.05 and gains.get(k, 0) > 0]
        w(f"Unk replacement: {fmt(min(gains.values()), '+.2f')} to {fmt(max(gains.values()), '+.2f')} BLEU "
          f"(paper: +1.2 to +1.9); significant (p < 0.05) for {len(ok)} of {len(gains)} models.")
        none = all(g <= 0 for g in gains.values())
        v = "holds" if len(ok) == len(gains) else ("does not hold" if none else "inconclusive")
        verdicts.append(("Table 4: unk replacement helps every attention model", "+1.2 to +1.9 BLEU",
                         f"{fmt(min(gains.values()), '+.2f')} to {fmt(max(gains.values()), '+.2f')}; "
                         f"p < 0.05 for {len(ok)} of {len(gains)}", v))
    scored = {k: v[0] for k, v in means.items() if v[0] is not None}
    if scored and sd is not None:
        best = max(scored, key=scored.get)
        lp = scored.get("local-p (general)")
        margin = None if lp is None else lp - max(v for k, v in scored.items() if k != "local-p (general)")
        v = "holds" if margin is not None and margin > 2 * sd else (
            "does not hold" if margin is not None and margin < -2 * sd else "inconclusive")
        w(f"Best without unk replacement: {best} ({scored[best]:.2f}); local-p (general) minus the best "
          f"other: {fmt(margin, '+.2f')} BLEU, against a seed sd of up to {sd:.2f} (the ladder's 3-seed models).")
        verdicts.append(("Table 4: local-p (general) is the best model", "19.0 vs at most 18.6",
                         f"{fmt(margin, '+.2f')} BLEU over the best other (seed sd {sd:.2f})", v))
        g_dot, g_gen = scored.get("global (dot)"), scored.get("global (general)")
        if g_dot is not None and g_gen is not None:
            d = g_dot - g_gen
            v = "holds" if d > 2 * sd else ("does not hold" if d < -2 * sd else "inconclusive")
            verdicts.append(("Table 4: for global attention dot beats general", "18.6 vs 17.3 (+1.3)",
                             f"{d:+.2f} BLEU (one seed each; seed sd {sd:.2f})", v))
    w("")


def table6(study: Study, w, verdicts):
    gold_dir = study.gold
    aer_dir = study.path("eval", "aer")
    w("## Table 6 in form: alignment error rate (KFTT Ja→En, 582 gold pairs)")
    w("")
    w("Forced alignment of the gold sentences in the gold's own words (SentencePiece pieces "
      "folded into words by `scripts/eval/force_align.py`), one link per English word; AER against "
      "the gold's sure and possible links (`scripts/eval/aer.py`; the 6 gold links past their "
      "sentence's end dropped). Paper convention: footnote 14 (a content-based a_t aligns the "
      "input word y_{t-1}); fairseq: row t aligns y_t, as `--print-alignment`. The paper's "
      "figures are for RWTH En-De, 4 x 1000 models on WMT'14: the ordering is the claim.")
    w("")
    w("| aligner | AER (footnote 14) | AER (as fairseq) | paper AER |")
    w("|---|---|---|---|")
    names = AER_SYSTEMS + ["ensemble", "diagonal"]
    rows = {}
    for name in names:
        cells = []
        for conv in ("paper", "fairseq"):
            path = os.path.join(aer_dir, f"{name}.{conv}.align" if name != "diagonal" else "diagonal.align")
            if os.path.exists(path) and gold_dir:
                r = aer_sentences(os.path.join(gold_dir, "jaen.gold"), path, os.path.join(gold_dir, "jaen.ja"),
                                  os.path.join(gold_dir, "jaen.en"))
                rows[(name, conv)] = r
                cells.append(f"{aer_of(r):.3f}")
            else:
                cells.append("-")
        paper = TABLE6_PAPER.get(name)
        label = {"ensemble": "ensemble of the three", "diagonal": "diagonal (lengths only)"}.get(name, name)
        w(f"| {label} | {cells[0]} | {cells[1]} | {fmt(paper, '.2f')} |")
    w(f"| Berkeley aligner (the paper's) | - | - | {TABLE6_PAPER['Berkeley aligner']:.2f} |")
    w("")
    glob = rows.get(("kftt_global_location_feed", "paper"))
    for local in ("kftt_localm_general_feed", "kftt_localp_general_feed"):
        loc = rows.get((local, "paper"))
        if glob is None or loc is None:
            continue
        d = aer_of(loc) - aer_of(glob)
        p = paired_bootstrap_aer(glob, loc)
        worse = d > 0 and paired_bootstrap_aer(loc, glob) < 0.05
        v = "holds" if d < 0 and p < 0.05 else ("does not hold" if worse else "inconclusive")
        w(f"{local} minus global (location): {d:+.3f} AER (paired bootstrap over the gold sentences, "
          f"p = {p:.3f}).")
        verdicts.append((f"Table 6: {local.split('_')[1]} attention aligns better than global (location)",
                         f"{TABLE6_PAPER[local]:.2f} vs 0.39",
                         f"{aer_of(loc):.3f} vs {aer_of(glob):.3f} (p {p:.3f})", v))
    diag = rows.get(("diagonal", "paper"))
    if diag is not None and glob is not None:
        w(f"The diagonal baseline: {aer_of(diag):.3f}.")
    w("")


def figure2(study: Study, w, verdicts, fig_dir):
    from fairseq_luong.analysis.bleu_by_length import bleu_by_length, buckets
    from fairseq_luong.analysis.plots import plot_bleu_by_length

    src = study.path("data", "kftt", "text", "test.ja")
    ref = study.path("data", "kftt", "text", "test.en")
    w("## Bahdanau et al. (2014) Figure 2 in form: BLEU by source length (KFTT Ja→En)")
    w("")
    if not os.path.exists(src):
        w("(not prepared)")
        w("")
        return
    lengths = [len(x.split()) for x in read_lines(src)]
    refs = read_lines(ref)
    systems = {}
    for label, name in FIG2_SYSTEMS:
        hyp = study.hyp(name, 1)
        if os.path.exists(hyp):
            systems[label] = read_lines(hyp)
    groups = buckets(list(range(5, 55, 5)))
    if not systems:
        w("(no system translated yet)")
        w("")
        return
    scores, counts = bleu_by_length(lengths, refs, systems, groups)
    w(f"The held-out KFTT tune sentences ({len(refs)}: tune without the gold-aligned ones and "
      f"without the {(load_json(study.path('data', 'kftt', 'split', 'split.json')) or {}).get('valid', '?')} "
      "used for validation), grouped by the number of Japanese "
      "(MeCab) words; sacreBLEU 13a against the lower-cased tokenised reference. One seed each.")
    w("")
    w("| system | " + " | ".join(f"{b.label} ({c})" for b, c in zip(groups, counts)) + " | all |")
    w("|---|" + "---|" * (len(groups) + 1))
    for label, row in scores.items():
        w(f"| {label} | " + " | ".join(fmt(x, '.1f') for x in row) + f" | {corpus_bleu(systems[label], refs):.2f} |")
    w("")
    png = plot_bleu_by_length([b.label for b in groups], list(scores.items()),
                              os.path.join(fig_dir, "fig2_bleu_by_length.png"),
                              title="KFTT Ja-En: BLEU by source length")
    w(f"![BLEU by source length]({rel(png, os.path.dirname(fig_dir))})")
    w("")
    cut = 30  # the training data's longest sentences (KFTT 30K: at most 30 words)
    n_long = sum(n > cut for n in lengths)
    if not 0 < n_long < len(lengths):
        w(f"No verdict: {n_long} of the {len(lengths)} test sentences are over {cut} words, so there are not "
          "two groups to compare.")
    elif "RNNsearch" in systems and "RNNencdec (luong_base)" in systems:
        drops = {k: long_short_drop(v, refs, lengths, cut) for k, v in systems.items()}
        p = bootstrap_drop_difference(systems["RNNencdec (luong_base)"], systems["RNNsearch"], refs, lengths, cut)
        w(f"BLEU of the {n_long} sentences over {cut} words minus BLEU of the others: "
          + ", ".join(f"{k} {v:+.2f}" for k, v in drops.items())
          + f". The encoder-decoder falls off more than RNNsearch in {100 * (1 - p):.1f}% of 1,000 bootstrap "
          f"resamples (p = {p:.3f}).")
        d = drops["RNNencdec (luong_base)"] - drops["RNNsearch"]
        v = "holds" if d < 0 and p < 0.05 else ("does not hold" if d > 0 and p > 0.95 else "inconclusive")
        verdicts.append(("Bahdanau Fig. 2: without attention BLEU falls off with length, RNNsearch's does not",
                         "RNNencdec drops past ~20 words, RNNsearch-50 flat",
                         f"long - short: encdec {drops['RNNencdec (luong_base)']:+.2f}, RNNsearch "
                         f"{drops['RNNsearch']:+.2f} (p {p:.3f})", v))
    w("")


def perspe(study: Study, w, verdicts):
    w("## perSPE in form (KFTT En→Ja, `examples/perspe/run.sh` PRESET=small)")
    w("")
    base = study.path("perspe", "systems")
    if not os.path.isdir(base):
        w("(not trained yet)")
        w("")
        return
    scores = {}
    for name in PERSPE_SYSTEMS:
        per = {}
        for seed in PERSPE_SEEDS:
            s = load_json(os.path.join(base, name, f"seed{seed}", "study_bleu.json"))
            if s is not None and os.path.exists(os.path.join(base, name, f"seed{seed}", "trained")):
                per[seed] = s["BLEU"]
        scores[name] = per
    w("SPE/SPE against SPE/perSPE (k = 1, one offset per Japanese phrase), 2 + 2 layers of 128, "
      "2,000 updates of 2,048 tokens, beam 5, last checkpoint; BLEU: sacreBLEU ja-mecab on "
      "normalised text (examples/perspe/score.py).")
    w("")
    w("| system | BLEU per seed | mean ± sd |")
    w("|---|---|---|")
    for name, per in scores.items():
        w(f"| {name} | {' / '.join(f'{b:.2f}' for b in per.values()) or '-'} | {fmt_ms(list(per.values()))} |")
    a, b = list(scores["spe_spe"].values()), list(scores["spe_perspe"].values())
    if a and b:
        d = statistics.mean(b) - statistics.mean(a)
        se = se_of_difference(a, b)
        p = perspe_paired(study, scores)
        v = verdict(d, se, p)
        w("")
        w(f"SPE/perSPE - SPE/SPE: {d:+.2f} BLEU (seed se of the difference {fmt(se, '.2f')}; paired bootstrap "
          f"of the seeds closest to each mean: p = {fmt(p, '.3f')}).")
        verdicts.append(("perSPE: phrase-level perturbation of the decoder positions gains BLEU",
                         "+0.4 (ASPEC, one run each)", f"{d:+.2f} (3 seeds; p {fmt(p, '.3f')})", v))
    w("")


def perspe_paired(study: Study, scores) -> Optional[float]:
    """Paired bootstrap of the perSPE seed closest to its mean against the SPE one, on the
    normalised text and ja-mecab tokens score.py uses."""
    import subprocess

    picks = {}
    for name, per in scores.items():
        if not per:
            return None
        m = statistics.mean(per.values())
        picks[name] = min(per, key=lambda s: (abs(per[s] - m), s))
    base = study.path("perspe", "systems")
    tmp = study.path("eval", "perspe")
    os.makedirs(tmp, exist_ok=True)
    from fairseq_luong.data.text import normalize_line

    files = {}
    for name, seed in picks.items():
        files[name] = os.path.join(tmp, f"{name}.seed{seed}.norm")
        with open(files[name], "w", encoding="utf-8") as f:
            hyps = read_lines(os.path.join(base, name, f"seed{seed}", "study_test.hyp"))
            f.writelines(normalize_line(x) + "\n" for x in hyps)
    ref = os.path.join(tmp, "ref.norm")
    with open(ref, "w", encoding="utf-8") as f:
        f.writelines(normalize_line(x) + "\n" for x in read_lines(study.path("perspe", "raw", "test.ja")))
    proc = subprocess.run(["sacrebleu", ref, "-i", files["spe_spe"], files["spe_perspe"], "--paired-bs", "-m", "bleu",
                           "--tokenize", "ja-mecab", "-f", "json"], capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"error: sacrebleu --paired-bs failed:\n{proc.stderr[-2000:]}")
    return json.loads(proc.stdout)[1]["BLEU"]["p_value"]


def curves(study: Study, w, fig_dir):
    from fairseq_luong.analysis.plots import plot_panels

    panels = []
    for title, names in (("Multi30k ladder (seed 1)", [r.system for r in TABLE1[:6]]),
                         ("KFTT Ja-En", [s for _, s in FIG2_SYSTEMS] + ["kftt_localm_general_feed"])):
        series = []
        for name in names:
            xs, ys = valid_curve(os.path.join(study.system_dir(name, 1), "train.log"))
            if xs:
                series.append((name, xs, ys))
        if series:
            panels.append(("epoch", f"valid ppl, {title}", series, True))
    if not panels:
        return
    png = plot_panels(panels, os.path.join(fig_dir, "learning_curves.png"))
    w("## Learning curves")
    w("")
    w("Validation perplexity after each epoch (the same epochs for every system): a system that "
      "had not converged would show it here.")
    w("")
    w(f"![learning curves]({rel(png, os.path.dirname(fig_dir))})")
    w("")


def heatmaps(study: Study, w, fig_dir):
    d = study.path("eval", "heatmaps")
    if not os.path.isdir(d):
        return
    pngs = [(label, os.path.join(d, label, f)) for label in sorted(os.listdir(d))
            for f in sorted(os.listdir(os.path.join(d, label))) if f.endswith(".png")]
    if not pngs:
        return
    w("## Attention on a long sentence (KFTT test)")
    w("")
    for label, png in pngs:
        w(f"{label}:")
        w("")
        w(f"![{label}]({rel(png, os.path.dirname(fig_dir))})")
        w("")


def budget(study: Study, w):
    w("## Time")
    w("")
    total = 0.0
    rows = []
    for system, seed in trainings():
        m = training_minutes(os.path.join(study.system_dir(system.name, seed), "train.log"))
        if m is not None:
            total += m
            rows.append((f"{system.name}.s{seed}", m))
    base = study.path("perspe", "systems")
    for name in PERSPE_SYSTEMS:
        for seed in PERSPE_SEEDS:
            m = training_minutes(os.path.join(base, name, f"seed{seed}", "train.log"))
            if m is not None:
                total += m
                rows.append((f"perspe {name} seed {seed}", m))
    w(f"{len(rows)} trainings, {total / 60:.1f} hours of fairseq-train wall clock in all: "
      + ", ".join(f"{n} {m:.1f}" for n, m in rows) + " (minutes).")
    w("")


# ---------------------------------------------------------------------------------
def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], epilog=__doc__.split("\n\n", 1)[1],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("systems")
    p.add_argument("--corpus", choices=["m30k", "kftt"])
    p.set_defaults(fn=cmd_systems)
    p = sub.add_parser("args")
    p.add_argument("name")
    p.add_argument("--epochs", type=int, default=EPOCHS)
    p.add_argument("--size", type=int, default=128)
    p.set_defaults(fn=cmd_args)
    p = sub.add_parser("plan")
    p.add_argument("--results", help="minutes measured by the trainings published there")
    p.add_argument("--jobs", type=int, default=2)
    p.set_defaults(fn=cmd_plan)
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
