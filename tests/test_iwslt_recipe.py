"""examples/iwslt15_en_vi/run.sh all, rehearsed on a slice of the real data (full tier).

The slice: the first 1,500 training pairs of ../shared/data/iwslt15_en_vi, compressed as the data
is distributed (train.{en,vi}.xz), and the first 60 / 50 lines of tst2012 / tst2013. Tiny models
(--units 16), two epochs, two candidate averages, one beam and two length penalties; a second
seed of luong_global_general (NAME.s2) and the ensemble of all our systems: every step runs and
every file it writes is checked, not what it learns.
"""
import json
import lzma
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from tests.helpers import REPO, load_file

machine = load_file("scripts/bench/machine.py")

DATA = REPO.parent / "shared" / "data" / "iwslt15_en_vi"
RUN = REPO / "examples" / "iwslt15_en_vi" / "run.sh"
SYSTEMS = ("luong_global_general", "lstm")
TRAINED = ("luong_global_general", "luong_global_general.s2", "lstm")  # with a second seed
EVALUATED = (*TRAINED, "ensemble_all")  # and every system of ours together
SAVE_EVERY = 4  # updates: an epoch of the slice is about 10
OPTIONS = ["--units", "16", "--max-epoch", "2", "--save-every", str(SAVE_EVERY), "--hours", "0.1",
           "--averages", "best 1 2", "--beams", "2",
           "--lenpens", "1.0 1.2", "--heatmap-line", "3", "--systems", " ".join(EVALUATED)]

pytestmark = pytest.mark.skipif(not (DATA / "train.en.xz").exists(), reason=f"no {DATA}")


def lines(path):
    with open(path, encoding="utf-8") as f:
        return f.read().splitlines()


def run(slice_dir, work, *args):
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONWARNINGS="ignore")
    proc = subprocess.run(["bash", str(RUN), "--data-dir", str(slice_dir), "--work-dir", str(work), *OPTIONS, *args],
                          capture_output=True, text=True, env=env, timeout=1500)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-5000:]
    return proc


@pytest.fixture(scope="module")
def rehearsal(tmp_path_factory):
    root = tmp_path_factory.mktemp("iwslt")
    slice_dir = root / "data"
    slice_dir.mkdir()
    for lang in ("en", "vi"):
        with lzma.open(DATA / f"train.{lang}.xz", "rt", encoding="utf-8") as f:
            head = [next(f) for _ in range(1500)]
        with lzma.open(slice_dir / f"train.{lang}.xz", "wt", encoding="utf-8") as f:
            f.writelines(head)
        for split, n in (("tst2012", 60), ("tst2013", 50)):
            (slice_dir / f"{split}.{lang}").write_text("\n".join(lines(DATA / f"{split}.{lang}")[:n]) + "\n",
                                                       encoding="utf-8")
    work = root / "work"
    proc = run(slice_dir, work, "all")
    return slice_dir, work, proc


def test_prepare_keeps_the_words_seen_five_times_and_the_pairs_of_at_most_50_words(rehearsal):
    slice_dir, work, proc = rehearsal
    counts = {}
    for lang in ("en", "vi"):
        for line in lines(work / "text" / f"full.{lang}"):
            for w in line.split():
                counts.setdefault(lang, {}).setdefault(w, 0)
                counts[lang][w] += 1
        kept = {w for w, c in counts[lang].items() if c >= 5}
        words = [line.split()[0] for line in lines(work / "data-bin" / f"dict.{lang}.txt")]
        assert set(words) == kept and len(words) == len(kept)  # no padding words (--padding-factor 1)
    train = list(zip(lines(work / "text/train.en"), lines(work / "text/train.vi")))
    assert train and all(1 <= len(s.split()) <= 50 and 1 <= len(t.split()) <= 50 for s, t in train)
    assert len(train) < 1500  # the slice has longer pairs, and they are gone
    n = {lang: sum(c >= 5 for c in counts[lang].values()) for lang in counts}
    assert f"vocabularies: {n['en']} English, {n['vi']} Vietnamese words (and <unk> <s> </s>)" in proc.stderr
    for split in ("valid", "test"):
        assert (work / "data-raw" / f"{split}.en-vi.en").is_file()  # --replace-unk reads the words


@pytest.mark.parametrize("system", SYSTEMS)
def test_eval_chooses_on_tst2012_and_translates_tst2013_once(rehearsal, system):
    slice_dir, work, _ = rehearsal
    d = work / "systems" / system
    assert "done training" in (d / "train.log").read_text(encoding="utf-8")
    assert sorted(p.name for p in (d / "candidates").glob("*.pt")) == ["1.pt", "2.pt", "best.pt"]
    choice = json.loads((d / "choice.json").read_text(encoding="utf-8"))
    assert choice["model"] in ("best", "1", "2") and choice["beam"] == 2 and choice["lenpen"] in ("1.0", "1.2")
    tried = sorted(p.name for p in (d / "runs").glob("tst2012.*.b2.*.hyp") if ".unk" not in p.name)
    assert len(tried) == 4  # three models at lenpen 1.0, then the other length penalty for the chosen one
    tst2013 = sorted(p.name for p in (d / "runs").glob("tst2013.*.hyp"))
    which = choice["model"]
    assert tst2013 == sorted([f"tst2013.{which}.b1.lp1.0.hyp", f"tst2013.{which}.b2.lp{choice['lenpen']}.hyp",
                              f"tst2013.{which}.b2.lp{choice['lenpen']}.unk.hyp"])
    final = json.loads((d / "final.json").read_text(encoding="utf-8"))
    assert [(r["set"], r["beam"], r["unk"]) for r in final["rows"]] == [
        ("tst2012", "1", "0"), ("tst2012", "2", "0"), ("tst2012", "2", "1"),
        ("tst2013", "1", "0"), ("tst2013", "2", "0"), ("tst2013", "2", "1")]
    for r in final["rows"]:
        n = len(lines(slice_dir / f"{r['set']}.en"))
        assert len(lines(r["hyp"])) == n  # one tokenised line per source line
        assert len(lines(r["hyp"][:-len(".hyp")] + ".detok")) == n
        float(r["bleu"]), float(r["sacrebleu"])
        if r["unk"] == "1":
            assert "<unk>" not in Path(r["hyp"]).read_text(encoding="utf-8")
    # tst2012 scored at each epoch's end and at each save between (--save-every), the newest of
    # those kept beside the epochs' checkpoints; the averages above are of the epochs' alone
    ends = [int(line.rsplit("num_updates ", 1)[1].split()[0]) for line in lines(d / "train.log")
            if "| train | epoch" in line]
    curve = [int(row.split("\t")[0]) for row in lines(d / "curve.tsv")[1:]]
    assert len(ends) == 2 and curve == sorted(set(ends) | set(range(SAVE_EVERY, ends[-1] + 1, SAVE_EVERY)))
    newest = max(u for u in curve if u not in ends)  # an epoch's end saves checkpointE.pt instead
    assert [p.name for p in (d / "checkpoints").glob("checkpoint_*_*.pt")] == [
        f"checkpoint_{1 if newest <= ends[0] else 2}_{newest}.pt"]
    assert (d / "attention_3.png").stat().st_size > 0


def test_the_table_puts_the_systems_beside_the_anchors(rehearsal):
    _, work, proc = rehearsal
    table = (work / "results.md").read_text(encoding="utf-8")
    rows = [line for line in table.splitlines() if line.startswith("| ") and not line.startswith("| system")]
    names = [r.split(" | ")[0][2:] for r in rows]
    assert names[:3] == ["Luong & Manning 2015 (Stanford)", "TensorFlow NMT tutorial", "Joey NMT iwslt_envi_luong"]
    assert "SACT (Lin et al. 2018)" in names and names[-5:] == [*EVALUATED, "luong_global_general, mean of 2 seeds"]
    assert "| 23.2 | 23.8 | - | 25.5 | 26.1 |" in rows[1] and "| 25.8 | 26.5 |" in rows[2]
    assert "| 29.12 |" in rows[names.index("SACT (Lin et al. 2018)")]  # as published, not rounded
    values = {}
    for row, system in zip(rows[-5:], EVALUATED):
        final = json.loads((work / "systems" / system / "final.json").read_text(encoding="utf-8"))
        beam13 = [r for r in final["rows"] if r["set"] == "tst2013" and r["beam"] == "2" and r["unk"] == "0"][0]
        values[system] = float(beam13["bleu"])
        assert f"| {values[system]:.2f} |" in row  # its BLEU
        if system == "ensemble_all":  # our two systems, not lstm; not trained
            assert final["choice"]["members"] == ["luong_global_general", "luong_global_general.s2"]
            assert len(final["choice"]["model_path"].split(":")) == 2
            assert "| - | - | - | - | ensemble of luong_global_general, luong_global_general.s2 " in row
            continue
        assert "| 2 epochs, float32 | " in row and "| 2 |" in row  # its protocol, its epochs
        assert f"| {machine.describe_cpu()}; torch {torch.__version__} (kernels " in row  # the machine it ran on
    seeds = (values["luong_global_general"], values["luong_global_general.s2"])
    assert (f"| {sum(seeds) / 2:.2f} ({seeds[0]:.2f} / {seeds[1]:.2f}) |" in rows[-1]
            and rows[-1].endswith("| luong_global_general, luong_global_general.s2 |"))
    options = (work / "systems" / "luong_global_general.s2" / "options").read_text(encoding="utf-8")
    assert " --seed 2 " in options and " --seed 1 " in (work / "systems" / "lstm" / "options").read_text()
    significance = (work / "significance.md").read_text(encoding="utf-8")
    assert "| lstm | " in significance and "| baseline |" in significance
    assert [line.split(" | ")[0][2:] for line in significance.splitlines()[4:]] == ["lstm", *EVALUATED[:2],
                                                                                   "ensemble_all"]
    by_length = (work / "bleu_by_length.md").read_text(encoding="utf-8")
    assert "| 41-50 |" in by_length and "| >60 |" in by_length and all(s in by_length for s in SYSTEMS)
    assert (work / "bleu_by_length.png").stat().st_size > 0 and (work / "curves.png").stat().st_size > 0
    assert all(s in (work / "curves.md").read_text(encoding="utf-8") for s in SYSTEMS)


def test_a_second_run_trains_and_translates_nothing_again(rehearsal):
    slice_dir, work, _ = rehearsal
    proc = run(slice_dir, work, "all")
    assert proc.stderr.count("trained already") == len(TRAINED)
    assert "translating" not in proc.stderr and "training " not in proc.stderr


def test_an_unknown_system_and_a_bad_option_stop_before_any_work(tmp_path):
    for args, message in ((["--systems", "transformer", "all"], "unknown system 'transformer'"),
                          (["--units", "15", "prepare"], "--units 15: give an even size"),
                          (["--beams", "0", "prepare"], "--beams 0: give beam sizes")):
        proc = subprocess.run(["bash", str(RUN), "--work-dir", str(tmp_path / "w"), *args], capture_output=True,
                              text=True)
        assert proc.returncode != 0 and message in proc.stderr, proc.stderr
        assert not (tmp_path / "w" / "data-bin").exists()


def test_the_speed_benchmark_runs_the_recipes_options_side_by_side(rehearsal):
    """scripts/bench/benchmark_iwslt.py on the rehearsal's data: one timed update each, a row per
    system with its ratio to lstm (lstm's own: 1.00); then beam search at two beams, a row per
    system and beam, every system decoding hypotheses of the same length."""
    _, work, _ = rehearsal
    env = dict(os.environ, PYTHONWARNINGS="ignore")
    proc = subprocess.run([sys.executable, str(REPO / "scripts" / "bench" / "benchmark_iwslt.py"), str(work),
                           "--updates", "1", "--warmup", "1", "--repeats", "1", "--threads", "1",
                           "--beams", "2", "3"],
                          capture_output=True, text=True, env=env, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    train_table, beam_table = proc.stdout.split("\nBeam search: ")
    assert beam_table.startswith("tst2012, 60 sentences translated,")  # all of the slice's tst2012
    rows = [line.split(" | ") for line in train_table.splitlines() if line.startswith("| luong") or
            line.startswith("| lstm")]
    assert [r[0][2:] for r in rows] == ["luong_global_general", "lstm"]
    assert rows[1][2] == "1.00" and float(rows[0][1]) > 0 and float(rows[0][2]) > 0
    beams = [line.split(" | ") for line in beam_table.splitlines() if line.startswith("| l")]
    assert [(r[0][2:], r[1]) for r in beams] == [("luong_global_general", "2"), ("lstm", "2"),
                                                  ("luong_global_general", "3"), ("lstm", "3")]
    assert all(float(r[2]) > 0 for r in beams) and beams[1][3] == beams[3][3] == "1.00"
    assert beams[0][5] == beams[1][5] and beams[2][5] == beams[3][5]  # the same tokens a hypothesis
    assert "IWSLT'15 En-Vi (run.sh's options: 2 x 512" in proc.stdout
    # --updates 0: beam search alone, no training table
    proc = subprocess.run([sys.executable, str(REPO / "scripts" / "bench" / "benchmark_iwslt.py"), str(work),
                           "--updates", "0", "--repeats", "1", "--threads", "1", "--beams", "2"],
                          capture_output=True, text=True, env=env, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "no training, 1 alternating repetition" in proc.stdout and "train words/s" not in proc.stdout
    beams = [line.split(" | ") for line in proc.stdout.splitlines() if line.startswith("| l")]
    assert [(r[0][2:], r[1], r[3]) for r in beams] == [("luong_global_general", "2", beams[0][3]),
                                                       ("lstm", "2", "1.00")]
    assert proc.stdout.startswith(f"# {machine.describe_cpu()}, 1 thread, torch {torch.__version__} (kernels ")


def test_publish_copies_every_translation_anyone_can_rescore_and_the_table(rehearsal, tmp_path):
    import sacrebleu

    slice_dir, work, _ = rehearsal
    results = tmp_path / "results"
    run(slice_dir, work, "--results", str(results), "publish")
    for system in SYSTEMS:
        final = json.loads((work / "systems" / system / "final.json").read_text(encoding="utf-8"))
        published = json.loads((results / f"{system}.final.json").read_text(encoding="utf-8"))
        assert published["choice"]["beam"] == final["choice"]["beam"]
        assert sorted(r["hyp"] for r in published["rows"]) == sorted(
            f"{system}.{s}{kind}.hyp" for s in ("tst2012", "tst2013") for kind in ("", ".greedy", ".unk"))
        for ours, theirs in zip(final["rows"], published["rows"]):
            hyp = results / theirs["hyp"]
            assert hyp.read_bytes() == Path(ours["hyp"]).read_bytes()
            reference = lines(slice_dir / f"{ours['set']}.vi")
            assert len(lines(hyp)) == len(reference) == len(lines(slice_dir / f"{ours['set']}.en"))
            rescored = sacrebleu.corpus_bleu(lines(hyp), [reference], tokenize="none").score
            assert rescored == pytest.approx(float(theirs["bleu"]), abs=0.01)
        system_dir = work / "systems" / system
        assert (results / f"{system}.train.log").read_bytes() == (system_dir / "train.log").read_bytes()
        assert (results / f"{system}.curve.tsv").read_bytes() == (system_dir / "curve.tsv").read_bytes()
        assert (results / f"{system}.attention_3.png").stat().st_size > 0
        assert (results / f"{system}.code").read_text(encoding="utf-8").startswith("code train ")
    assert (results / "results.md").read_bytes() == (work / "results.md").read_bytes()
    assert (results / "bleu_by_length.png").stat().st_size > 0 and (results / "curves.md").exists()


def test_publish_refuses_a_translation_cut_short_and_writes_nothing(tmp_path):
    """results.py publish checks each translation against its source's line count first."""
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "tst2013.en").write_text("a\nb\nc\n", encoding="utf-8")
    (tmp_path / "cut.hyp").write_text("A\nB\n", encoding="utf-8")
    final = tmp_path / "final.json"
    final.write_text(json.dumps(dict(choice=dict(model="best", model_path="x/best.pt", beam=5, lenpen="1.0"),
                                     rows=[dict(set="tst2013", beam="5", lenpen="1.0", unk="0", bleu="1.0",
                                                sacrebleu="1.0", hyp=str(tmp_path / "cut.hyp"))])), encoding="utf-8")
    proc = subprocess.run([sys.executable, str(RUN.parent / "results.py"), "publish", f"luong={final}", "--work",
                           str(tmp_path), "--data", str(tmp_path / "data"), "--results", str(tmp_path / "out")],
                          capture_output=True, text=True)
    assert proc.returncode == 1 and proc.stderr.strip() == (
        f"error: {tmp_path / 'cut.hyp'} has 2 lines, tst2013.en 3: run.sh eval luong again")
    assert not (tmp_path / "out").exists()


def test_published_systems_restored_into_a_new_work_folder_table_as_before(rehearsal, tmp_path):
    """publish, then restore into a work folder with nothing trained (a later session's): the
    table's rows of the systems are the rehearsal's own."""
    slice_dir, work, _ = rehearsal
    results, fresh = tmp_path / "results", tmp_path / "fresh"
    run(slice_dir, work, "--results", str(results), "publish")
    run(slice_dir, fresh, "--results", str(results), "restore")
    run(slice_dir, fresh, "table")

    def rows(table):
        return [line for line in table.read_text(encoding="utf-8").splitlines()
                if line.startswith(tuple(f"| {s} |" for s in SYSTEMS))]

    assert len(rows(fresh / "results.md")) == len(SYSTEMS)
    assert rows(fresh / "results.md") == rows(work / "results.md")
    assert all(s in (fresh / "curves.md").read_text(encoding="utf-8") for s in SYSTEMS)


def test_a_training_stopped_by_max_epoch_and_raised_trains_on_to_the_weights_of_the_longer_one(rehearsal, tmp_path):
    """lstm trained 1 epoch in a new work folder, then run with the rehearsal's --max-epoch 2: it
    trains on from checkpoint_last.pt (recipe.sh same_or_raise) to the weights the rehearsal's
    2-epoch training made from the start, bit for bit on this machine; a lowered --max-epoch is
    refused and trains nothing."""
    import torch

    from fairseq_fixes.checkpoint_loading import checkpoint_safe_globals

    def load(path):  # weights only, with the globals fairseq checkpoints hold
        with torch.serialization.safe_globals(checkpoint_safe_globals()):
            return torch.load(path, weights_only=True)

    slice_dir, work, _ = rehearsal
    other = tmp_path / "w"
    run(slice_dir, other, "prepare")
    run(slice_dir, other, "--max-epoch", "1", "train", "lstm")
    ckpt = other / "systems" / "lstm" / "checkpoints" / "checkpoint_last.pt"
    after_one = load(ckpt)["extra_state"]["train_iterator"]
    assert (after_one["epoch"], after_one["iterations_in_epoch"]) == (2, 0)  # epoch 1 done, 2 next
    raised = run(slice_dir, other, "train", "lstm")
    assert "raised --max-epoch 1 -> 2: it trains on from its last checkpoint" in raised.stderr
    assert "resuming from" in raised.stderr
    mine = load(ckpt)["model"]
    whole = load(work / "systems" / "lstm" / "checkpoints" / "checkpoint_last.pt")["model"]
    assert mine.keys() == whole.keys() and all(torch.equal(mine[k], whole[k]) for k in whole)
    before = ckpt.stat().st_mtime_ns
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONWARNINGS="ignore")
    lowered = subprocess.run(["bash", str(RUN), "--data-dir", str(slice_dir), "--work-dir", str(other), *OPTIONS,
                              "--max-epoch", "1", "train", "lstm"], capture_output=True, text=True, env=env)
    assert lowered.returncode != 0 and "before: --max-epoch 2" in lowered.stderr
    assert "now:    --max-epoch 1" in lowered.stderr
    assert ckpt.stat().st_mtime_ns == before
