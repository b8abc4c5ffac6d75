"""The study as it runs: trainings --jobs at a time, each published as soon as it is evaluated.

A training's small result files (scores, translations, its log, alignments, heat maps) are
copied from WORK (checkpoints and everything large stay there) into RESULTS, which mirrors
WORK's layout, with a ``result.json`` that keys them on

- the commit of the code that trained them: the newest commit that changed anything outside
  RESULTS, so that committing results does not change it (with the changes, when the
  checkout is not clean: then nothing is committed);
- the study's options (slice, epochs, size, beam) and the system's fairseq-train options.

A rerun skips what is published with the same key and refuses what another commit or other
options made, unless that commit is an ancestor and every file changed since is one the
training does not read (same_training_code: a mended perSPE recipe leaves the Luong rows).
When RESULTS is the recipe's own ``results/``, each publication is committed, so that a stop
(or a restart of the machine) loses only the trainings under way. A training runs in one
process at a time: `run.sh one` holds its lock (lock_path) until it ends, and the scheduler
leaves a training whose lock another process holds to that process.
"""
import concurrent.futures
import datetime
import fcntl
import hashlib
import json
import os
import shlex
import shutil
import subprocess
import sys
import threading
import time
from typing import Dict, List, Optional, Sequence, Tuple

from published import training_minutes
from systems import AER_SYSTEMS, BY_NAME, ENSEMBLE, PERSPE_MAX_UPDATE, Label, all_labels, perspe_options

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
OWN_RESULTS = os.path.join(HERE, "results")
# the study's options that make a result what it is (paths are not: WORK and the data folder
# may lie anywhere)
KEYED_OPTIONS = ("--beam", "--slice", "--epochs", "--size")
# What no training reads (this file schedules and publishes; the options it keys come from
# systems.py), and what only perSPE's trainings read: a result published by an older commit stands
# for the code now when every file changed since is one its training never read.
READ_BY_NO_TRAINING = ("tests/", "docs/", "examples/luong2015_in_form/runner.py")
READ_BY_PERSPE_ONLY = ("examples/perspe/",)


def git(*args: str) -> str:
    return subprocess.run(["git", "-C", REPO, *args], capture_output=True, text=True, check=True).stdout


def is_own(results: str) -> bool:
    return os.path.realpath(results) == os.path.realpath(OWN_RESULTS)


def outside(results: str) -> List[str]:
    """git's pathspec of the checkout without RESULTS (the whole checkout when RESULTS lies elsewhere)."""
    rel = os.path.relpath(os.path.realpath(results), os.path.realpath(REPO))
    return ["--", "."] if rel.startswith("..") else ["--", ".", f":(exclude){rel}"]


def code_commit(results: str) -> Tuple[str, List[str]]:
    """(the commit of the code, the files that differ from it): the newest commit that
    changed anything outside RESULTS, and the changed or new files outside RESULTS."""
    commit = git("log", "-1", "--format=%H", *outside(results)).strip()
    changed = [line[3:] for line in git("status", "--porcelain", *outside(results)).splitlines()]
    return commit, changed


def code_identity(results: str) -> str:
    """The commit, or the commit and a hash of the changes on top of it (a checkout that is
    not clean: its results are keyed, never committed)."""
    commit, changed = code_commit(results)
    if not changed:
        return commit
    diff = git("diff", "HEAD") + "".join(sorted(changed))
    for path in changed:
        full = os.path.join(REPO, path)
        if os.path.isfile(full):
            with open(full, "rb") as f:
                diff += hashlib.sha1(f.read()).hexdigest()
    return f"{commit}+changes-{hashlib.sha1(diff.encode()).hexdigest()[:10]}"


def keyed(study_opts: Sequence[str]) -> Dict[str, str]:
    pairs = dict(zip(study_opts[::2], study_opts[1::2]))
    return {k.lstrip("-"): pairs[k] for k in KEYED_OPTIONS}


def train_options(label: Label, opts: Dict[str, str]) -> str:
    """The fairseq-train options of the training (perSPE: examples/perspe's PRESET and its own)."""
    if label.perspe:
        words = (["PRESET=small", f"MAX_UPDATE={os.environ.get('MAX_UPDATE', PERSPE_MAX_UPDATE)}"]
                 + perspe_options(label.name[len("perspe_"):]))
    else:
        words = BY_NAME[label.name].options(int(opts["epochs"]), int(opts["size"])) + ["--seed", str(label.seed)]
    return " ".join(shlex.quote(w) for w in words)


def key_of(label: Label, results: str, study_opts: Sequence[str]) -> dict:
    opts = keyed(study_opts)
    return {"system": label.name, "seed": label.seed, "commit": code_identity(results), "study": opts,
            "train_options": train_options(label, opts)}


def read_json(path: str) -> Optional[dict]:
    if not os.path.exists(path):
        return None
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def difference(before: dict, now: dict) -> str:
    keys = [k for k in ("commit", "study", "train_options") if before.get(k) != now.get(k)]
    return "; ".join(f"{k}: published {before.get(k)}, now {now.get(k)}" for k in keys)


class Refused(SystemExit):
    pass


def same_training_code(label: Label, published: str, now: str) -> bool:
    """Commit NOW trains LABEL as commit PUBLISHED did: the same commit, or a descendant that
    changed only files the training never reads (READ_BY_*; a checkout with changes: never)."""
    if published == now:
        return True
    if "+" in published or "+" in now or subprocess.run(
            ["git", "-C", REPO, "merge-base", "--is-ancestor", published, now], capture_output=True).returncode:
        return False
    changed = git("diff", "--name-only", published, now, *outside(OWN_RESULTS)).split()
    unread = READ_BY_NO_TRAINING + (() if label.perspe else READ_BY_PERSPE_ONLY)
    return all(path.startswith(unread) for path in changed)


def state(label: Label, results: str, study_opts: Sequence[str]) -> str:
    """'new', or 'published' (with the same key, its commit or one that trains it alike:
    same_training_code); refuses a result made by other code or options."""
    path = os.path.join(results, label.rel, "result.json")
    before = read_json(path)
    if before is None:
        return "new"
    now = key_of(label, results, study_opts)
    if same_training_code(label, before.get("commit", ""), now["commit"]):
        now["commit"] = before["commit"]
    if {k: before.get(k) for k in now} != now:
        raise Refused(f"[in_form] error: {path} was made by other code or options ({difference(before, now)}): "
                      f"check out commit {before.get('commit', '?')[:12]} to go on with it, or give another --results")
    return "published"


def check_all(results: str, study_opts: Sequence[str]):
    """Refuse at once when RESULTS holds results of another commit or other options, or when
    the recipe's own results would be made from a checkout that is not a clean commit."""
    if is_own(results):
        _, changed = code_commit(results)
        if changed:
            raise Refused("[in_form] error: the study's results are made from a commit, and this checkout has "
                          f"changes: {' '.join(changed[:8])}{' ...' if len(changed) > 8 else ''}; commit them "
                          "(or give --results DIR outside results/ for a trial run)")
    for label in all_labels():
        state(label, results, study_opts)


# ---------------------------------------------------------------------------------
# What a training publishes: (path in WORK, path in RESULTS), both relative
def system_files(label: Label, work: str) -> List[str]:
    if label.perspe:
        return [os.path.join(label.rel, f) for f in ("train.log", "study_bleu.json", "study_test.hyp", "trained")]
    files = [os.path.join(label.rel, f) for f in ("train.log", "test_ppl.json", "test.bleu.json", "test.detok")]
    if BY_NAME[label.name].attention and BY_NAME[label.name].corpus == "m30k":
        files += [os.path.join(label.rel, f) for f in ("test.unk.bleu.json", "test.unk.detok")]
    if label.seed == 1 and label.name in AER_SYSTEMS:
        files += [os.path.join("eval", "aer", f"{label.name}.{c}.{x}") for c in ("paper", "fairseq")
                  for x in ("align", "aer")]
    heat = os.path.join("eval", "heatmaps", f"{label.name}.s{label.seed}")
    if os.path.isdir(os.path.join(work, heat)):
        files += [os.path.join(heat, f) for f in sorted(os.listdir(os.path.join(work, heat))) if f.endswith(".png")]
    return files


# the references and the lengths every table reads (the test sets as the study prepared them)
DATA_FILES = [os.path.join("data", "m30k", "raw", "test.de"), os.path.join("data", "kftt", "text", "test.ja"),
              os.path.join("data", "kftt", "text", "test.en"), os.path.join("data", "kftt", "split", "split.json"),
              os.path.join("perspe", "raw", "test.ja")]
FINISH_FILES = [os.path.join("eval", "aer", f"{n}.{x}") for n in ("diagonal",) for x in ("align", "aer")] + \
    [os.path.join("eval", "aer", f"ensemble.{c}.{x}") for c in ("paper", "fairseq") for x in ("align", "aer")] + \
    [os.path.join("eval", "ensemble", f) for f in ("test.unk.detok", "test.unk.bleu.json")]


def scores_of(label: Label, results: str) -> dict:
    d = os.path.join(results, label.rel)
    if label.perspe:
        s = read_json(os.path.join(d, "study_bleu.json"))
        return {"bleu": s and s["BLEU"]}
    out = {}
    for key, f, field in (("bleu", "test.bleu.json", "score"), ("bleu_unk", "test.unk.bleu.json", "score"),
                          ("ppl", "test_ppl.json", "ppl")):
        s = read_json(os.path.join(d, f))
        if s is not None:
            out[key] = s[field]
    return out


def copy_files(rels: Sequence[str], work: str, results: str, required: bool = True) -> List[str]:
    done = []
    for rel in rels:
        src, dst = os.path.join(work, rel), os.path.join(results, rel)
        if not os.path.exists(src):
            if required:
                raise SystemExit(f"[in_form] error: {src} is missing: evaluate the training first (run.sh one ...)")
            continue
        os.makedirs(os.path.dirname(dst), exist_ok=True)
        shutil.copyfile(src, dst + ".part")
        os.replace(dst + ".part", dst)
        done.append(dst)
    return done


class Lock:
    """One publication at a time (copies and the git commit), across processes."""

    def __init__(self, path: str):
        self.path = path

    def __enter__(self):
        os.makedirs(os.path.dirname(self.path), exist_ok=True)
        self.f = open(self.path, "w")
        fcntl.flock(self.f, fcntl.LOCK_EX)

    def __exit__(self, *exc):
        fcntl.flock(self.f, fcntl.LOCK_UN)
        self.f.close()


def commit(results: str, paths: Sequence[str], message: str):
    """Commit PATHS (under RESULTS) alone, when RESULTS is the recipe's own folder."""
    if not is_own(results) or not paths:
        return
    git("add", "--", *paths)
    if subprocess.run(["git", "-C", REPO, "diff", "--cached", "--quiet", "--", *paths]).returncode == 0:
        return
    git("commit", "-q", "-m", message, "--", *paths)


def publish(label: Label, work: str, results: str, study_opts: Sequence[str]):
    with Lock(os.path.join(work, ".publish.lock")):
        if state(label, results, study_opts) == "published":
            # a training made again (a lost checkpoint remade): compared, never replaced
            before = read_json(os.path.join(results, label.rel, "result.json"))["scores"]
            tmp = os.path.join(work, ".compare")
            shutil.rmtree(tmp, ignore_errors=True)
            copy_files(system_files(label, work), work, tmp)
            now = scores_of(label, tmp)
            same = "the same" if now == before else "NOT the same"
            print(f"[in_form] {label}: published already; this run's scores {now} are {same} as the published "
                  f"{before}", file=sys.stderr)
            return
        if is_own(results):
            check_all(results, study_opts)
        paths = copy_files(system_files(label, work), work, results)
        paths += copy_files(DATA_FILES, work, results, required=False)
        key = key_of(label, results, study_opts)
        key["scores"] = scores_of(label, results)
        key["published"] = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
        minutes = training_minutes(os.path.join(results, label.rel, "train.log"))
        key["train_minutes"] = None if minutes is None else round(minutes, 2)
        path = os.path.join(results, label.rel, "result.json")
        with open(path + ".part", "w", encoding="utf-8") as f:
            json.dump(key, f, indent=1)
            f.write("\n")
        os.replace(path + ".part", path)
        commit(results, paths + [path], f"in-form study: {label} (trained by {key['commit'][:10]}): "
               + ", ".join(f"{k} {v:.2f}" for k, v in key["scores"].items() if v is not None))
        print(f"[in_form] {label}: published to {os.path.join(results, label.rel)} {key['scores']}", file=sys.stderr)


def publish_finish(work: str, results: str, study_opts: Sequence[str]):
    """The rows made at the end (ensembles, the diagonal), and what they lack: the members
    whose checkpoint is not in WORK (results/eval/missing.json, read by the report)."""
    with Lock(os.path.join(work, ".publish.lock")):
        paths = copy_files(FINISH_FILES, work, results, required=False)
        missing = {}
        rows = {"ensemble": [f"{n}.s{s}" for n, s in ENSEMBLE],
                "aer_ensemble": [f"{n}.s1" for n in AER_SYSTEMS]}
        for row, members in rows.items():
            lost = [m for m in members if not os.path.exists(os.path.join(work, "systems", m, "model.pt"))]
            if lost:
                missing[row] = lost
        out = os.path.join(results, "eval", "missing.json")
        os.makedirs(os.path.dirname(out), exist_ok=True)
        with open(out, "w", encoding="utf-8") as f:
            json.dump({"commit": code_identity(results), "study": keyed(study_opts), "missing": missing}, f, indent=1)
            f.write("\n")
        commit(results, paths + [out], "in-form study: the ensembles and the diagonal baseline"
               + (f" ({', '.join(missing)} lack checkpoints)" if missing else ""))


# ---------------------------------------------------------------------------------
# The scheduler
def lock_path(work: str, label: Label) -> str:
    """The file `run.sh one` holds (flock) while it trains, evaluates and publishes LABEL."""
    return os.path.join(work, "locks", f"{label.name}.s{label.seed}.lock")


def held_by(work: str, label: Label) -> Optional[str]:
    """What the holder wrote into LABEL's lock ("pid P, since T"), when another process holds it."""
    path = lock_path(work, label)
    if not os.path.exists(path):
        return None
    with open(path) as f:
        try:
            fcntl.flock(f, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return f.read().strip() or "a process"
        fcntl.flock(f, fcntl.LOCK_UN)
    return None


def run_all(jobs: int, run_sh: str, results: str, study_opts: Sequence[str]):
    """Every training not yet published, JOBS at a time (`run.sh one`, which sets one thread);
    after a failure no new training starts, the running ones finish, and the status is 1."""
    todo = [label for label in all_labels() if state(label, results, study_opts) == "new"]
    work = dict(zip(study_opts[::2], study_opts[1::2]))["--work-dir"]
    logs = os.path.join(work, "logs")
    os.makedirs(logs, exist_ok=True)
    print(f"[in_form] {len(todo)} trainings to go, {jobs} at a time (logs: {logs})", file=sys.stderr)
    failed: List[str] = []
    lock = threading.Lock()
    queue = list(todo)

    def worker():
        while True:
            with lock:
                if failed or not queue:
                    return
                label = queue.pop(0)
            holder = held_by(work, label)
            if holder:  # a `run.sh one` started by hand: it publishes the training itself
                print(f"[in_form] skip {label}: another process trains it ({holder})", file=sys.stderr)
                continue
            t0 = time.time()
            log = os.path.join(logs, f"{label.name}.s{label.seed}.log")
            print(f"[in_form] {time.strftime('%H:%M:%S')} start {label}", file=sys.stderr)
            with open(log, "a", encoding="utf-8") as f:
                proc = subprocess.run(["bash", run_sh, *study_opts, "--results", results, "one", label.name,
                                       str(label.seed)], stdout=f, stderr=subprocess.STDOUT)
            took = (time.time() - t0) / 60
            if proc.returncode != 0:
                with lock:
                    failed.append(f"{label} (exit {proc.returncode}; log {log})")
                print(f"[in_form] {label} failed after {took:.1f} min: see {log}", file=sys.stderr)
            else:
                print(f"[in_form] {time.strftime('%H:%M:%S')} done {label} in {took:.1f} min", file=sys.stderr)

    with concurrent.futures.ThreadPoolExecutor(jobs) as pool:
        for f in [pool.submit(worker) for _ in range(jobs)]:
            f.result()
    if failed:
        raise SystemExit("[in_form] error: failed: " + "; ".join(failed))
