"""The perSPE recipe end to end through its command line, on ASPEC-format files made
from a slice of small_parallel_enja plus the odd lines of tests/helpers.py:

examples/perspe/run.sh prepare (extract, normalise, joint SentencePiece,
fairseq-preprocess --joined-dictionary, chunk, project) -> train (one seed,
--encoder-pos perspe --decoder-pos perspe, shared embeddings, a tiny model,
--fp16 --memory-efficient-fp16 --cpu) -> eval (fairseq-generate with --user-dir,
sacreBLEU on normalised text), and what the recipe promises: progress on the
terminal, changed options refused, eval cached until the checkpoint changes,
no fairseq BLEU4 line."""
import json
import os
import subprocess

import pytest

from tests.helpers import ODD_LINES, REPO, SHARED_DATA, bin_path, write_aspec_format

DATA = SHARED_DATA / "small_parallel_enja"
RUN = REPO / "examples" / "perspe" / "run.sh"
SIZES = {"train": 300, "dev": 30, "test": 20}
TINY = ["--encoder-layers", "1", "--decoder-layers", "1", "--encoder-embed-dim", "32",
        "--decoder-embed-dim", "32", "--encoder-ffn-embed-dim", "32",
        "--decoder-ffn-embed-dim", "32", "--encoder-attention-heads", "2",
        "--decoder-attention-heads", "2", "--save-interval-updates", "0"]
SYSTEM = ["--encoder-pos", "perspe", "--decoder-pos", "perspe", "--perturb-range", "1"]
FP16 = ["--fp16", "--memory-efficient-fp16", "--cpu"]  # fairseq's fp16 trainer, on the CPU

pytestmark = pytest.mark.skipif(
    not (DATA / "train.ja").exists(),
    reason=f"small_parallel_enja not found at {DATA} (the shared/ folder beside the checkout)",
)


def run_sh(work, *words, check=True):
    env = dict(os.environ, ASPEC=str(work / "aspec"), WORK=str(work / "run"), PRESET="small",
               VOCAB="700", TABLE="1", MAX_TOKENS="512", SEEDS="1", MAX_UPDATE="4",
               OMP_NUM_THREADS="1", PYTHONWARNINGS="ignore",
               PATH=os.path.dirname(bin_path("python")) + os.pathsep + os.environ["PATH"])
    proc = subprocess.run(["bash", str(RUN), *words], capture_output=True, text=True, env=env)
    if check:
        assert proc.returncode == 0, f"run.sh {' '.join(words)} failed:\n{proc.stderr[-4000:]}"
    return proc


@pytest.fixture(scope="module")
def recipe(tmp_path_factory):
    work = tmp_path_factory.mktemp("perspe_e2e")
    counts = write_aspec_format(work / "aspec", DATA, SIZES)
    prepared = run_sh(work, "prepare")
    trained = run_sh(work, "train", "sys", "--", *SYSTEM, *TINY, *FP16)
    return work, counts, prepared.stderr, trained.stderr


def test_prepare_takes_aspec_and_odd_lines(recipe):
    work, counts, log, _ = recipe
    run = work / "run"
    for split, n in counts.items():
        for lang in ("en", "ja"):
            assert len((run / "text" / f"{split}.{lang}").read_bytes().split(b"\n")) == n + 1
    normalised = (run / "text" / "train.ja").read_text(encoding="utf-8").split("\n")
    assert normalised[1:1 + len(ODD_LINES)] == [want for _, _, want in ODD_LINES]
    assert "0 line(s) given one phrase per piece" in log and "pieces per phrase" in log
    dicts = {lang: (run / "data-bin" / f"dict.{lang}.txt").read_text() for lang in ("en", "ja")}
    assert dicts["en"] == dicts["ja"]  # --joined-dictionary


def test_train_reports_progress_and_reads_chunks(recipe):
    work, _, _, log = recipe
    seed_dir = work / "run" / "systems" / "sys" / "seed1"
    assert f"log: {seed_dir}/train.log" in log
    assert "[sys seed 1] epoch 1 done: 4 updates, train ppl" in log  # recipe_tools progress
    train_log = (seed_dir / "train.log").read_text()
    assert "train: target chunk ids from" in train_log and "valid: target chunk ids from" in train_log
    assert "--share-all-embeddings" in (seed_dir / "settings").read_text()
    assert "loss_scale" in train_log  # the fp16 trainer ran


def test_changed_options_are_refused(recipe):
    work, _, _, _ = recipe
    proc = run_sh(work, "train", "sys", "--", *SYSTEM[:3], "spe", *TINY, *FP16, check=False)
    assert proc.returncode != 0
    assert "before: --decoder-pos perspe" in proc.stderr and "now:    --decoder-pos spe" in proc.stderr
    assert "refusing to resume sys seed 1" in proc.stderr
    assert "trained already" in run_sh(work, "train", "sys", "--", *SYSTEM, *TINY, *FP16).stderr


def test_eval_scores_normalised_text_and_caches_until_the_checkpoint_changes(recipe):
    work, counts, _, _ = recipe
    seed_dir = work / "run" / "systems" / "sys" / "seed1"
    first = run_sh(work, "eval", "sys")
    assert "translating test with sys seed 1" in first.stderr
    assert "| sys | 1 |" in first.stdout and "normalize_line" in first.stdout
    assert "BLEU4" not in (seed_dir / "generate.out").read_text()
    scores = json.loads((seed_dir / "bleu.json").read_text())
    assert scores["sentences"] == counts["test"] and "ja-mecab" in scores["signature"]
    assert "translating" not in run_sh(work, "eval", "sys").stderr  # cached
    later = (seed_dir / "bleu.json").stat().st_mtime + 10
    os.utime(seed_dir / "checkpoints" / "checkpoint_last.pt", (later, later))  # a newer checkpoint
    assert "translating test with sys seed 1" in run_sh(work, "eval", "sys").stderr


def test_a_line_that_cannot_be_projected_is_named_and_prepare_goes_on(recipe):
    """No odd line of the normalised text failed projection, so one is made: line 2 of
    the chunker's output for dev (the decomposed-kana line) spells another sentence.
    prepare redoes the projection, names the line and gives that sentence one phrase
    per piece. (Last in this file: it changes the valid chunk ids.)"""
    from fairseq.data import data_utils

    work, _, _, _ = recipe
    run = work / "run"
    chunks = run / "chunks" / "dev.ja"
    lines = chunks.read_text(encoding="utf-8").split("\n")
    assert lines[1] == "パンを\t食べる。"
    lines[1] = "パンを\t食べた。"
    chunks.write_text("\n".join(lines), encoding="utf-8")
    (run / "data-bin" / "valid.en-ja.ja.chunks.idx").unlink()
    log = run_sh(work, "prepare").stderr
    assert f"warning: {run}/spm/dev.ja:2 and {chunks}:2: piece" in log
    assert "valid.en-ja.ja.chunks.{bin,idx}: " in log and "1 line(s) given one phrase per piece" in log
    ds = data_utils.load_indexed_dataset(str(run / "data-bin" / "valid.en-ja.ja.chunks"), None, "mmap")
    n_pieces = len((run / "spm" / "dev.ja").read_text(encoding="utf-8").split("\n")[1].split())
    assert ds[1].tolist() == list(range(n_pieces + 1))  # one phrase per piece, then </s>
