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
import datetime
import itertools
import json
import math
import os
import random
import re
import statistics
import sys
from typing import Dict, List, NamedTuple, Optional, Sequence, Tuple

from fairseq_luong.data.text import read_lines
from fairseq_luong.protocols import bahdanau2014, luong2015, oka2022

# ---------------------------------------------------------------------------------
# The protocol (Luong et al. 2015, section 4.1: fairseq_luong/protocols/luong2015.py) at
# small scale, trained to convergence. What differs from the paper's, and why:
#
# The schedule. The paper trains 10 epochs (12 with dropout) and halves the rate every epoch
# after the 5th (8th): 10 epochs of WMT'14's 4.5M pairs. 10 epochs of Multi30k's 29K are 2,270
# updates, and the study of commit 5d3782f stopped there with validation perplexity still
# falling (local-p seed 1: 15.26 -> 14.93 in its last epoch). So, for every system of every
# row alike, the rate (SGD's 1.0; RNNsearch: Adadelta's 1.0) is halved after each epoch whose
# validation loss is not below the best so far by HALVE_BELOW of it (fairseq's
# reduce_lr_on_plateau, patience 0), and training stops once the rate has been halved at least
# HALVINGS times AND the curve is flat: validation perplexity fell by less than FLAT_PERCENT over
# the last two epochs (fairseq_luong's reduce_lr_on_plateau_until_flat, on the validation nll in
# bits a token; the halving decisions are those of the loss it replaced, a fixed multiple of it);
# or after MAX_EPOCHS epochs. The model evaluated is the one of the best validation loss
# (checkpoint_best.pt). The paper halves 5 times (to 1/32); here at least 7 (to 1/128): a Multi30k
# local-p pilot at 2 x 128 still gained 1.6 % of perplexity an epoch at 1/8. Commit 2711d78
# stopped at exactly 7 halvings, and Multi30k's global (location) model ended there still
# falling 1.28 % over its last two epochs: the flat curve is now the stopping rule, not only
# what the report checks.
HALVE_BELOW = 0.01  # of the validation loss (bits): 1.6 % of perplexity at a perplexity of 5
HALVINGS = 7
FLAT_PERCENT = 1.0  # a learning curve ends flat: validation perplexity fell by less than this over its last two epochs
MAX_EPOCHS = 40     # a cap for the budget: the report names a training that reaches it


def converge(max_epochs: int = MAX_EPOCHS) -> List[str]:
    """The study's schedule on top of the optimiser's starting rate (see above); the rate is 0 once
    converged, which --stop-min-lr 0 ends."""
    return ["--lr-scheduler", "reduce_lr_on_plateau_until_flat", "--lr-shrink", "0.5", "--lr-patience", "0",
            "--lr-threshold", str(HALVE_BELOW), "--min-shrinks", str(HALVINGS),
            "--flat-below", f"{math.log2(100 / (100 - FLAT_PERCENT)):.6f}", "--flat-epochs", "2",
            "--best-checkpoint-metric", "nll_loss", "--stop-min-lr", "0",
            "--max-epoch", str(max_epochs), "--no-epoch-checkpoints", "--log-interval", "50"]


# Precision: float32, as the paper. --bf16 was measured (the README's plan): on this CPU it trains
# Multi30k at 2 x 128 only 1.12 times as fast, and its validation perplexity after epochs 1-4 of
# local-p was 8 % above float32's at every epoch (128.8, 60.7, 48.9, 33.7 against 118.0, 56.2,
# 42.1, 31.2), so the study does not use it
PRECISION: List[str] = []
SEEDS = (1, 2, 3)  # the ladder rows
# The units of every layer, embedding and attention of each corpus (the paper: 4 x 1000), chosen
# by measurement (run.sh time and the pilots: the README's plan): Multi30k's local-p reaches its
# target (22 BLEU) at 2 x 128; KFTT, harder and with longer sentences, takes 2 x 256; together
# the study fits in about 12 hours of two cores
SIZES = {"m30k": 128, "kftt": 256}
LAYERS = ["--encoder-layers", "2", "--decoder-layers", "2"]
# the paper's initialisation, output layer and optimiser, with the study's schedule
PAPER_TRAIN = luong2015.INIT + luong2015.optimizer()
# RNNsearch (Bahdanau et al. 2014): its own initialisation (appendix B.1) and optimiser
# (appendix B.2: fairseq_luong/protocols/bahdanau2014.py), the same schedule
RNNSEARCH_TRAIN = bahdanau2014.optimizer()
# The optimiser of every KFTT row (Table 6 and Figure 2, RNNsearch's too). The paper's SGD at 1.0
# learns KFTT too slowly for 2 cores: a 2 x 256 local-p pilot with the study's schedule (the
# README's plan) was at validation perplexity 119 after 8 epochs (BLEU 0.15), still falling
# 11 % an epoch, where Adam (0.001) was at 155 after 3; Multi30k's rows converge with SGD in
# about 25 epochs and keep it. The rest of each protocol (batches, gradient norm, schedule) stays.
KFTT_OPTIMIZER = ["--optimizer", "adam", "--adam-betas", "(0.9, 0.999)", "--lr", "0.001"]


def with_optimizer(args: Sequence[str], optimizer: Sequence[str]) -> List[str]:
    """ARGS with their optimiser (--optimizer, its own --adadelta-* / --adam-* options and --lr)
    replaced by OPTIMIZER."""
    owned = ("--optimizer", "--lr", "--adadelta-", "--adam-")
    out, i = [], 0
    while i < len(args):
        if args[i].startswith(owned):
            i += 2
            continue
        out.append(args[i])
        i += 1
    return list(optimizer) + out
# the options that take the size (units) and the epoch cap; System.options sets them
SIZED = ("--encoder-embed-dim", "--decoder-embed-dim", "--encoder-hidden-size", "--decoder-hidden-size",
         "--attention-dim", "--maxout-dim")


class System(NamedTuple):
    name: str
    corpus: str  # m30k (en->de words) or kftt (ja->en SentencePiece)
    seeds: Tuple[int, ...]
    args: Tuple[str, ...]
    attention: bool

    def options(self, max_epochs: int = MAX_EPOCHS, size: Optional[int] = None) -> List[str]:
        """fairseq-train options; a ``size`` (units of every layer, embedding and attention;
        default: its corpus's) and ``max_epochs`` make the same system smaller and shorter, for tests."""
        out = list(self.args) + PRECISION + converge(max_epochs)
        for i, word in enumerate(out[:-1]):
            if word in SIZED and size:
                out[i + 1] = str(size)
        return out


def luong(name, corpus, seeds, model, *extra):
    """System NAME: the protocol's MODEL (its arch, options, reversal and dropout) at the
    study's size and schedule, then EXTRA."""
    m = luong2015.MODELS[model]
    train = with_optimizer(PAPER_TRAIN, KFTT_OPTIMIZER) if corpus == "kftt" else PAPER_TRAIN
    args = (["--arch", m.arch] + LAYERS + [w for o in SIZED[:4] for w in (o, str(SIZES[corpus]))] + train
            + list(m.flags) + (luong2015.REVERSE if m.reverse else [])
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
    System("kftt_rnnsearch", "kftt", (1,), ("--arch", "rnnsearch", *(w for o in SIZED for w in (o, str(SIZES["kftt"]))),
                                            *with_optimizer(RNNSEARCH_TRAIN, KFTT_OPTIMIZER)), True),
]
BY_NAME = {s.name: s for s in SYSTEMS}
# The ensemble row. The paper's mixes 8 attention models (luong2015.ENSEMBLE: their scores and
# attentions); here the ladder's three attention models of seed 3, the seed trained last. `finish`
# needs every member's checkpoint in the work folder, and checkpoints stay out of git: a replaced
# machine loses them. Three are remade in about 45 minutes each, two at a time (`run.sh one`); the
# 8 models of seed 1 it used to mix took 6.4 hours of training at one thread, more than a working
# period, so they could never all be at hand at once after a replacement.
ENSEMBLE = [("m30k_global_location", 3), ("m30k_global_location_feed", 3), ("m30k_localp_general_feed", 3)]
AER_SYSTEMS = ["kftt_global_location_feed", "kftt_localm_general_feed", "kftt_localp_general_feed"]
FIG2_SYSTEMS = [("RNNsearch", "kftt_rnnsearch"), ("RNNencdec (luong_base)", "kftt_base_dropout"),
                ("global (location)", "kftt_global_location_feed"), ("local-p (general)", "kftt_localp_general_feed")]
# perSPE's SPE/SPE and SPE/perSPE (k = 1, per phrase), as fairseq_luong/protocols/oka2022.py writes them
PERSPE_SYSTEMS = {name: list(oka2022.BY_NAME[name].options) for name in ("spe_spe", "spe_perspe")}
PERSPE_SEEDS = (1, 2, 3)
# perSPE trains with its recipe's preset (examples/perspe: PRESET=small, Adam with an inverse
# square-root rate, 2,000 updates, for small_parallel_enja on a CPU). Its 2,000 updates end with
# validation perplexity still falling; here it trains until the validation loss has not
# improved for PERSPE_PATIENCE epochs (fairseq's --patience), or PERSPE_MAX_UPDATE updates
PERSPE_PATIENCE = 2
PERSPE_MAX_UPDATE = 8000


def perspe_options(name: str) -> List[str]:
    """fairseq-train options of perSPE system NAME (after its recipe's preset)."""
    return PERSPE_SYSTEMS[name] + ["--patience", str(PERSPE_PATIENCE)]


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
    """Every (system, seed) to train: seed 1 of every system first, the two corpora's systems
    alternating (so that a study cut short has one of each, of both corpora), then the other seeds."""
    chosen = [s for s in SYSTEMS if corpus in (None, s.corpus)]
    m30k, kftt = ([s for s in chosen if s.corpus == c and 1 in s.seeds] for c in ("m30k", "kftt"))
    order = [(s, 1) for pair in itertools.zip_longest(m30k, kftt) for s in pair if s is not None]
    order += [(s, seed) for seed in (2, 3) for s in chosen if seed in s.seeds]
    return order


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


def cmd_lock_path(args):
    import runner

    print(runner.lock_path(args.work, runner.Label(args.name, args.seed)))


def cmd_run(args):
    import runner

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


def unk_verdict(gains: Dict[str, float], significant: List[str], models: int) -> str:
    """Table 4's "unk replacement helps every attention model": holds once all `models` are
    measured and each gains significantly (paired bootstrap, p < 0.05); does not hold where no
    measured model gains; inconclusive otherwise (one model's gain says nothing of the others)."""
    if len(significant) == len(gains) == models:
        return "holds"
    return "does not hold" if gains and all(g <= 0 for g in gains.values()) else "inconclusive"


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


def aligned(study: "Study", path: str):
    """aer_sentences of the alignment file PATH against the study's KFTT gold; None when the
    file, or the gold, is not there."""
    gold = study.gold
    if not (gold and os.path.exists(path)):
        return None
    return aer_sentences(os.path.join(gold, "jaen.gold"), path, os.path.join(gold, "jaen.ja"),
                         os.path.join(gold, "jaen.en"))


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
    """sacreBLEU 13a of tokenised text on purpose (Figure 2 scores against KFTT's tokenised
    reference): ``force`` silences the warning that the text looks tokenised, three lines per
    call, 4,000 for one bootstrap of the report."""
    import sacrebleu

    return sacrebleu.corpus_bleu(list(hyps), [list(refs)], force=True, **kw).score


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
            out.append(with_minutes(r, study.path(label.rel, "train.log")))
    return out


def with_minutes(result: dict, train_log: str) -> dict:
    """RESULT with its training's minutes read again from its published train.log: the
    result.json of a resumed training published before the log reader carried fairseq's wall
    clock over resumes holds the minutes of its last run only (m30k_reverse seed 1: 7.8 of 27.8)."""
    minutes = training_minutes(train_log)
    return {**result, "train_minutes": result.get("train_minutes") if minutes is None else round(minutes, 2)}


def git_commits(study: "Study") -> List[str]:
    """The commits that trained what RESULTS holds (each result.json names its own)."""
    return sorted({r["commit"] for r in published(study)})


# how a published training is remade (after `git checkout COMMIT`): one thread, as the study
# trained it; the thread count changes the numbers, and commits before run.sh set one thread
# for every step (2711d78 among them) use all cores unless told
REMAKE = "OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 bash examples/luong2015_in_form/run.sh one"


def trainings_table(study: "Study", w):
    """Every training with its commit, its time, its scores and the command that remakes it."""
    rows = published(study)
    w("## The trainings and how to remake each")
    w("")
    w("Each row was trained, evaluated and published (`run.sh one SYSTEM SEED`) by the commit it "
      "names, two trainings at a time, one thread each, on the project's machine (2 CPU cores, no GPU; "
      "the study's README names the CPU of each working period). To remake one: `git checkout COMMIT`, "
      "then the command (one thread, as the study trained it: the thread count changes the numbers); it "
      "trains into `--work-dir` and, where the result is published already, says whether its scores are "
      "the same.")
    w("")
    w("| training | commit | minutes | scores | command |")
    w("|---|---|---|---|---|")
    for r in rows:
        scores = ", ".join(f"{k} {v:.2f}" for k, v in r["scores"].items() if v is not None)
        commit = r["commit"][:10] + (" with uncommitted changes" if "+" in r["commit"] else "")
        w(f"| {r['system']} seed {r['seed']} | {commit} | {fmt(r.get('train_minutes'), '.1f')} | "
          f"{scores} | `{REMAKE} {r['system']} {r['seed']}` |")
    missing_json = study.path("eval", "missing.json")
    missing = (load_json(missing_json) or {}).get("missing", {})
    finished = committed_at(missing_json)
    published_at = {f"{r['system']}.s{r['seed']}": r.get("published") for r in rows}
    for row, members in missing.items():
        waiting = [m for m in members if m not in published_at]
        since = [m for m in members if m in published_at and finished is not None
                 and published_at[m] is not None and utc(published_at[m]) > finished]
        lost = [m for m in members if m in published_at and m not in since]
        w("")
        if waiting:
            w(f"**{row}** waits for {', '.join(waiting)}: not trained yet.")
        if since:
            w(f"**{row}**: {', '.join(since)} trained after `run.sh finish` last ran; it makes this row when it "
              "runs again (the study runs it at its end).")
        if lost:
            w(f"**{row}** lacks the checkpoints of {', '.join(lost)}: published, but not in the work folder "
              "where `finish` ran (a checkpoint stays in the work folder, out of git); remake them with "
              + "; ".join(f"`{REMAKE} {m.rsplit('.s', 1)[0]} {m.rsplit('.s', 1)[1]}`" for m in lost)
              + ", then `run.sh finish`.")
    w("")


def utc(stamp: str) -> datetime.datetime:
    """A result.json's "published" time ("2026-11-28 09:56:57 UTC")."""
    return datetime.datetime.strptime(stamp, "%Y-%m-%d %H:%M:%S UTC").replace(tzinfo=datetime.timezone.utc)


def committed_at(path: str) -> Optional[datetime.datetime]:
    """When the last commit that changed PATH was made (UTC); None outside git or never committed:
    when `run.sh finish` wrote results/eval/missing.json, in the recipe's own results."""
    import subprocess

    proc = subprocess.run(["git", "-C", os.path.dirname(os.path.abspath(path)), "log", "-1", "--format=%ct", "--",
                           os.path.abspath(path)], capture_output=True, text=True)
    if proc.returncode != 0 or not proc.stdout.strip():
        return None
    return datetime.datetime.fromtimestamp(int(proc.stdout.strip()), datetime.timezone.utc)


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


class Convergence(NamedTuple):
    """How one training ended, read from its train.log."""

    epochs: int                # epochs trained (validated)
    final_lr: Optional[float]  # the rate of its last epoch
    stopped: str               # why it stopped: the rate, the epoch cap, fixed updates (perSPE), or unfinished
    last_two: Optional[float]  # % validation perplexity fell over the last two epochs (negative: rose)
    best_ppl: Optional[float]  # the lowest validation perplexity (the model evaluated)

    @property
    def flat(self) -> bool:
        return self.last_two is not None and self.last_two < FLAT_PERCENT


def convergence(log_path: str, fixed_updates: bool = False) -> Optional[Convergence]:
    """Epochs, final rate, why it stopped and the fall of the last two epochs of a fairseq-train
    log; ``fixed_updates``: a training that runs a number of updates (perSPE's preset), not
    the study's schedule."""
    from fairseq_luong.analysis.training_log import read_training_log

    if not os.path.exists(log_path):
        return None
    log = read_training_log(log_path)
    epochs, ppls = valid_curve(log_path)
    lrs = {r.epoch: r.stats.get("lr") for r in log.train}
    with open(log_path, encoding="utf-8", errors="replace") as f:
        text = f.read()
    flat_stop = re.search(r"converged after epoch \d+: the rate was reduced (\d+) times", text)
    if flat_stop:  # reduce_lr_on_plateau_until_flat
        stopped = f"rate halved {flat_stop.group(1)} times, flat"
    elif "stopping training because current learning rate" in text:  # commit 2711d78's floor
        stopped = f"rate halved {HALVINGS} times"
    elif "early stop since valid performance" in text:
        stopped = f"no better validation in {PERSPE_PATIENCE} epochs"
    elif "done training" in text:
        stopped = "its updates" if fixed_updates else "the epoch cap"
    else:
        stopped = "unfinished"
    last_two = 100 * (ppls[-3] - ppls[-1]) / ppls[-3] if len(ppls) >= 3 else None
    return Convergence(len(epochs), lrs.get(epochs[-1]) if epochs else None, stopped, last_two,
                       min(ppls) if ppls else None)


def valid_curve(log_path: str) -> Tuple[List[float], List[float]]:
    """(epochs, valid ppl) of a fairseq-train log."""
    from fairseq_luong.analysis.training_log import read_training_log

    if not os.path.exists(log_path):
        return [], []
    log = read_training_log(log_path)
    # an epoch validated twice (a training resumed from a checkpoint saved before it): the last
    by_epoch = {r.epoch: r.stats["ppl"] for r in log.valid.get("valid", []) if "ppl" in r.stats}
    return sorted(by_epoch), [by_epoch[e] for e in sorted(by_epoch)]


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
    kftt_sizes(study, w, fig_dir)
    perspe(study, w, verdicts)
    converged(study, w)
    targets(study, w)
    curves(study, w, fig_dir)
    changes(study, w)
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
      "mean against the row above's. The ensemble mixes "
      + ", ".join(f"{n}.s{s}" for n, s in ENSEMBLE) + " (study.py ENSEMBLE says why these); "
      "one ensemble has no seed spread, so its verdict cannot be more than inconclusive.")
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
        what = row.what if row.system else (f"ensemble of {len(ENSEMBLE)} models + unk replace "
                                    f"(the paper's: {len(luong2015.ENSEMBLE)})")
        w(f"| {what} | {n_seeds} | {fmt_ms(bleus)} | {fmt(d_b, '+.2f')} | {fmt(p, '.3f')} | "
          f"{fmt(row.paper_bleu, '.1f')} ({fmt(paper_d, '+.1f')}) | {fmt_ms(ppls)} | {fmt(d_p, '+.2f')} | "
          f"{fmt(row.paper_ppl, '.1f')} ({fmt(paper_dp, '+.1f')}) | {v_b} | {v_p} |")
        if prev is not None:
            verdicts.append((f"Table 1: {what}", f"{fmt(paper_d, '+.1f')} BLEU"
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
        v = unk_verdict(gains, ok, len(means))
        verdicts.append(("Table 4: unk replacement helps every attention model", "+1.2 to +1.9 BLEU",
                         f"{fmt(min(gains.values()), '+.2f')} to {fmt(max(gains.values()), '+.2f')}; "
                         f"p < 0.05 for {len(ok)} of {len(gains)} ({len(gains)} of {len(means)} models measured)", v))
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
            r = aligned(study, os.path.join(aer_dir, f"{name}.{conv}.align" if name != "diagonal"
                                            else "diagonal.align"))
            if r is not None:
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
    diag = rows.get(("diagonal", "paper"))
    untested = untestable(study, AER_SYSTEMS, rows)
    if untested:
        w(f"**Not testable at this scale**: {untested}. An aligner no better than the diagonal, or a model "
          f"below {KFTT_MIN_BLEU:.0f} BLEU, does not test which attention aligns better.")
        w("")
    for local in ("kftt_localm_general_feed", "kftt_localp_general_feed"):
        loc = rows.get((local, "paper"))
        if glob is None or loc is None:
            continue
        d = aer_of(loc) - aer_of(glob)
        p = paired_bootstrap_aer(glob, loc)
        worse = d > 0 and paired_bootstrap_aer(loc, glob) < 0.05
        v = "holds" if d < 0 and p < 0.05 else ("does not hold" if worse else "inconclusive")
        v = "not testable at this scale" if untested else v
        w(f"{local} minus global (location): {d:+.3f} AER (paired bootstrap over the gold sentences, "
          f"p = {p:.3f}).")
        verdicts.append((f"Table 6: {local.split('_')[1]} attention aligns better than global (location)",
                         f"{TABLE6_PAPER[local]:.2f} vs 0.39",
                         f"{aer_of(loc):.3f} vs {aer_of(glob):.3f} (p {p:.3f})", v))
    if diag is not None and glob is not None:
        w(f"The diagonal baseline: {aer_of(diag):.3f}.")
    w("")


KFTT_MIN_BLEU = 5.0  # a KFTT model below it does not translate: Table 6 and Figure 2 test nothing


def untestable(study: Study, names: Sequence[str], aer_rows: Optional[dict] = None) -> Optional[str]:
    """Why the KFTT models NAMES (seed 1) cannot test a claim: under KFTT_MIN_BLEU, or (with
    ``aer_rows``) forced alignments no better than the diagonal's; None when they can."""
    reasons = []
    diag = (aer_rows or {}).get(("diagonal", "paper"))
    for name in names:
        b = study.bleu(name, 1)
        if b is not None and b < KFTT_MIN_BLEU:
            at = [f"{o.bleu(name, 1):.2f} at 2 x {h}" for h, o in other_sizes(study) if o.bleu(name, 1) is not None]
            reasons.append(f"{name} reaches {b:.2f} BLEU" + (f" at 2 x {trained_size(study, name, 1)} ("
                                                             f"{', '.join(at)})" if at else ""))
        row = (aer_rows or {}).get((name, "paper"))
        if row is not None and diag is not None and aer_of(row) >= aer_of(diag):
            reasons.append(f"{name} aligns at {aer_of(row):.3f} AER, not below the diagonal's {aer_of(diag):.3f}")
    return "; ".join(reasons) or None


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
        untested = untestable(study, [name for _, name in FIG2_SYSTEMS[:2]])
        if untested:
            w(f"**Not testable at this scale**: {untested}; a model that does not translate has no fall-off "
              "with length to compare.")
            v = "not testable at this scale"
        verdicts.append(("Bahdanau Fig. 2: without attention BLEU falls off with length, RNNsearch's does not",
                         "RNNencdec drops past ~20 words, RNNsearch-50 flat",
                         f"long - short: encdec {drops['RNNencdec (luong_base)']:+.2f}, RNNsearch "
                         f"{drops['RNNsearch']:+.2f} (p {p:.3f})", v))
    w("")


# KFTT rows trained again at another size (`run.sh --size H --results DIR one NAME SEED` from
# the study's commit), published into results/sizes/H: what shows a KFTT model out of reach of
# KFTT_MIN_BLEU at more than one size
OTHER_SIZES = "sizes"


def other_sizes(study: Study) -> List[Tuple[int, Study]]:
    """(H, its results) of each size in results/sizes/H, smallest first."""
    d = study.path(OTHER_SIZES)
    if not os.path.isdir(d):
        return []
    return [(int(h), Study(os.path.join(d, h), study.gold)) for h in sorted(os.listdir(d), key=lambda h: (len(h), h))
            if h.isdigit()]


def trained_size(study: Study, name: str, seed: int) -> int:
    """The units of every layer of a published training (its --size; 0: the study's SIZES)."""
    size = int(((load_json(os.path.join(study.system_dir(name, seed), "result.json")) or {}).get("study") or {})
               .get("size", 0))
    return size or SIZES[name.split("_", 1)[0]]


def train_curve(log_path: str) -> Tuple[List[float], List[float]]:
    """(epochs, training ppl) of a fairseq-train log: the loss of each epoch's updates, dropout on."""
    from fairseq_luong.analysis.training_log import read_training_log

    if not os.path.exists(log_path):
        return [], []
    by_epoch = {r.epoch: r.stats["ppl"] for r in read_training_log(log_path).train if "ppl" in r.stats}
    return sorted(by_epoch), [by_epoch[e] for e in sorted(by_epoch)]


def kftt_sizes(study: Study, w, fig_dir):
    """The KFTT rows trained at more than one size: scores, AER and the gap between training
    and validation perplexity, with their curves."""
    from fairseq_luong.analysis.plots import plot_panels

    others = other_sizes(study)
    names = sorted({(n.rsplit(".s", 1)[0], int(n.rsplit(".s", 1)[1])) for _, s in others
                    if os.path.isdir(s.path("systems")) for n in os.listdir(s.path("systems"))})
    if not names:
        return
    w("## KFTT at more than one size")
    w("")
    w("The same training at other sizes: only the units of every layer differ (`run.sh --size H one "
      "SYSTEM SEED`, the study's commit and schedule; published into `results/sizes/H`). Last two epochs: "
      "the fall of validation perplexity, as in the convergence table. Training ppl: the last epoch's "
      "training loss (dropout on); the gap is the best validation perplexity over it.")
    w("")
    w("| training | size | commit | epochs | last two epochs | training ppl | best valid ppl | gap | test ppl | "
      "test BLEU | AER (footnote 14) | minutes |")
    w("|---|---|---|---|---|---|---|---|---|---|---|---|")
    series = []
    for name, seed in names:
        for h, s in sorted([(trained_size(study, name, seed), study)] + others, key=lambda x: x[0]):
            log = os.path.join(s.system_dir(name, seed), "train.log")
            c = convergence(log)
            if c is None:
                continue
            result = load_json(os.path.join(s.system_dir(name, seed), "result.json")) or {}
            te, tp = train_curve(log)
            ve, vp = valid_curve(log)
            rows = aligned(study, s.path("eval", "aer", f"{name}.paper.align")) if seed == 1 else None
            aer = None if rows is None else aer_of(rows)
            gap = c.best_ppl / tp[-1] if tp and c.best_ppl else None
            w(f"| {name} seed {seed} | 2 x {h} | {result.get('commit', '?')[:10]} | {c.epochs} | "
              f"{fmt(c.last_two, '+.2f')} % | {fmt(tp[-1] if tp else None)} | {fmt(c.best_ppl)} | "
              f"{fmt(gap, '.1f')}x | {fmt(s.ppl(name, seed))} | "
              f"{fmt(s.bleu(name, seed))} | {fmt(aer, '.3f')} | {fmt(training_minutes(log), '.1f')} |")
            label = f"2 x {h}" if len(names) == 1 else f"{name}.s{seed} 2 x {h}"
            colour = f"C{len(series) // 2}"  # a size's two curves in one colour, training dashed
            series += [(f"{label} valid", ve, vp, {"color": colour}),
                       (f"{label} training", te, tp, {"color": colour, "linestyle": "--"})]
    w("")
    png = plot_panels([("epoch", "ppl, KFTT Ja-En", series, True)], os.path.join(fig_dir, "kftt_sizes.png"))
    w(f"![KFTT at more than one size]({rel(png, os.path.dirname(fig_dir))})")
    w("")


def perspe_seeds(study: Study, name: str) -> List[int]:
    """The perSPE seeds of NAME trained and scored."""
    d = os.path.join(study.path("perspe", "systems"), name)
    return [seed for seed in PERSPE_SEEDS if os.path.exists(os.path.join(d, f"seed{seed}", "trained"))
            and os.path.exists(os.path.join(d, f"seed{seed}", "study_bleu.json"))]


def perspe(study: Study, w, verdicts):
    w("## perSPE in form (small_parallel_enja En→Ja, `examples/perspe/run.sh` PRESET=small)")
    w("")
    base = study.path("perspe", "systems")
    if not os.path.isdir(base):
        w("(not trained yet)")
        w("")
        return
    scores = {name: {seed: load_json(os.path.join(base, name, f"seed{seed}", "study_bleu.json"))["BLEU"]
                     for seed in perspe_seeds(study, name)} for name in PERSPE_SYSTEMS}
    w("SPE/SPE against SPE/perSPE (k = 1, one offset per Japanese phrase) with the perSPE recipe's "
      "preset: 2 + 2 layers of 128, batches of 2,048 tokens, Adam; trained until the validation loss "
      f"has not improved for {PERSPE_PATIENCE} epochs (at most {PERSPE_MAX_UPDATE:,} updates); beam 5, last "
      "checkpoint; BLEU: sacreBLEU ja-mecab on normalised text (examples/perspe/score.py), as the "
      "recipe scores.")
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
                         "+0.4 (ASPEC, one run each)", f"{d:+.2f} ({seeds_of(a, b)}; p {fmt(p, '.3f')})", v))
    w("")


def seeds_of(a: Sequence[float], b: Sequence[float]) -> str:
    """How many seeds a comparison of A with B stands on."""
    return f"{len(a)} seed{'s' * (len(a) > 1)} each" if len(a) == len(b) else f"{len(a)} and {len(b)} seeds"


def perspe_paired(study: Study, scores) -> Optional[float]:
    """Paired bootstrap of the perSPE seed closest to its mean against the SPE one, on the
    normalised text and ja-mecab tokens score.py uses (written to a scratch folder, not RESULTS)."""
    import subprocess
    import tempfile

    picks = {}
    for name, per in scores.items():
        if not per:
            return None
        m = statistics.mean(per.values())
        picks[name] = min(per, key=lambda s: (abs(per[s] - m), s))
    base = study.path("perspe", "systems")
    from fairseq_luong.data.text import normalize_line

    with tempfile.TemporaryDirectory() as tmp:
        files = {}
        for name, seed in picks.items():
            files[name] = os.path.join(tmp, f"{name}.seed{seed}.norm")
            with open(files[name], "w", encoding="utf-8") as f:
                hyps = read_lines(os.path.join(base, name, f"seed{seed}", "study_test.hyp"))
                f.writelines(normalize_line(x) + "\n" for x in hyps)
        ref = os.path.join(tmp, "ref.norm")
        with open(ref, "w", encoding="utf-8") as f:
            f.writelines(normalize_line(x) + "\n" for x in read_lines(study.path("perspe", "raw", "test.ja")))
        proc = subprocess.run(["sacrebleu", ref, "-i", files["spe_spe"], files["spe_perspe"], "--paired-bs", "-m",
                               "bleu", "--tokenize", "ja-mecab", "-f", "json"], capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"error: sacrebleu --paired-bs failed:\n{proc.stderr[-2000:]}")
    return json.loads(proc.stdout)[1]["BLEU"]["p_value"]


def perspe_dir(study: "Study", name: str, seed: int) -> str:
    return study.path("perspe", "systems", name, f"seed{seed}")


def every_log(study: "Study") -> List[Tuple[str, str, str, bool]]:
    """(label, system, train.log, fixed updates) of every training of the study, in run order."""
    out = [(f"{s.name}.s{seed}", s.name, os.path.join(study.system_dir(s.name, seed), "train.log"), False)
           for s, seed in trainings()]
    out += [(f"perspe_{n}.s{seed}", f"perspe_{n}", os.path.join(perspe_dir(study, n, seed), "train.log"), True)
            for seed in PERSPE_SEEDS for n in PERSPE_SYSTEMS]
    return out


# The first study (34 trainings of commit 5d3782f, 10 epochs of the paper's fixed schedule at
# 2 x 128, the last checkpoint): its results are kept in git history, in this commit of main
PREVIOUS_RESULTS = "c9a4a2d"


def previous_results() -> Dict[Tuple[str, int], dict]:
    """{(system, seed): result.json} of the first study, read from git (empty without git)."""
    import subprocess

    here = os.path.relpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "results"),
                           _git_top()) if _git_top() else None
    if here is None:
        return {}
    listing = subprocess.run(["git", "-C", _git_top(), "ls-tree", "-r", "--name-only", PREVIOUS_RESULTS, "--", here],
                             capture_output=True, text=True)
    out = {}
    for path in listing.stdout.split():
        if path.endswith("/result.json"):
            shown = subprocess.run(["git", "-C", _git_top(), "show", f"{PREVIOUS_RESULTS}:{path}"],
                                   capture_output=True, text=True)
            if shown.returncode == 0:
                r = json.loads(shown.stdout)
                out[(r["system"], int(r["seed"]))] = r
    return out


def _git_top() -> Optional[str]:
    import subprocess

    proc = subprocess.run(["git", "-C", os.path.dirname(os.path.abspath(__file__)), "rev-parse", "--show-toplevel"],
                          capture_output=True, text=True)
    return proc.stdout.strip() if proc.returncode == 0 else None


def changes(study: Study, w):
    """Each system against the first study (PREVIOUS_RESULTS), means over the seeds both have."""
    before = previous_results()
    now = {(r["system"], int(r["seed"])): r for r in published(study)}
    if not before or not now:
        return
    w(f"## What changed against the first study (commit 5d3782f; results in `git show {PREVIOUS_RESULTS}`)")
    w("")
    w("The first study trained every system 10 epochs with the paper's fixed halving (after epoch 5), at "
      "2 x 128, and evaluated the last checkpoint; its perSPE pair trained on KFTT En→Ja. This one trains "
      f"every system until the rate has been halved at least {HALVINGS} times on plateaus and the curve is "
      "flat (the convergence table), "
      f"Multi30k at 2 x {SIZES['m30k']} and KFTT at 2 x {SIZES['kftt']} with Adam"
      f"{' in bfloat16' if PRECISION else ''}, and evaluates the checkpoint of the best validation "
      "loss; perSPE trains on small_parallel_enja, the data its recipe's preset is made for. Means over "
      "the seeds of each; Δ = now - before.")
    w("")
    w("| system | seeds before / now | epochs before / now | BLEU before | BLEU now | Δ BLEU | test ppl before "
      "| test ppl now | +unk before | +unk now |")
    w("|---|---|---|---|---|---|---|---|---|---|")
    names = list(dict.fromkeys([n for n, _ in now] + [n for n, _ in before]))
    for name in names:
        b = [r for (n, _), r in sorted(before.items()) if n == name]
        a = [r for (n, _), r in sorted(now.items()) if n == name]

        def m(rows, key):
            return mean_sd([r["scores"].get(key) for r in rows])[0]

        epochs = [c.epochs for c in (convergence(os.path.join(study.path(runner_rel(name, int(r["seed"]))),
                                                              "train.log"), name.startswith("perspe_"))
                                     for r in a) if c is not None]
        d = None if m(b, "bleu") is None or m(a, "bleu") is None else m(a, "bleu") - m(b, "bleu")
        w(f"| {name} | {len(b)} / {len(a)} | {'10' if b and not name.startswith('perspe_') else '-'} / "
          f"{fmt(mean_sd(epochs)[0], '.1f')} | {fmt(m(b, 'bleu'))} | {fmt(m(a, 'bleu'))} | {fmt(d, '+.2f')} | "
          f"{fmt(m(b, 'ppl'))} | {fmt(m(a, 'ppl'))} | {fmt(m(b, 'bleu_unk'))} | {fmt(m(a, 'bleu_unk'))} |")
    w("")


def runner_rel(name: str, seed: int) -> str:
    """The folder of a training in WORK and RESULTS (as runner.Label.rel)."""
    if name.startswith("perspe_"):
        return os.path.join("perspe", "systems", name[len("perspe_"):], f"seed{seed}")
    return os.path.join("systems", f"{name}.s{seed}")


def converged(study: Study, w):
    """Each training's epochs, final rate, why it stopped and whether its curve ends flat."""
    rows = [(label, convergence(log, fixed)) for label, _, log, fixed in every_log(study)]
    rows = [(label, c) for label, c in rows if c is not None]
    if not rows:
        return
    flat = sum(c.flat for _, c in rows)
    w("## Convergence")
    w("")
    w(f"Every Luong and RNNsearch training halves its rate after each epoch that lowers the validation "
      f"loss by less than {100 * HALVE_BELOW:.1f} % of the best. It stops once the rate has been halved at "
      f"least {HALVINGS} times and its curve is flat, or after {MAX_EPOCHS} epochs. Trainings by commit "
      f"2711d78 stopped at exactly {HALVINGS} halvings, flat or not. perSPE trains its preset until its "
      f"validation loss has not improved for {PERSPE_PATIENCE} epochs (at most {PERSPE_MAX_UPDATE:,} updates). "
      f"A curve ends flat when validation perplexity fell by less than {FLAT_PERCENT:.0f} % over its last two "
      f"epochs (negative: it rose). {flat} of {len(rows)} trainings end flat.")
    w("")
    w("| training | epochs | final rate | stopped by | best valid ppl | last two epochs | flat |")
    w("|---|---|---|---|---|---|---|")
    for label, c in rows:
        w(f"| {label} | {c.epochs} | {fmt(c.final_lr, 'g')} | {c.stopped} | {fmt(c.best_ppl)} | "
          f"{fmt(c.last_two, '+.2f')} % | {'yes' if c.flat else '**no**'} |")
    w("")


# What the study must reach (its README, "the claims and how each is tested"): Multi30k's local-p
# row, mean of its seeds before unk replacement; each KFTT attention model translates
# (KFTT_MIN_BLEU) and aligns better than the diagonal
M30K_TARGET = ("m30k_localp_general_feed", 22.0)


def targets(study: Study, w):
    """Each target of the study against what the published trainings measured."""
    rows = []
    name, bleu = M30K_TARGET
    seeds = BY_NAME[name].seeds
    got = [b for b in (study.bleu(name, seed) for seed in seeds) if b is not None]
    rows.append((f"Multi30k: {name}, mean of its {len(seeds)} seeds, at least {bleu:.0f} BLEU before unk "
                 "replacement",
                 f"{statistics.mean(got):.2f} ({len(got)} of {len(seeds)} seeds)" if got else "not trained",
                 ("yes" if statistics.mean(got) >= bleu else "no") if len(got) == len(seeds) else "-"))

    def aer(path):
        sentences = aligned(study, path)
        return None if sentences is None else aer_of(sentences)

    diag = aer(study.path("eval", "aer", "diagonal.align"))
    for name in AER_SYSTEMS:
        b = study.bleu(name, 1)
        rows.append((f"KFTT: {name} at least {KFTT_MIN_BLEU:.0f} BLEU", fmt(b, ".2f", "not trained"),
                     "-" if b is None else ("yes" if b >= KFTT_MIN_BLEU else "no")))
        a = aer(study.path("eval", "aer", f"{name}.paper.align"))
        rows.append((f"KFTT: {name} aligns below the diagonal's AER",
                     f"{fmt(a, '.3f', 'not aligned yet')}; the diagonal "
                     f"{fmt(diag, '.3f', 'not made yet (run.sh finish)')}",
                     "-" if a is None or diag is None else ("yes" if a < diag else "no")))
    for name in PERSPE_SYSTEMS:
        n = len(perspe_seeds(study, name))
        rows.append((f"perSPE: {name}, {len(PERSPE_SEEDS)} seeds", f"{n} trained",
                     "yes" if n == len(PERSPE_SEEDS) else "-"))
    logs = every_log(study)
    ends = [c for c in (convergence(log, fixed) for _, _, log, fixed in logs) if c is not None]
    flat = sum(c.flat for c in ends)
    rows.append(("every learning curve ends flat", f"{flat} of the {len(ends)} published (of {len(logs)})",
                 "no" if flat < len(ends) else ("yes" if len(ends) == len(logs) else "-")))
    w("## The study's targets")
    w("")
    w("met: yes, no, or - (not measured yet). A KFTT model below its targets makes Table 6 and Figure 2 "
      "\"not testable at this scale\" (the section on KFTT at more than one size shows it at two sizes, "
      "where trained).")
    w("")
    w("| target | measured | met |")
    w("|---|---|---|")
    for target, measured, met in rows:
        w(f"| {target} | {measured} | {met} |")
    w("")


def curves(study: Study, w, fig_dir):
    from fairseq_luong.analysis.plots import plot_panels

    panels = []
    for title, names in (("Multi30k, Table 1 (seed 1)", [r.system for r in TABLE1[:6]]),
                         ("Multi30k, Table 4 (seed 1)", [name for _, name, *_ in TABLE4]),
                         ("KFTT Ja-En", [s for _, s in FIG2_SYSTEMS] + ["kftt_localm_general_feed"])):
        series = []
        for name in names:
            xs, ys = valid_curve(os.path.join(study.system_dir(name, 1), "train.log"))
            if xs:
                series.append((name, xs, ys))
        if series:
            panels.append(("epoch", f"valid ppl, {title}", series, True))
    series = []
    for name in PERSPE_SYSTEMS:
        for seed in PERSPE_SEEDS:
            xs, ys = valid_curve(os.path.join(perspe_dir(study, name, seed), "train.log"))
            if xs:
                series.append((f"{name} s{seed}", xs, ys))
    if series:
        panels.append(("epoch", "valid ppl, perSPE (small_parallel_enja)", series, True))
    if not panels:
        return
    png = plot_panels(panels, os.path.join(fig_dir, "learning_curves.png"))
    w("## Learning curves")
    w("")
    w("Validation perplexity after each epoch, seed 1 of each system (perSPE: every seed); each curve "
      "ends where its schedule stopped it (the convergence table above gives every seed).")
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
    plural = "s" if len(rows) != 1 else ""
    w(f"{len(rows)} training{plural}, {total / 60:.1f} hours of fairseq-train wall clock in all: "
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
