"""The recipes in examples/ run end to end on tiny local inputs: preparation, a few
training updates, translation and scoring, and the recipe rules (skip what is done,
refuse a changed configuration, name missing inputs, download nothing with a data dir)."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import fairseq_luong  # noqa: F401  (checkpoint allowlist for torch.load)
from tests.helpers import REPO, SHARED_DATA, make_wmt14_release

MULTI30K = SHARED_DATA / "multi30k_en_de"
TINY = ["--encoder-embed-dim", "16", "--decoder-embed-dim", "16", "--encoder-hidden-size", "16",
        "--decoder-hidden-size", "16", "--encoder-layers", "2", "--decoder-layers", "2"]


def option(cfg, section, key):
    """A training option stored in a checkpoint (sections are dicts or, for archs
    registered the argparse way, Namespaces)."""
    part = cfg[section]
    return part[key] if isinstance(part, dict) else getattr(part, key)


def recipe(name, *args, check=True, path_prefix=None):
    env = dict(os.environ, PYTHONWARNINGS="ignore", OMP_NUM_THREADS="1")
    env["PATH"] = os.pathsep.join(p for p in (path_prefix, str(Path(sys.executable).parent),
                                              env["PATH"]) if p)
    proc = subprocess.run(["bash", str(REPO / "examples" / name / "run.sh"), *map(str, args)],
                          capture_output=True, text=True, env=env)
    if check and proc.returncode != 0:
        raise AssertionError(f"{name} {' '.join(map(str, args))} failed ({proc.returncode}):\n"
                             f"{proc.stdout[-3000:]}\n{proc.stderr[-6000:]}")
    return proc


# --------------------------------------------------------------------------- Multi30k


@pytest.fixture(scope="module")
def multi30k(tmp_path_factory):
    """Tiny Multi30k (300 / 30 / 20 pairs), prepared and one system trained for 4 updates."""
    if not (MULTI30K / "train.en").exists():
        pytest.skip("../shared/data/multi30k_en_de not present")
    data = tmp_path_factory.mktemp("m30k_data")
    for split, n in (("train", 300), ("valid", 30), ("test", 20)):
        for lang in ("en", "de"):
            with open(MULTI30K / f"{split}.{lang}", encoding="utf-8") as f:
                (data / f"{split}.{lang}").write_text("".join(next(f) for _ in range(n)), encoding="utf-8")
    work = tmp_path_factory.mktemp("m30k_work")
    opts = ["--data-dir", data, "--work-dir", work, "--vocab", 250, "--save-every", 2]
    prep = recipe("multi30k_en_de", *opts, "prepare")
    train = recipe("multi30k_en_de", *opts, "train", "luong_localp", "--", *TINY, "--max-update", 4)
    return data, work, opts, prep, train


def test_multi30k_prepare_train_eval(multi30k):
    data, work, opts, prep, train = multi30k
    assert "prepared in" in prep.stderr and (work / "data-bin" / "dict.en.txt").exists()
    # progress on the terminal: a line per validation and per epoch, and where the log is
    assert "[luong_localp] valid ppl" in train.stderr and "[luong_localp] epoch 1 done" in train.stderr
    assert str(work / "systems" / "luong_localp" / "train.log") in train.stderr
    again = recipe("multi30k_en_de", *opts, "prepare")
    assert "SentencePiece" not in again.stderr  # done: skipped
    assert "trained already" in recipe("multi30k_en_de", *opts, "train", "luong_localp", "--",
                                       *TINY, "--max-update", 4).stderr

    ev = recipe("multi30k_en_de", *opts, "eval", "luong_localp")
    sysdir = work / "systems" / "luong_localp"
    hyps = (sysdir / "test.hyp").read_text(encoding="utf-8").splitlines()
    assert len(hyps) == 20 and "test sacreBLEU" in ev.stderr
    bleu = json.loads((sysdir / "bleu.json").read_text())
    assert bleu["name"] == "BLEU" and "tok:13a" in bleu["signature"]  # raw reference, 13a
    assert json.loads((sysdir / "valid.json").read_text())["ppl"] > 1
    curve = [line.split("\t") for line in (sysdir / "curve.tsv").read_text().splitlines()[1:]]
    assert [int(row[0]) for row in curve] == [2, 4]  # validated every 2 updates
    assert all(float(row[4]) > 1 for row in curve)
    table = recipe("multi30k_en_de", *opts, "--systems", "luong_localp lstm", "table").stdout
    row = next(line for line in table.splitlines() if line.startswith("| luong_localp |"))
    assert row.split("|")[2].strip() == "4"  # updates
    assert next(line for line in table.splitlines() if line.startswith("| lstm |")).count(" - ") == 4


def test_multi30k_refuses_changed_options(multi30k):
    data, work, opts, _, _ = multi30k
    ckpt = work / "systems" / "luong_localp" / "checkpoints" / "checkpoint_last.pt"
    before = ckpt.stat().st_mtime_ns
    proc = recipe("multi30k_en_de", *opts, "train", "luong_localp", "--", *TINY, "--max-update", 6,
                  check=False)
    assert proc.returncode == 1 and "made with other options" in proc.stderr
    assert "before: --max-update 4" in proc.stderr and "now:    --max-update 6" in proc.stderr
    assert ckpt.stat().st_mtime_ns == before


def test_multi30k_fairseq_lstm_trains(multi30k):
    """fairseq's lstm trains with the recipe's flags (2 updates)."""
    data, work, opts, _, _ = multi30k
    recipe("multi30k_en_de", *opts, "train", "lstm", "--", *TINY, "--decoder-out-embed-dim", 16,
           "--max-update", 2)
    state = torch.load(work / "systems" / "lstm" / "checkpoints" / "checkpoint_last.pt",
                       weights_only=True)
    cfg = state["cfg"]
    assert option(cfg, "model", "arch") == "lstm" and option(cfg, "model", "share_all_embeddings")
    assert option(cfg, "model", "decoder_attention") == "1"


def test_multi30k_names_missing_input(tmp_path):
    proc = recipe("multi30k_en_de", "--data-dir", tmp_path, "--work-dir", tmp_path / "w", "prepare",
                  check=False)
    assert proc.returncode == 1
    assert f"{tmp_path}/train.en not found" in proc.stderr and "multi30k/dataset" in proc.stderr


def test_average_checkpoints(multi30k):
    """model.pt of the trained system is the mean of its interval checkpoints."""
    data, work, opts, _, _ = multi30k
    ckpts = sorted((work / "systems" / "luong_localp" / "checkpoints").glob("checkpoint_*_*.pt"))
    assert len(ckpts) == 2  # updates 2 and 4
    out = work / "avg.pt"
    subprocess.run([sys.executable, str(REPO / "scripts" / "average_checkpoints.py"),
                    "--inputs", *map(str, ckpts), "--output", str(out)], check=True,
                   capture_output=True)
    states = [torch.load(p, weights_only=True)["model"] for p in ckpts]
    avg = torch.load(out, weights_only=True)["model"]
    moved = 0
    for k, v in avg.items():
        torch.testing.assert_close(v, (states[0][k] + states[1][k]) / 2)
        moved += int(not torch.equal(states[0][k], states[1][k]))
    assert moved > 0
    assert torch.equal(torch.load(work / "systems" / "luong_localp" / "model.pt",
                                  weights_only=True)["model"]["encoder.embed_tokens.weight"],
                       avg["encoder.embed_tokens.weight"])


def test_hyps_refuses_missing_sentences(tmp_path):
    ref = tmp_path / "ref"
    ref.write_text("a\nb\nc\n")
    gen = tmp_path / "gen.out"
    gen.write_text("H-2\t-0.1\tz\nH-0\t-0.2\tx\n")
    tool = REPO / "examples" / "common" / "recipe_tools.py"
    proc = subprocess.run([sys.executable, str(tool), "hyps", str(gen), "--ref", str(ref)],
                          capture_output=True, text=True)
    assert proc.returncode == 1 and "2 hypotheses for the 3 lines" in proc.stderr
    gen.write_text("H-2\t-0.1\tz\nH-0\t-0.2\tx\nH-1\t-0.3\ty\n")
    proc = subprocess.run([sys.executable, str(tool), "hyps", str(gen), "--ref", str(ref)],
                          capture_output=True, text=True, check=True)
    assert proc.stdout == "x\ny\nz\n"


# --------------------------------------------------------------------------- WMT'14


@pytest.fixture(scope="module")
def wmt14(tmp_path_factory):
    """The release's files made from wmt_sample_en_de, with one training pair longer than
    50 words that preparation must drop; curl and wget replaced by stubs that leave a mark."""
    if not (SHARED_DATA / "wmt_sample_en_de" / "train.en").exists():
        pytest.skip("../shared/data/wmt_sample_en_de not present")
    data = make_wmt14_release(tmp_path_factory.mktemp("wmt14_release"), n_train=200, n_test=12)
    for lang in ("en", "de"):
        with open(data / f"train.{lang}", "a", encoding="utf-8") as f:
            f.write(" ".join(["the"] * 51) + "\n")
    stubs = tmp_path_factory.mktemp("stubs")
    for tool in ("curl", "wget"):
        (stubs / tool).write_text(f"#!/bin/sh\ntouch {stubs}/downloaded\nexit 1\n")
        (stubs / tool).chmod(0o755)
    work = tmp_path_factory.mktemp("wmt14_work")
    opts = ["--data-dir", data, "--work-dir", work]
    prep = recipe("wmt14_en_de", *opts, "prepare", path_prefix=str(stubs))
    train = recipe("wmt14_en_de", *opts, "train", "t1_base", "--", *TINY, "--max-update", 2,
                   path_prefix=str(stubs))
    return data, work, opts, stubs, prep, train


def test_wmt14_prepare_train_eval(wmt14):
    data, work, opts, stubs, prep, train = wmt14
    assert not (stubs / "downloaded").exists()
    assert "kept 200 of 201 pairs" in prep.stderr
    assert "[base] epoch 1 done" in train.stderr
    # the paper's settings reach fairseq: SGD on the sentence-averaged gradient, batches of
    # 128, norm 5, lr halved from epoch 6, U[-0.1, 0.1], 10 epochs
    state = torch.load(work / "systems" / "base" / "checkpoints" / "checkpoint_last.pt",
                       weights_only=True)
    cfg = state["cfg"]
    assert option(cfg, "optimizer", "optimizer") == "sgd" and cfg["optimization"]["lr"] == [1.0]
    assert cfg["optimization"]["sentence_avg"] and cfg["dataset"]["batch_size"] == 128
    assert cfg["optimization"]["clip_norm"] == 5 and cfg["optimization"]["max_epoch"] == 10
    assert cfg["lr_scheduler"]["force_anneal"] == 6 and cfg["lr_scheduler"]["lr_shrink"] == 0.5
    assert option(cfg, "model", "init_uniform") == 0.1 and option(cfg, "model", "dropout") == 0
    # with the untokenized reference: the paper's tokenized BLEU and sacreBLEU on detokenized text
    raw = work / "raw_ref.de"
    raw.write_text((data / "newstest2014.de").read_text(encoding="utf-8").replace(" ,", ","))
    ev = recipe("wmt14_en_de", *opts, "--raw-ref", raw, "eval", "t1_base", path_prefix=str(stubs))
    assert "tokenized BLEU (as the paper)" in ev.stderr and "sacreBLEU on detokenized text" in ev.stderr
    tok = json.loads((work / "rows" / "t1_base" / "test.tok_bleu.json").read_text())
    assert "tok:none" in tok["signature"]
    # without it (cached steps): says how to get it, downloads nothing
    ev = recipe("wmt14_en_de", *opts, "eval", "t1_base", path_prefix=str(stubs))
    assert "--raw-ref" in ev.stderr and "translating" not in ev.stderr
    assert not (stubs / "downloaded").exists()
    assert "tok:13a" in json.loads((work / "rows" / "t1_base" / "test.sacrebleu.json").read_text())["signature"]


def test_wmt14_names_missing_file(wmt14, tmp_path):
    data, work, opts, stubs, _, _ = wmt14
    partial = tmp_path / "release"
    partial.mkdir()
    for f in data.iterdir():
        if f.name != "dict.en-de":
            (partial / f.name).symlink_to(f)
    proc = recipe("wmt14_en_de", "--data-dir", partial, "--work-dir", tmp_path / "w", "prepare",
                  check=False, path_prefix=str(stubs))
    assert proc.returncode == 1
    assert f"{partial}/dict.en-de not found" in proc.stderr and "nlp.stanford.edu" in proc.stderr
    assert not (stubs / "downloaded").exists()
