"""examples/iwslt15_en_vi/results.py restore (and run.sh restore): a system published in
results/ from a work folder that is gone is tabled again beside the systems of a new one.

On the committed results (examples/iwslt15_en_vi/results/): restored and tabled, the system's
row is the committed table's, byte for byte; a folder trained here is never overwritten, a
file missing stops it before anything is written, and a restored system is not trained.
"""
import json
import shutil
import subprocess
import sys

import pytest

from tests.helpers import REPO

HERE = REPO / "examples" / "iwslt15_en_vi"
RESULTS = HERE / "results"
DATA = REPO.parent / "shared" / "data" / "iwslt15_en_vi"
SYSTEM = "luong_global_general"

pytestmark = pytest.mark.skipif(not (RESULTS / f"{SYSTEM}.final.json").exists(), reason="nothing published")


def results_py(*args):
    return subprocess.run([sys.executable, str(HERE / "results.py"), *map(str, args)], capture_output=True,
                          text=True)


def table_rows(text):
    return [line for line in text.splitlines() if line.startswith(f"| {SYSTEM} |")]


def test_a_restored_system_tables_as_the_committed_results(tmp_path):
    proc = results_py("restore", SYSTEM, "--results", RESULTS, "--work", tmp_path)
    assert proc.returncode == 0, proc.stderr
    system = tmp_path / "systems" / SYSTEM
    final = json.loads((system / "final.json").read_text(encoding="utf-8"))
    published = json.loads((RESULTS / f"{SYSTEM}.final.json").read_text(encoding="utf-8"))
    assert final["choice"] == published["choice"] and len(final["rows"]) == len(published["rows"]) == 6
    for ours, theirs in zip(final["rows"], published["rows"]):
        assert ours["hyp"] == str(system / "published" / theirs["hyp"])
        assert (system / "published" / theirs["hyp"]).read_bytes() == (RESULTS / theirs["hyp"]).read_bytes()
    assert (system / "train.log").read_bytes() == (RESULTS / f"{SYSTEM}.train.log").read_bytes()
    assert (system / "attention_7.png").read_bytes() == (RESULTS / f"{SYSTEM}.attention_7.png").read_bytes()
    table = results_py("table", f"{SYSTEM}={system / 'final.json'}", "--work", tmp_path, "--data", DATA)
    assert table.returncode == 0, table.stderr
    committed = table_rows((RESULTS / "results.md").read_text(encoding="utf-8"))
    assert len(committed) == 1 and table_rows(table.stdout) == committed  # BLEU, choice, epochs, hours, words/s
    again = results_py("restore", SYSTEM, "--results", RESULTS, "--work", tmp_path)  # a restored one is replaced
    assert again.returncode == 0, again.stderr


def test_a_system_trained_here_is_never_overwritten(tmp_path):
    system = tmp_path / "systems" / SYSTEM
    system.mkdir(parents=True)
    (system / "train.log").write_text("ours\n", encoding="utf-8")
    proc = results_py("restore", SYSTEM, "--results", RESULTS, "--work", tmp_path)
    assert proc.returncode == 1 and proc.stderr.strip() == (
        f"error: {system} holds a system trained or evaluated here: restore {SYSTEM} into another --work-dir")
    assert sorted(p.name for p in system.iterdir()) == ["train.log"]


def test_a_missing_translation_stops_it_before_anything_is_written(tmp_path):
    results = tmp_path / "results"
    shutil.copytree(RESULTS, results)
    (results / f"{SYSTEM}.tst2013.unk.hyp").unlink()
    proc = results_py("restore", SYSTEM, "--results", results, "--work", tmp_path / "work")
    assert proc.returncode == 1 and proc.stderr.strip() == (
        f"error: {results / f'{SYSTEM}.tst2013.unk.hyp'} is not there ({results / f'{SYSTEM}.final.json'} names it)")
    assert not (tmp_path / "work").exists()
    proc = results_py("restore", "rnnsearch", "--results", results, "--work", tmp_path / "work")
    assert proc.returncode == 1 and proc.stderr.strip() == (
        f"error: {results / 'rnnsearch.final.json'} is not there: nothing published as rnnsearch")


def test_run_sh_restores_the_published_systems_and_refuses_to_train_them(tmp_path):
    run = ["bash", str(HERE / "run.sh"), "--work-dir", str(tmp_path), "--results", str(RESULTS)]
    proc = subprocess.run([*run, "restore"], capture_output=True, text=True)  # default: --systems published
    assert proc.returncode == 0, proc.stderr
    published = [s for s in ("luong_global_general", "lstm") if (RESULTS / f"{s}.final.json").exists()]
    assert f"restored {' '.join(published)} from {RESULTS}" in proc.stderr
    assert all((tmp_path / "systems" / s / "restored").exists() for s in published)
    for step in ("train", "eval"):
        proc = subprocess.run([*run, step, SYSTEM], capture_output=True, text=True)
        assert proc.returncode == 1, proc.stderr
        assert proc.stderr.strip().endswith(
            f"error: {SYSTEM} in {tmp_path} was restored from published files (no checkpoints): "
            "train it in another --work-dir"), proc.stderr


def test_the_committed_table_and_significance_are_what_restore_and_table_give(tmp_path):
    """run.sh restore, then table, in a new work folder: results.md's rows of our systems and
    significance.md (the paired bootstrap against lstm, sacreBLEU's fixed seed) are the
    committed ones, byte for byte."""
    run = ["bash", str(HERE / "run.sh"), "--work-dir", str(tmp_path), "--results", str(RESULTS)]
    for step in ("restore", "table"):
        proc = subprocess.run([*run, step], capture_output=True, text=True)
        assert proc.returncode == 0, proc.stderr
    ours = ("| luong_global_general |", "| lstm |")
    rows = [line for line in (tmp_path / "results.md").read_text(encoding="utf-8").splitlines()
            if line.startswith(ours)]
    committed = [line for line in (RESULTS / "results.md").read_text(encoding="utf-8").splitlines()
                 if line.startswith(ours)]
    assert len(rows) == 2 and rows == committed
    significance = (tmp_path / "significance.md").read_text(encoding="utf-8")
    assert significance == (RESULTS / "significance.md").read_text(encoding="utf-8")
    assert "| luong_global_general | 28.00 (" in significance and "| 0.0010* |" in significance


def test_a_second_seed_gets_a_mean_row_and_each_row_names_its_protocol(tmp_path):
    """lstm's published files restored as luong_global_general.s2 (a stand-in second seed):
    the table adds the mean of the two with each seed's value, and each row its protocol as
    its options give it (the committed two: the until-flat rule, bf16 autocast)."""
    results = tmp_path / "results"
    shutil.copytree(RESULTS, results)
    final = json.loads((results / "lstm.final.json").read_text(encoding="utf-8"))
    for r in final["rows"]:
        target = r["hyp"].replace("lstm.", "luong_global_general.s2.", 1)
        shutil.copyfile(results / r["hyp"], results / target)
        r["hyp"] = target
    (results / "luong_global_general.s2.final.json").write_text(json.dumps(final), encoding="utf-8")
    options = (results / "lstm.options").read_text(encoding="utf-8")
    fixed = options.replace("reduce_lr_on_plateau_until_flat", "reduce_lr_on_plateau").replace(" --amp", "")
    (results / "luong_global_general.s2.options").write_text(fixed, encoding="utf-8")
    names = [SYSTEM, f"{SYSTEM}.s2"]
    proc = results_py("restore", *names, "--results", results, "--work", tmp_path / "work")
    assert proc.returncode == 0, proc.stderr
    table = results_py("table", *(f"{n}={tmp_path / 'work' / 'systems' / n / 'final.json'}" for n in names),
                       "--work", tmp_path / "work")
    assert table.returncode == 0, table.stderr
    rows = {line.split(" | ")[0][2:]: line for line in table.stdout.splitlines() if line.startswith("| luong")}
    assert list(rows) == [*names, f"{SYSTEM}, mean of 2 seeds"]
    assert "| until flat after 2 halvings, at most 20 epochs, bf16 autocast |" in rows[SYSTEM]
    assert "| 20 epochs, float32 |" in rows[f"{SYSTEM}.s2"]
    mean = rows[f"{SYSTEM}, mean of 2 seeds"]
    assert "| 28.51 (28.00 / 29.01) |" in mean  # the mean of 28.00 and 29.01, 28.505
    assert mean.endswith(f"| {SYSTEM}, {SYSTEM}.s2 |")
