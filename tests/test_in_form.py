"""The in-form study's recipe (examples/luong2015_in_form) end to end on tiny slices.

Every step of the real study runs, on the first 200 training pairs of each corpus, with
16-unit models trained for one epoch (perSPE: 2 updates): prepare (Multi30k words with the
IBM Model 1 dictionary, KFTT without the gold-aligned sentences, the perSPE data),
train one system of each kind (Multi30k words, KFTT pieces, perSPE), eval (translations, unk replacement, AER of forced
alignments against the KFTT gold, BLEU by length, perSPE scoring), report.
"""
import json
import os
import re
import subprocess

import pytest

from tests.helpers import REPO, SHARED_DATA, bin_path
from tests.helpers import run as run_command

RUN = REPO / "examples" / "luong2015_in_form" / "run.sh"
NEEDED = [SHARED_DATA / "multi30k_en_de" / "train.en", SHARED_DATA / "kftt_30k_ja_en" / "train.ja",
          SHARED_DATA / "kftt_gold_align_ja_en" / "jaen.gold"]

pytestmark = pytest.mark.skipif(not all(p.exists() for p in NEEDED),
                                reason=f"the study's data are not in {SHARED_DATA}")


def study(work, *words, check=True):
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONWARNINGS="ignore", MAX_UPDATE="2",
               PATH=os.path.dirname(bin_path("python")) + os.pathsep + os.environ["PATH"])
    proc = subprocess.run(["bash", str(RUN), "--work-dir", str(work), "--results", str(work / "results"),
                           "--slice", "200", "--epochs", "1", "--size", "16", *words],
                          capture_output=True, text=True, env=env)
    if check:
        assert proc.returncode == 0, f"run.sh {' '.join(words)} failed:\n{proc.stderr[-4000:]}"
    return proc


# the recipe's Python parts, each importing only the ones before it (study.py's docstring says what each holds)
PARTS = ("systems", "published", "verdicts", "claims", "report", "runner", "study")


def load_recipe():
    """examples/luong2015_in_form's modules as the recipe runs them (a script's folder first on
    the path), without putting the examples on sys.path for other tests."""
    import importlib.util
    import sys
    import types

    mods = {}
    for name in PARTS:
        spec = importlib.util.spec_from_file_location(name, RUN.parent / f"{name}.py")
        mods[name] = sys.modules[name] = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mods[name])
    return types.SimpleNamespace(**mods)


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    work = tmp_path_factory.mktemp("in_form")
    # one system of each kind the steps treat differently: words with unk replacement,
    # SentencePiece with forced alignment (and Figure 2's BLEU by length), perSPE; each
    # trained, evaluated and published by `one`, as `study` runs them
    for system in ("m30k_localp_general_feed", "kftt_global_location_feed", "perspe_spe_perspe"):
        study(work, "one", system, "1")
    study(work, "finish")
    return work


def test_plan_prints_every_training_and_the_total():
    proc = run_command(["bash", str(RUN), "--plan"])
    lines = proc.stdout.splitlines()
    assert sum(line.startswith("m30k_base ") for line in lines) == 3  # three seeds of the ladder
    assert lines[-1].startswith("total: 34 trainings, ") and "wall clock with 2 at a time" in lines[-1]


def test_every_step_runs_one_thread_whatever_the_environment_says(tmp_path):
    """The study's trainings run one thread each and the thread count changes the numbers, so
    run.sh sets one thread for every step (here the plan's python, a stand-in that records)."""
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "python").write_text(f'#!/bin/bash\necho "$OMP_NUM_THREADS $MKL_NUM_THREADS" > {tmp_path}/threads\n')
    (fake / "python").chmod(0o755)
    env = dict(os.environ, PATH=f"{fake}{os.pathsep}{os.environ['PATH']}", OMP_NUM_THREADS="2", MKL_NUM_THREADS="2")
    subprocess.run(["bash", str(RUN), "--plan"], env=env, check=True, capture_output=True)
    assert (tmp_path / "threads").read_text() == "1 1\n"


def test_kftt_split_holds_no_gold_sentence(work):
    """The gold-aligned pairs (all 582 are KFTT tune lines, 6 also training lines) are in
    no file the models train or are tested on."""
    import unicodedata

    def key(line):
        return unicodedata.normalize("NFKC", line).replace(" ", "").lower()

    gold = {key(x) for x in (SHARED_DATA / "kftt_gold_align_ja_en" / "jaen.ja").read_text("utf-8").splitlines()}
    split = work / "data" / "kftt" / "split"
    for name in ("train", "valid", "test"):
        lines = (split / f"{name}.ja").read_text("utf-8").splitlines()
        assert lines and not gold & {key(x) for x in lines}, name
    counts = json.loads((split / "split.json").read_text())
    assert counts["tune_gold_dropped"] == 582


def test_multi30k_words_are_capped_so_that_unk_occurs(work):
    d = work / "data" / "m30k" / "bin"
    assert (d / "dict.en.txt").exists() and (d / "dict.de.txt").exists()
    gen = (work / "systems" / "m30k_localp_general_feed.s1" / "test.unk.out").read_text("utf-8")
    plain = (work / "systems" / "m30k_localp_general_feed.s1" / "test.out").read_text("utf-8")
    assert "<unk>" in plain or "<unk>" in gen
    # unk replacement leaves no <unk> in the hypotheses
    assert "<unk>" not in (work / "systems" / "m30k_localp_general_feed.s1" / "test.unk.hyp").read_text("utf-8")


def test_each_training_is_published_with_its_commit_options_and_scores(work):
    """`one` copies the small files into --results, keyed on the commit of the code (this
    checkout: with its changes, if any) and the options; checkpoints stay in the work folder."""
    runner = load_recipe().runner
    results = work / "results"
    commit = runner.code_identity(str(results))
    head = subprocess.run(["git", "-C", str(REPO), "log", "-1", "--format=%H", "--", "."],
                          capture_output=True, text=True).stdout.strip()
    assert commit.split("+")[0] == head
    for rel, scores in (("systems/m30k_localp_general_feed.s1", {"bleu", "bleu_unk", "ppl"}),
                        ("systems/kftt_global_location_feed.s1", {"bleu", "ppl"}),
                        ("perspe/systems/spe_perspe/seed1", {"bleu"})):
        r = json.loads((results / rel / "result.json").read_text())
        assert r["commit"] == commit and r["study"] == {"beam": "5", "slice": "200", "epochs": "1", "size": "16"}
        assert set(r["scores"]) == scores and r["train_minutes"] is not None, rel
        assert (results / rel / "train.log").exists() and not list((results / rel).glob("*.pt")), rel
    r = json.loads((results / "systems/m30k_localp_general_feed.s1/result.json").read_text())
    options = r["train_options"]
    assert options.startswith("--arch luong_localp --encoder-layers 2")
    assert " --reverse-source --dropout 0.2 " in options
    assert options.endswith("--max-epoch 1 --no-epoch-checkpoints --log-interval 50 --seed 1")
    assert r["scores"]["bleu"] == json.loads((results / "systems/m30k_localp_general_feed.s1/test.bleu.json")
                                             .read_text())["score"]
    # what the tables read: the references, the forced alignments, the heat map
    for rel in ("data/m30k/raw/test.de", "data/kftt/text/test.en", "perspe/raw/test.ja",
                "eval/aer/kftt_global_location_feed.paper.align", "eval/aer/diagonal.aer"):
        assert (results / rel).stat().st_size > 0, rel
    assert list((results / "eval/heatmaps/kftt_global_location_feed.s1").glob("*.png"))


def test_a_published_training_is_compared_not_replaced_and_other_code_is_refused(work):
    results = work / "results"
    path = results / "systems/m30k_localp_general_feed.s1/result.json"
    before = path.read_text()
    proc = study(work, "one", "m30k_localp_general_feed", "1")
    assert "published already; this run's scores" in proc.stderr and "are the same as the published" in proc.stderr
    assert path.read_text() == before
    other = json.loads(before)
    other["commit"] = "0" * 40
    path.write_text(json.dumps(other))
    try:
        for words in (("one", "m30k_localp_general_feed", "1"), ("study",)):
            proc = study(work, *words, check=False)
            assert proc.returncode != 0
            last = proc.stderr.strip().splitlines()[-1]
            assert last.startswith(f"[in_form] error: {path} was made by other code or options (commit: published "
                                   "0000000000000000000000000000000000000000, now "), last
            assert "check out commit 000000000000 to go on with it, or give another --results" in last
    finally:
        path.write_text(before)


def test_a_result_stands_for_a_later_commit_only_when_no_file_its_training_reads_changed(tmp_path, monkeypatch):
    """The study's results are keyed on the commit that trained them. A later commit that mends
    the perSPE recipe, a test or this scheduler leaves the published Luong rows standing, not
    perSPE's; a change to the plugin, or a commit that is not a descendant, refuses them."""
    runner = load_recipe().runner
    repo = tmp_path / "repo"

    def git(*words):
        return subprocess.run(["git", "-C", str(repo), *words], capture_output=True, text=True,
                              check=True).stdout.strip()

    def commit_files(*paths):
        commits.append(len(commits))
        for path in paths:
            (repo / path).parent.mkdir(parents=True, exist_ok=True)
            (repo / path).write_text(f"{path} as of commit {len(commits)}\n")
        git("add", "-A")
        git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "c")
        return git("rev-parse", "HEAD")

    repo.mkdir()
    commits = []
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    results = "examples/luong2015_in_form/results"
    trained = commit_files("fairseq_luong/a.py", "examples/perspe/run.sh", "tests/t.py",
                           "examples/luong2015_in_form/runner.py", f"{results}/r.json")
    mended = commit_files("examples/perspe/run.sh", "tests/t.py", "docs/d.md",
                          "examples/luong2015_in_form/runner.py", f"{results}/r.json")
    plugin = commit_files("fairseq_luong/a.py")
    monkeypatch.setattr(runner, "REPO", str(repo))
    monkeypatch.setattr(runner, "OWN_RESULTS", str(repo / results))
    luong, perspe = runner.Label("m30k_base", 2), runner.Label("perspe_spe_spe", 1)
    assert runner.same_training_code(luong, trained, trained) and runner.same_training_code(perspe, mended, mended)
    assert runner.same_training_code(luong, trained, mended)
    assert not runner.same_training_code(perspe, trained, mended)  # its recipe changed
    assert not runner.same_training_code(luong, trained, plugin)
    assert not runner.same_training_code(luong, mended, plugin)
    assert not runner.same_training_code(luong, mended, trained)  # not a descendant
    assert not runner.same_training_code(luong, trained, mended + "+changes-0123456789")
    # state(): the published key (its commit kept), or refused
    out = tmp_path / "results"
    opts = ["--beam", "5", "--slice", "0", "--epochs", "10", "--size", "128"]
    monkeypatch.setattr(runner, "code_identity", lambda results: mended)
    for label in (luong, perspe):
        key = dict(runner.key_of(label, str(out), opts), commit=trained)
        (out / label.rel).mkdir(parents=True)
        (out / label.rel / "result.json").write_text(json.dumps(key))
    assert runner.state(luong, str(out), opts) == "published"
    with pytest.raises(SystemExit, match=f"other code or options \\(commit: published {trained}, now {mended}"):
        runner.state(perspe, str(out), opts)


def test_one_refuses_a_training_another_process_is_under_way_with(work):
    runner = load_recipe().runner
    lock = runner.lock_path(str(work), runner.Label("m30k_localp_general_feed", 1))
    with hold(lock, "pid 42, since 12:00"):
        proc = study(work, "one", "m30k_localp_general_feed", "1", check=False)
    assert proc.returncode != 0
    assert proc.stderr.strip().splitlines()[-1] == (
        "[in_form] error: m30k_localp_general_feed seed 1 is being trained by another process (pid 42, since 12:00): "
        "wait for it to end, or stop it")


def test_the_recipes_own_results_are_made_only_from_a_clean_commit(monkeypatch):
    runner = load_recipe().runner
    monkeypatch.setattr(runner, "code_commit", lambda results: ("a" * 40, ["fairseq_luong/models/luong_lstm.py"]))
    with pytest.raises(SystemExit, match="this checkout has changes: fairseq_luong/models/luong_lstm.py; commit them"):
        runner.check_all(runner.OWN_RESULTS, ["--beam", "5", "--slice", "0", "--epochs", "10", "--size", "128"])


def test_the_scheduler_runs_jobs_at_a_time_and_stops_after_a_failure(tmp_path, monkeypatch):
    """JOBS `run.sh one` at once, in the study's order (one thread each is run.sh's own setting:
    test_every_step_runs_one_thread_whatever_the_environment_says)."""
    runner = load_recipe().runner
    fake = tmp_path / "run.sh"
    fake.write_text("""#!/usr/bin/env bash
name="${@: -2:1}" seed="${@: -1}"
echo "start $name $seed $(date +%s.%N)" >> "$LOG"
sleep 0.4
echo "end $name $seed $(date +%s.%N)" >> "$LOG"
[[ "$name $seed" != "kftt_localp_general_feed 1" ]]
""")
    monkeypatch.setenv("LOG", str(tmp_path / "log"))
    opts = ["--work-dir", str(tmp_path / "work"), "--beam", "5", "--slice", "0", "--epochs", "10", "--size", "128"]
    with pytest.raises(SystemExit, match=r"failed: kftt_localp_general_feed seed 1 \(exit 1"):
        runner.run_all(2, str(fake), str(tmp_path / "results"), opts)
    events = [line.split() for line in (tmp_path / "log").read_text().splitlines()]
    starts = [e for e in events if e[0] == "start"]
    # the run order: seed 1 of the systems, the two corpora alternating
    starts.sort(key=lambda e: float(e[3]))
    assert {e[1] for e in starts[:2]} == {"m30k_base", "kftt_global_location_feed"}
    assert {e[1] for e in starts[2:4]} == {"m30k_reverse", "kftt_localm_general_feed"}
    # two at once, never more
    timeline = sorted([(float(e[3]), 1) for e in starts] + [(float(e[3]), -1) for e in events if e[0] == "end"])
    running, most = 0, 0
    for _, step in timeline:
        running += step
        most = max(most, running)
    assert most == 2
    # after the failure (the 6th training) only the one under way finishes: nothing new starts
    assert len(starts) <= 7 and len([e for e in events if e[0] == "end"]) == len(starts)


def hold(path, holder="pid 1, since now"):
    """Hold the file's lock as a `run.sh one` under way does (its file open, flock'ed)."""
    import fcntl

    os.makedirs(os.path.dirname(path), exist_ok=True)
    f = open(path, "w")
    fcntl.flock(f, fcntl.LOCK_EX)
    f.write(holder)
    f.flush()
    return f


def test_the_scheduler_leaves_a_training_another_process_is_under_way_with(tmp_path, monkeypatch, capfd):
    runner = load_recipe().runner
    fake = tmp_path / "run.sh"
    fake.write_text('echo "start ${@: -2:1} ${@: -1}" >> "$LOG"\n')
    monkeypatch.setenv("LOG", str(tmp_path / "log"))
    opts = ["--work-dir", str(tmp_path / "work"), "--beam", "5", "--slice", "0", "--epochs", "10", "--size", "128"]
    with hold(runner.lock_path(str(tmp_path / "work"), runner.Label("m30k_reverse", 2)), "pid 42, since 12:00"):
        runner.run_all(2, str(fake), str(tmp_path / "results"), opts)
    started = (tmp_path / "log").read_text().splitlines()
    assert "start m30k_reverse 2" not in started
    assert "start m30k_reverse 1" in started and "start m30k_reverse 3" in started
    skipped = "[in_form] skip m30k_reverse seed 2: another process trains it (pid 42, since 12:00)"
    assert skipped in capfd.readouterr().err
    # a lock that no process holds (the one that held it ended) leaves the training to the scheduler
    (tmp_path / "log").unlink()
    runner.run_all(2, str(fake), str(tmp_path / "results"), opts)
    assert "start m30k_reverse 2" in (tmp_path / "log").read_text().splitlines()


def test_plan_uses_the_minutes_the_study_measured(tmp_path):
    """The minutes of each published training, from its train.log where it has one: a resumed
    training's result.json published before the log reader carried the wall clock over resumes
    holds its last run's minutes only (here 5.0 of 10.0)."""
    results = tmp_path / "results"
    for name, seed, minutes in (("m30k_base", 1, 5.0), ("m30k_localp_general_feed", 1, 5.0)):
        d = results / "systems" / f"{name}.s{seed}"
        d.mkdir(parents=True)
        (d / "result.json").write_text(json.dumps({"system": name, "seed": seed, "train_minutes": minutes,
                                                   "study": {"slice": "0"}}))
    (d / "train.log").write_text(_log_line(1, 80.0, 1.0, 300) + "2026-11-27 07:00:00 | INFO | fairseq.trainer | "
                                 "Loaded checkpoint s/checkpoint_last.pt (epoch 1 @ 300 updates)\n"
                                 + _log_line(2, 60.0, 1.0, 600).replace("wall 600", "wall 300"))
    out = run_command(["python", str(RUN.parent / "study.py"), "plan", "--results", str(results), "--jobs", "2"]).stdout
    rows = {tuple(line.split()[:2]): line for line in out.splitlines()}
    assert rows[("m30k_base", "1")].split()[3:5] == ["5.0", "measured"]
    assert rows[("m30k_reverse", "2")].split()[3:] == ["7.5", "mean", "of", "2", "measured"]
    assert rows[("m30k_localp_general_feed", "1")].split()[2:4] == ["2", "10.0"]
    assert "2 of 34 measured" in out.splitlines()[-1]


def _log_line(epoch, ppl, lr, updates, train_ppl=None):
    """A fairseq-train log's two lines at the end of an epoch: its training and validation statistics."""
    loss = f"{__import__('math').log2(ppl):.3f}"
    train_ppl = ppl if train_ppl is None else train_ppl
    return (f"2026-11-27 06:00:00 | INFO | train | epoch {epoch:03d} | loss {loss} | ppl {train_ppl} | lr {lr} | "
            f"num_updates {updates} | wall {updates}\n"
            f"2026-11-27 06:00:01 | INFO | valid | epoch {epoch:03d} | valid on 'valid' subset | loss {loss} | "
            f"nll_loss {loss} | ppl {ppl} | num_updates {updates}\n")


@pytest.mark.parametrize("ppls,lrs,ending,flat,stopped,last_two", [
    # the rate halved HALVINGS times: stopped by the schedule, the last two epochs fell 0.8 %
    ((20.0, 10.0, 8.0, 7.48, 7.44, 7.42), (1, 1, 0.5, 0.25, 0.125, 0.0625),
     "stopping training because current learning rate (0.03125) is smaller than or equal to minimum learning rate",
     True, "rate halved 7 times", 100 * (7.48 - 7.42) / 7.48),
    # reduce_lr_on_plateau_until_flat: halved 8 times and flat (0.5 % over the last two epochs)
    ((20.0, 10.0, 8.0, 7.5, 7.46, 7.44), (1, 1, 0.5, 0.25, 0.125, 0.0625),
     "converged after epoch 6: the rate was reduced 8 times and the validation nll_loss improved by 0.0097 over the "
     "last 2 epochs (--flat-below 0.0145): the rate is set to 0 and training stops | stopping training because "
     "current learning rate (0.0) is smaller than or equal to minimum learning rate", True, "rate halved 8 times, flat",
     100 * (7.5 - 7.44) / 7.5),
    # still falling 5 % an epoch at the epoch cap: not flat
    ((20.0, 10.0, 9.0, 8.55), (1, 1, 1, 1), "done training in 100.0 seconds", False, "the epoch cap",
     100 * (10.0 - 8.55) / 10.0),
    # rising (overfitting): flat, the fall negative
    ((20.0, 10.0, 10.5, 11.0), (1, 1, 0.5, 0.25), "done training", True, "the epoch cap", -10.0),
    # perSPE: fairseq's --patience stopped it
    ((20.0, 10.0, 9.0, 9.1, 9.2), (1e-3, 1e-3, 1e-3, 1e-3, 1e-3),
     "early stop since valid performance hasn't improved for last 2 runs", True, "no better validation in 2 epochs",
     100 * (9.0 - 9.2) / 9.0),
    # cut off by a stop (no "done training"): unfinished
    ((20.0, 10.0, 9.995, 9.99), (1, 1, 1, 1), "", True, "unfinished", 0.1),
])
def test_convergence_reads_epochs_rate_and_the_fall_of_the_last_two_epochs(tmp_path, ppls, lrs, ending, flat,
                                                                          stopped, last_two):
    """What the report's convergence table says of each training: a curve ends flat when
    validation perplexity fell by less than 1 % over its last two epochs."""
    recipe = load_recipe()
    log = tmp_path / "train.log"
    log.write_text("".join(_log_line(e + 1, p, lr, 10 * (e + 1)) for e, (p, lr) in enumerate(zip(ppls, lrs)))
                   + (f"2026-11-27 06:00:02 | INFO | fairseq_cli.train | {ending}\n" if ending else ""))
    c = recipe.published.convergence(str(log))
    assert (c.epochs, c.final_lr, c.stopped, c.flat, c.best_ppl) == (len(ppls), lrs[-1], stopped, flat, min(ppls))
    assert c.last_two == pytest.approx(last_two)


def test_report_has_every_table_and_says_what_is_missing(work):
    report = (work / "results" / "report.md").read_text("utf-8")
    for heading in ("## Verdicts", "## Table 1 in form", "## Table 4 in form", "## Table 6 in form",
                    "## Bahdanau et al. (2014) Figure 2 in form", "## perSPE in form", "## Convergence",
                    "## The study's targets", "## Learning curves", "## The trainings and how to remake each"):
        assert heading in report, heading
    assert (work / "results" / "figures" / "fig2_bleu_by_length.png").stat().st_size > 0
    # the ensemble's members were not all trained: the report says so, it does not invent a row
    assert "| ensemble of 3 models + unk replace (the paper's: 8) | 0 |" in report
    assert "not run" in report
    # "unk replacement helps every attention model" cannot hold before every one of them is measured
    unk = re.search(r"\| Table 4: unk replacement helps every attention model \| .* \((\d) of (\d) models measured\) "
                    r"\| ([a-z ]+) \|", report)
    assert unk and int(unk[1]) < int(unk[2]) == 7 and unk[3] != "holds", unk
    assert ("**ensemble** waits for m30k_global_location.s3, m30k_global_location_feed.s3, "
            "m30k_localp_general_feed.s3: not trained yet.") in report
    # every published training has its row, its commit and the command that remakes it
    assert "| m30k_localp_general_feed seed 1 | " in report
    remake = "`OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 bash examples/luong2015_in_form/run.sh one"
    assert f"{remake} kftt_global_location_feed 1` |" in report
    assert f"{remake} perspe_spe_perspe 1` |" in report


def test_unk_replacement_helps_every_model_only_once_every_model_is_measured():
    """Table 4's claim is about all seven attention models: one measured model with a significant
    gain leaves it inconclusive (the first in-form report said "holds" on 1 of 7); it holds when
    all seven gain significantly, and does not hold when no measured model gains."""
    recipe = load_recipe()
    assert recipe.verdicts.unk_verdict({"global (location)": 4.26}, ["global (location)"], 7) == "inconclusive"
    seven = {f"model {i}": 1.5 for i in range(7)}
    assert recipe.verdicts.unk_verdict(seven, list(seven), 7) == "holds"
    assert recipe.verdicts.unk_verdict(seven, list(seven)[:6], 7) == "inconclusive"  # one gain not significant
    assert recipe.verdicts.unk_verdict({"a": -0.2, "b": 0.0}, [], 7) == "does not hold"


def test_the_perspe_verdict_names_the_seeds_it_stands_on_and_writes_nothing_into_results(tmp_path):
    """The verdict's row said "3 seeds" with one seed of each system published, and the paired
    bootstrap left its normalised texts in RESULTS/eval/perspe, beside the committed results."""
    recipe = load_recipe()
    refs = ["今日 は 晴れ です 。", "私 は 学生 です 。", "猫 が 好き です 。", "駅 まで 歩き ます 。"]
    (tmp_path / "perspe" / "raw").mkdir(parents=True)
    (tmp_path / "perspe" / "raw" / "test.ja").write_text("\n".join(refs) + "\n", encoding="utf-8")

    def publish(name, seed, bleu, hyps):
        d = tmp_path / "perspe" / "systems" / name / f"seed{seed}"
        d.mkdir(parents=True)
        (d / "trained").touch()
        (d / "study_bleu.json").write_text(json.dumps({"BLEU": bleu}))
        (d / "study_test.hyp").write_text("\n".join(hyps) + "\n", encoding="utf-8")

    publish("spe_spe", 1, 20.0, ["今日 は 雨 です 。", "私 は 先生 です 。", "犬 が 好き です 。",
                                 "駅 へ 行き ます 。"])
    publish("spe_perspe", 1, 30.0, refs[:2] + ["犬 が 好き です 。", "駅 まで 歩き ます 。"])
    publish("spe_perspe", 2, 28.0, refs[:1] + ["私 は 先生 です 。", "猫 が 好き です 。", "駅 まで 歩き ます 。"])
    before = sorted(p for p in tmp_path.rglob("*"))
    lines, verdicts = [], []
    recipe.claims.perspe(recipe.published.Study(str(tmp_path), ""), lines.append, verdicts)
    assert sorted(p for p in tmp_path.rglob("*")) == before
    [(_, _, here, _)] = verdicts
    assert here.startswith("+9.00 (1 and 2 seeds; p ") and "| spe_perspe | 30.00 / 28.00 | 29.00 ± 1.41 |" in lines
    assert recipe.verdicts.seeds_of([1.0, 2.0, 3.0], [1.0, 2.0, 3.0]) == "3 seeds each"


def test_a_kftt_row_trained_at_another_size_is_reported_beside_the_studys_own(tmp_path):
    """results/sizes/H holds a KFTT row trained again at H units: the report gives a row per
    size (its training and validation perplexity and their gap), their curves, and the reason
    Table 6 is not testable names the BLEU of both sizes."""
    recipe = load_recipe()
    name = "kftt_global_location_feed"

    def publish(root, size, ppls, bleu):
        d = root / "systems" / f"{name}.s1"
        d.mkdir(parents=True)
        d.joinpath("train.log").write_text("".join(_log_line(e + 1, valid, 0.001, 10 * (e + 1), train)
                                                   for e, (train, valid) in enumerate(ppls)))
        d.joinpath("test.bleu.json").write_text(json.dumps({"score": bleu}))
        d.joinpath("test_ppl.json").write_text(json.dumps({"ppl": 2 * ppls[-1][1]}))
        d.joinpath("result.json").write_text(json.dumps({"commit": "c" * 40, "study": {"size": str(size)}}))

    results = recipe.published.Study(str(tmp_path), "")
    lines = []
    recipe.claims.kftt_sizes(results, lines.append, str(tmp_path / "figures"))
    assert lines == []  # no other size: no section
    publish(tmp_path, 0, [(100.0, 120.0), (40.0, 80.0), (20.0, 60.0)], 2.51)
    publish(tmp_path / "sizes" / "128", 128, [(150.0, 160.0), (90.0, 110.0), (70.0, 105.0)], 1.2)
    recipe.claims.kftt_sizes(results, lines.append, str(tmp_path / "figures"))
    rows = [line for line in lines if line.startswith(f"| {name} seed 1 |")]
    assert [r.split(" | ")[1:9] for r in rows] == [
        ["2 x 128", "c" * 10, "3", "+34.38 %", "70.00", "105.00", "1.5x", "210.00"],
        ["2 x 256", "c" * 10, "3", "+50.00 %", "20.00", "60.00", "3.0x", "120.00"]]
    assert (tmp_path / "figures" / "kftt_sizes.png").stat().st_size > 0
    assert recipe.verdicts.untestable(results, [name]) == f"{name} reaches 2.51 BLEU at 2 x 256 (1.20 at 2 x 128)"


def test_the_targets_say_met_only_when_every_seed_or_row_is_in(tmp_path):
    """The report's targets: Multi30k's local-p by the mean of all its seeds (a missing seed:
    not measured yet), each KFTT attention model's BLEU and its AER against the diagonal's,
    perSPE's seeds, and flat curves only once every training is in."""
    recipe = load_recipe()
    gold = tmp_path / "gold"
    gold.mkdir()
    for name, text in (("jaen.gold", "1-1 2-2"), ("jaen.ja", "a b"), ("jaen.en", "x y")):
        gold.joinpath(name).write_text(text + "\n")
    results = recipe.published.Study(str(tmp_path / "results"), str(gold))

    def publish(name, seed, bleu, ppls=(20.0, 10.0, 9.99, 9.98)):
        d = tmp_path / "results" / "systems" / f"{name}.s{seed}"
        d.mkdir(parents=True)
        d.joinpath("test.bleu.json").write_text(json.dumps({"score": bleu}))
        d.joinpath("train.log").write_text("".join(_log_line(e + 1, p, 1, e + 1) for e, p in enumerate(ppls)))

    def aer_file(name, links):
        d = tmp_path / "results" / "eval" / "aer"
        d.mkdir(parents=True, exist_ok=True)
        d.joinpath(name).write_text(links + "\n")

    def table():
        lines = []
        recipe.report.targets(results, lines.append)
        return {r.split(" | ")[0].lstrip("| "): r.split(" | ")[1:] for r in lines
                if r.startswith("| ") and "---" not in r}

    publish("m30k_localp_general_feed", 1, 21.0)
    publish("m30k_localp_general_feed", 2, 23.0)
    publish("kftt_global_location_feed", 1, 6.0)
    publish("kftt_localm_general_feed", 1, 4.0, ppls=(20.0, 15.0, 10.0))  # still falling 33 %
    aer_file("kftt_global_location_feed.paper.align", "0-0 1-1")  # the gold's links: AER 0
    aer_file("kftt_localm_general_feed.paper.align", "0-1 1-0")  # none of them: AER 1
    aer_file("diagonal.align", "0-0 1-0")  # one of two: AER 0.5
    rows = table()
    local_p = "Multi30k: m30k_localp_general_feed, mean of its 3 seeds, at least 22 BLEU before unk replacement"
    assert rows[local_p] == ["22.00 (2 of 3 seeds)", "- |"]  # the mean of two seeds is not the target's
    assert rows["KFTT: kftt_global_location_feed at least 5 BLEU"] == ["6.00", "yes |"]
    assert rows["KFTT: kftt_localm_general_feed at least 5 BLEU"] == ["4.00", "no |"]
    assert rows["KFTT: kftt_global_location_feed aligns below the diagonal's AER"] == ["0.000; the diagonal 0.500",
                                                                                        "yes |"]
    assert rows["KFTT: kftt_localm_general_feed aligns below the diagonal's AER"] == ["1.000; the diagonal 0.500",
                                                                                       "no |"]
    assert rows["KFTT: kftt_localp_general_feed at least 5 BLEU"] == ["not trained", "- |"]
    assert rows["perSPE: spe_spe, 3 seeds"] == ["0 trained", "- |"]
    assert rows["every learning curve ends flat"] == ["3 of the 4 published (of 34)", "no |"]
    publish("m30k_localp_general_feed", 3, 20.0)
    assert table()[local_p] == ["21.33 (3 of 3 seeds)", "no |"]


def test_an_ensemble_tells_members_not_trained_yet_from_checkpoints_lost(tmp_path):
    """``finish`` records the members of each ensemble whose checkpoint is not in the work
    folder: one not published yet is waited for; one published whose checkpoint is gone (a
    replaced machine) is lost, and the report gives the commands that remake it."""
    recipe = load_recipe()
    results = tmp_path / "results"
    d = results / "systems" / "kftt_global_location_feed.s1"
    d.mkdir(parents=True)
    d.joinpath("result.json").write_text(json.dumps({"system": "kftt_global_location_feed", "seed": 1,
                                                     "commit": "c" * 40, "scores": {"bleu": 2.5}}))
    (results / "eval").mkdir()
    (results / "eval" / "missing.json").write_text(json.dumps({"missing": {"aer_ensemble": [
        "kftt_global_location_feed.s1", "kftt_localm_general_feed.s1"]}}))
    lines = []
    recipe.report.trainings_table(recipe.published.Study(str(results), ""), lines.append)
    text = "\n".join(lines)
    assert "**aer_ensemble** waits for kftt_localm_general_feed.s1: not trained yet." in text
    assert "**aer_ensemble** lacks the checkpoints of kftt_global_location_feed.s1: published" in text
    assert f"`{recipe.report.REMAKE} kftt_global_location_feed 1`, then `run.sh finish`." in text
    assert "kftt_localm_general_feed 1`" not in text
    # published after `finish` wrote missing.json (its commit's time): not lost, finish makes the row again
    import datetime

    d.joinpath("result.json").write_text(json.dumps({"system": "kftt_global_location_feed", "seed": 1,
                                                     "commit": "c" * 40, "scores": {"bleu": 2.5},
                                                     "published": "2026-11-28 09:56:57 UTC"}))
    for minute, lost in ((50, False), (59, True)):
        recipe.report.committed_at = lambda path: datetime.datetime(2026, 11, 28, 9, minute,
                                                                    tzinfo=datetime.timezone.utc)
        lines = []
        recipe.report.trainings_table(recipe.published.Study(str(results), ""), lines.append)
        text = "\n".join(lines)
        assert ("lacks the checkpoints of kftt_global_location_feed.s1" in text) == lost, text
        assert ("**aer_ensemble**: kftt_global_location_feed.s1 trained after `run.sh finish` last ran" in text) \
            != lost, text


def test_figure_2s_bleu_of_tokenised_text_prints_no_warning_per_resample(caplog):
    """Figure 2 scores against KFTT's tokenised reference on purpose: its bootstrap calls
    sacreBLEU 4 times per resample, and sacreBLEU's warning about tokenised text (3 lines
    each) filled the report's output with 4,000 lines."""
    recipe = load_recipe()
    refs = [f"this is sentence {i} ." for i in range(400)]
    hyps = [f"this is a sentence {i} ." for i in range(400)]
    lengths = [5 + i % 40 for i in range(400)]
    p = recipe.verdicts.bootstrap_drop_difference(hyps, refs, refs, lengths, 30, n=3)
    assert 0 <= p <= 1
    assert not [r for r in caplog.records if "detokenize" in r.getMessage()]
