"""The in-form study's recipe (examples/luong2015_in_form) end to end on tiny slices.

Every step of the real study runs, on the first 200 training pairs of each corpus, with
16-unit models trained for one epoch (perSPE: 2 updates): prepare (Multi30k words with the
IBM Model 1 dictionary, KFTT without the gold-aligned sentences, the perSPE data),
train one system of each kind (Multi30k words, KFTT pieces, perSPE), eval (translations, unk replacement, AER of forced
alignments against the KFTT gold, BLEU by length, perSPE scoring), report.
"""
import json
import os
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
    proc = subprocess.run(["bash", str(RUN), "--work-dir", str(work), "--slice", "200", "--epochs", "1",
                           "--size", "16", *words], capture_output=True, text=True, env=env)
    if check:
        assert proc.returncode == 0, f"run.sh {' '.join(words)} failed:\n{proc.stderr[-4000:]}"
    return proc


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    work = tmp_path_factory.mktemp("in_form")
    study(work, "prepare")
    # one system of each kind the steps treat differently: words with unk replacement,
    # SentencePiece with forced alignment (and Figure 2's BLEU by length), perSPE
    for system in ("m30k_localp_general_feed", "kftt_global_location_feed"):
        study(work, "train", system, "1")
    study(work, "train", "perspe_spe_perspe", "1")
    study(work, "eval")
    return work


def test_plan_prints_every_training_and_the_total():
    proc = run_command(["bash", str(RUN), "--plan"])
    lines = proc.stdout.splitlines()
    assert sum(line.startswith("m30k_base ") for line in lines) == 3  # three seeds of the ladder
    assert lines[-1].startswith("total: 34 trainings, about ")


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
    assert "<unk>" in (work / "systems" / "m30k_localp_general_feed.s1" / "test.out").read_text("utf-8") or "<unk>" in gen
    # unk replacement leaves no <unk> in the hypotheses
    assert "<unk>" not in (work / "systems" / "m30k_localp_general_feed.s1" / "test.unk.hyp").read_text("utf-8")


def test_eval_writes_scores_alignments_and_perspe(work):
    for system in ("m30k_localp_general_feed.s1", "kftt_global_location_feed.s1"):
        d = work / "systems" / system
        assert json.loads((d / "test.bleu.json").read_text())["score"] >= 0
        assert json.loads((d / "test_ppl.json").read_text())["ppl"] > 1
    aer = work / "eval" / "aer"
    for name in ("kftt_global_location_feed.paper", "kftt_global_location_feed.fairseq", "diagonal"):
        assert (aer / f"{name}.aer").read_text().startswith("AER = "), name
        assert len((aer / f"{name}.align").read_text("utf-8").splitlines()) == 582
    bleu = json.loads((work / "perspe" / "systems" / "spe_perspe" / "seed1" / "study_bleu.json").read_text())
    assert "BLEU" in bleu


def test_report_has_every_table_and_says_what_is_missing(work):
    proc = study(work, "report")
    report = (work / "report.md").read_text("utf-8")
    for heading in ("## Verdicts", "## Table 1 in form", "## Table 4 in form", "## Table 6 in form",
                    "## Bahdanau et al. (2014) Figure 2 in form", "## perSPE in form"):
        assert heading in report, heading
    assert (work / "figures" / "fig2_bleu_by_length.png").stat().st_size > 0
    # the ensemble's members were not all trained: the report says so, it does not invent a row
    assert "| ensemble of 8 models + unk replace | 0 |" in report
    assert "not run" in report
    del proc
