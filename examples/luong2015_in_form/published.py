"""What the in-form study published, read back: the scores of each system and seed (Study),
each training's result.json, and from its train.log its minutes, how it converged and its
curves; the KFTT rows trained at other sizes, and the first study's results from git history.
"""
import datetime
import json
import os
import re
import statistics
import subprocess
from typing import Dict, List, NamedTuple, Optional, Tuple

from systems import (
    BY_NAME,
    FLAT_PERCENT,
    HALVINGS,
    PERSPE_PATIENCE,
    PERSPE_SEEDS,
    PERSPE_SYSTEMS,
    SIZES,
    all_labels,
    trainings,
)


def load_json(path: str):
    """The JSON file PATH; None when it is not there."""
    if not os.path.exists(path):
        return None
    with open(path, encoding="utf-8") as f:
        return json.load(f)


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


def all_results(study: Study) -> List[dict]:
    """The result.json of every published training, in the study's run order."""
    out = []
    for label in all_labels():
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


def git_commits(study: Study) -> List[str]:
    """The commits that trained what RESULTS holds (each result.json names its own)."""
    return sorted({r["commit"] for r in all_results(study)})


def utc(stamp: str) -> datetime.datetime:
    """A result.json's "published" time ("2026-11-28 09:56:57 UTC")."""
    return datetime.datetime.strptime(stamp, "%Y-%m-%d %H:%M:%S UTC").replace(tzinfo=datetime.timezone.utc)


def committed_at(path: str) -> Optional[datetime.datetime]:
    """When the last commit that changed PATH was made (UTC); None outside git or never committed:
    when `run.sh finish` wrote results/eval/missing.json, in the recipe's own results."""
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


def train_curve(log_path: str) -> Tuple[List[float], List[float]]:
    """(epochs, training ppl) of a fairseq-train log: the loss of each epoch's updates, dropout on."""
    from fairseq_luong.analysis.training_log import read_training_log

    if not os.path.exists(log_path):
        return [], []
    by_epoch = {r.epoch: r.stats["ppl"] for r in read_training_log(log_path).train if "ppl" in r.stats}
    return sorted(by_epoch), [by_epoch[e] for e in sorted(by_epoch)]


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


def perspe_seeds(study: Study, name: str) -> List[int]:
    """The perSPE seeds of NAME trained and scored."""
    d = os.path.join(study.path("perspe", "systems"), name)
    return [seed for seed in PERSPE_SEEDS if os.path.exists(os.path.join(d, f"seed{seed}", "trained"))
            and os.path.exists(os.path.join(d, f"seed{seed}", "study_bleu.json"))]


def perspe_dir(study: Study, name: str, seed: int) -> str:
    return study.path("perspe", "systems", name, f"seed{seed}")


def every_log(study: Study) -> List[Tuple[str, str, str, bool]]:
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
    proc = subprocess.run(["git", "-C", os.path.dirname(os.path.abspath(__file__)), "rev-parse", "--show-toplevel"],
                          capture_output=True, text=True)
    return proc.stdout.strip() if proc.returncode == 0 else None
