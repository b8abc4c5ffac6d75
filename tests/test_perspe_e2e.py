"""End to end through the CLI on a slice of small_parallel_enja:
SentencePiece -> fairseq-preprocess -> chunk_japanese -> project_chunks ->
fairseq-train (translation_chunks, transformer_perspe_tiny, perSPE criterion) ->
fairseq-generate, every fairseq stage with --user-dir."""
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
USER_DIR = str(REPO / "fairseq_luong")
DATA = REPO.parent / "shared" / "data" / "small_parallel_enja"
BIN = Path(sys.executable).parent
SLICES = {"train": 400, "dev": 40, "test": 20}

pytestmark = pytest.mark.skipif(
    not (DATA / "train.ja").exists(),
    reason=f"small_parallel_enja not found at {DATA} (the shared/ folder beside the checkout)",
)


def run(*cmd, cwd=None):
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONWARNINGS="ignore")
    proc = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, cwd=cwd, env=env)
    assert proc.returncode == 0, f"{' '.join(map(str, cmd))} failed:\n{proc.stderr[-3000:]}"
    return proc


def python(script, *args):
    return run(sys.executable, script, *args)


@pytest.fixture(scope="module")
def prepared(tmp_path_factory):
    """Raw slices -> pieces -> data-bin with chunk ids for train and valid (not test)."""
    work = tmp_path_factory.mktemp("perspe_e2e")
    spm_tool = REPO / "examples" / "common" / "spm_tool.py"
    for split, n in SLICES.items():
        for lang in ("en", "ja"):
            with open(DATA / f"{split}.{lang}", encoding="utf-8") as f:
                lines = [next(f) for _ in range(n)]
            if lang == "ja":  # KyTea-segmented: remove the spaces to get raw Japanese
                lines = [line.replace(" ", "") for line in lines]
            (work / f"{split}.raw.{lang}").write_text("".join(lines), encoding="utf-8")
    for lang in ("en", "ja"):
        python(spm_tool, "train", "--input", work / f"train.raw.{lang}",
               "--model-prefix", work / f"spm.{lang}", "--vocab-size", "800")
        for split in SLICES:
            with open(work / f"{split}.raw.{lang}") as fin, open(work / f"{split}.spm.{lang}", "w") as fout:
                subprocess.run([sys.executable, str(spm_tool), "encode", "--model",
                                str(work / f"spm.{lang}.model")], stdin=fin, stdout=fout, check=True)
    run(BIN / "fairseq-preprocess", "-s", "en", "-t", "ja", "--trainpref", work / "train.spm",
        "--validpref", work / "dev.spm", "--testpref", work / "test.spm",
        "--destdir", work / "data-bin", "--workers", "1")
    for split, name in (("train", "train"), ("dev", "valid")):
        python(REPO / "scripts" / "chunk_japanese.py", "-i", work / f"{split}.raw.ja",
               "-o", work / f"{split}.chunks.ja", "--workers", "2")
        python(REPO / "scripts" / "project_chunks.py", "--pieces", work / f"{split}.spm.ja",
               "--chunks", work / f"{split}.chunks.ja", "--spm-model", work / "spm.ja.model",
               "--output", work / "data-bin" / f"{name}.en-ja.ja.chunks")
    return work


@pytest.fixture(scope="module")
def trained(prepared):
    work = prepared
    proc = run(
        BIN / "fairseq-train", work / "data-bin", "--user-dir", USER_DIR,
        "--task", "translation_chunks", "-s", "en", "-t", "ja",
        "--arch", "transformer_perspe_tiny", "--encoder-pos", "spe", "--decoder-pos", "perspe",
        "--criterion", "perspe_label_smoothed_cross_entropy", "--label-smoothing", "0.1",
        "--perturb-range", "1", "--perturb-unit", "phrase",
        "--optimizer", "adam", "--lr", "0.001", "--max-tokens", "1000", "--max-update", "4",
        "--save-dir", work / "checkpoints", "--no-epoch-checkpoints", "--seed", "1",
        "--log-format", "simple", "--log-interval", "1", "--no-progress-bar",
    )
    return work, proc.stdout + proc.stderr


def test_training_reads_chunks_and_validates(trained):
    work, log = trained
    assert "train: target chunk ids from" in log and "valid: target chunk ids from" in log
    losses = [float(x) for x in re.findall(r"\| valid on 'valid' subset \| loss ([\d.]+)", log)]
    assert losses and all(0 < x < 20 for x in losses)
    assert (work / "checkpoints" / "checkpoint_last.pt").exists()


@pytest.mark.parametrize("subset,chunks", [("test", False), ("valid", True)])
def test_generate_with_and_without_chunk_files(trained, subset, chunks):
    work, _ = trained
    has_chunks = (work / "data-bin" / f"{subset}.en-ja.ja.chunks.bin").exists()
    assert has_chunks == chunks
    proc = run(BIN / "fairseq-generate", work / "data-bin", "--user-dir", USER_DIR,
               "--task", "translation_chunks", "-s", "en", "-t", "ja", "--gen-subset", subset,
               "--path", work / "checkpoints" / "checkpoint_last.pt",
               "--beam", "2", "--max-len-b", "20", "--batch-size", "16")
    n = SLICES["test" if subset == "test" else "dev"]
    assert len(re.findall(r"^H-\d+\t", proc.stdout, flags=re.M)) == n
    assert "BLEU" in proc.stdout
