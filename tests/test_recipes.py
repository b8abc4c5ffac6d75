"""The recipes in examples/ run end to end on tiny local inputs: preparation, a few
training updates, translation and scoring, and the recipe rules (skip what is done,
refuse a changed configuration, name missing inputs, download nothing with a data dir)."""
import json
import os
import struct
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


def png_size(path):
    """(width, height) of a PNG file (its IHDR chunk)."""
    data = Path(path).read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 2000, path
    return struct.unpack(">II", data[16:24])


def table_rows(text):
    """{first cell: [cells]} of the rows of a markdown table."""
    rows = [[c.strip() for c in line.strip().strip("|").split("|")] for line in text.splitlines()
            if line.startswith("| ") and not line.startswith("|---")]
    return {r[0]: r for r in rows}


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


def multi30k_slice(data, sizes):
    """The first sizes[split] pairs of each Multi30k split in ``data``."""
    if not (MULTI30K / "train.en").exists():
        pytest.skip("../shared/data/multi30k_en_de not present")
    for split, n in sizes.items():
        for lang in ("en", "de"):
            with open(MULTI30K / f"{split}.{lang}", encoding="utf-8") as f:
                (data / f"{split}.{lang}").write_text("".join(next(f) for _ in range(n)), encoding="utf-8")
    return data


@pytest.fixture(scope="module")
def multi30k(tmp_path_factory):
    """Tiny Multi30k (300 / 30 / 20 pairs), prepared and one system trained for 4 updates."""
    data = multi30k_slice(tmp_path_factory.mktemp("m30k_data"), {"train": 300, "valid": 30, "test": 20})
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

    # the benchmark's luong systems drop out the attention memory like fairseq's lstm
    state = torch.load(sysdir_ckpt(work, "luong_localp"), weights_only=True)
    assert option(state["cfg"], "model", "encoder_memory_dropout") == 0.3

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
    # one heat map: the attention of test line 2 (the default --heatmap-line)
    assert f"heat map of test line 2: {sysdir / 'attention_2.png'}" in ev.stderr
    png_size(sysdir / "attention_2.png")

    proc = recipe("multi30k_en_de", *opts, "--systems", "luong_localp lstm", "table")
    table = table_rows((work / "results.md").read_text(encoding="utf-8"))
    assert (work / "results.md").read_text(encoding="utf-8") in proc.stdout
    header = table["system"]
    assert header[:4] == ["system", "M params", "epochs", "updates"] and "test sacreBLEU" in header[-1]
    row = dict(zip(header, table["luong_localp"]))
    assert row["updates"] == "4" and row["epochs"] == "1" and float(row["M params"]) > 0
    assert float(row["test sacreBLEU"]) == round(bleu["score"], 2)
    assert set(table["lstm"][1:]) == {"-"}  # not trained (yet): no numbers
    # BLEU by source length of the translated system against the raw reference, grouped by
    # the words of the raw source (--edges 10 15 20 25 30)
    lengths = [len(line.split()) for line in (data / "test.en").read_text(encoding="utf-8").splitlines()]
    by_length = table_rows((work / "bleu_by_length.md").read_text(encoding="utf-8"))
    for label, lo, hi in (("<=10", 0, 10), ("11-15", 11, 15), ("16-20", 16, 20), ("21-25", 21, 25)):
        assert by_length[label][1] == str(sum(lo <= n <= hi for n in lengths)), label
    assert by_length["all"] == ["all", "20", f"{bleu['score']:.2f}"]
    png_size(work / "bleu_by_length.png")
    # learning curves: valid ppl against updates and against minutes, side by side
    assert table_rows((work / "curves.md").read_text(encoding="utf-8"))["luong_localp"][1] == "2"
    width, height = png_size(work / "curves.png")
    assert width > 2 * height
    for path in ("results.md", "bleu_by_length.png", "curves.png"):
        assert str(work / path) in proc.stderr
    assert str(sysdir / "attention_2.png") in proc.stderr


def sysdir_ckpt(work, name):
    return work / "systems" / name / "checkpoints" / "checkpoint_last.pt"


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


def test_multi30k_says_how_many_pieces_sentencepiece_made(tmp_path):
    """--vocab 8000 on 500 pairs: SentencePiece (hard_vocab_limit=False) makes fewer pieces,
    and the recipe used to say 'one joint unigram model of 8000 pieces'."""
    import sentencepiece as spm

    data = multi30k_slice(tmp_path, {"train": 500, "valid": 20, "test": 20})
    work = tmp_path / "work"
    proc = recipe("multi30k_en_de", "--data-dir", data, "--work-dir", work, "--vocab", 8000, "prepare")
    model = work / "spm" / "joint.model"
    pieces = spm.SentencePieceProcessor(model_file=str(model)).get_piece_size()
    assert pieces < 8000
    assert (f"spm_tool.py: {model} has {pieces} pieces, not the 8000 asked for: the training text holds no "
            "more (SentencePiece's hard_vocab_limit=False)") in proc.stderr
    assert "of 8000 pieces" not in proc.stderr and "of at most 8000 pieces" in proc.stderr


@pytest.mark.parametrize("name,args,status,message", [
    ("multi30k_en_de", ["--minutes", "abc", "all"], 2,
     "run.sh: --minutes abc: give the training time of each system in minutes, a positive number such as 1.5"),
    ("multi30k_en_de", ["--vocab", "8k", "prepare"], 2,
     "run.sh: --vocab 8k: give the size of the SentencePiece vocabulary, a whole number of at least 1"),
    ("multi30k_en_de", ["--systems", "luong_localp nosuch", "all"], 1,
     "[multi30k] error: unknown system 'nosuch' (known: luong_global_general luong_localp luong_base lstm "
     "rnnsearch)"),
    ("wmt14_en_de", ["train", "NOSUCHROW"], 1, "[wmt14] error: unknown row 'NOSUCHROW' (bash RUN rows)"),
    ("wmt14_en_de", ["all", "t1_base", "NOSUCHROW"], 1, "[wmt14] error: unknown row 'NOSUCHROW' (bash RUN rows)"),
    ("wmt14_en_de", ["--updates", "0", "time-epoch", "t1_base"], 2,
     "run.sh: --updates 0: give the number of updates to time, a whole number of at least 1"),
    ("wmt14_en_de", ["--gold-first", "fr", "all"], 2,
     "run.sh: --gold-first fr: give de or en (the language of the links' first index)"),
])
def test_recipes_check_options_and_names_before_any_work(tmp_path, name, args, status, message):
    """One line and a failing status before anything runs. They were: multi30k --minutes abc
    ran prepare, then died with a Python NameError; wmt14 train NOSUCHROW printed its error
    and exited 0 (the die ran inside $(...) of a for loop)."""
    (tmp_path / "data").mkdir()  # empty: a recipe that went ahead would stop on a missing file
    proc = recipe(name, "--data-dir", tmp_path / "data", "--work-dir", tmp_path / "work", *args, check=False)
    assert (proc.returncode, proc.stderr) == (status, message.replace("RUN", str(REPO / "examples" / name / "run.sh"))
                                              + "\n")
    assert not (tmp_path / "work").exists()


def test_average_checkpoints(multi30k):
    """model.pt of the trained system is the mean of its interval checkpoints."""
    data, work, opts, _, _ = multi30k
    ckpts = sorted((work / "systems" / "luong_localp" / "checkpoints").glob("checkpoint_*_*.pt"))
    assert len(ckpts) == 2  # updates 2 and 4
    out = work / "avg.pt"
    subprocess.run([sys.executable, str(REPO / "scripts" / "train" / "average_checkpoints.py"),
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


def test_average_includes_the_final_state_after_the_last_interval_checkpoint(multi30k):
    """A time budget ends between two saves: the updates after the newest interval checkpoint
    are in checkpoint_last.pt only, and model.pt averages it with the newest interval one."""
    data, work, opts, _, _ = multi30k
    recipe("multi30k_en_de", *opts, "train", "luong_global_general", "--", *TINY, "--max-update", 5)
    ckpts = work / "systems" / "luong_global_general" / "checkpoints"
    assert sorted(p.name for p in ckpts.glob("checkpoint_*_*.pt")) == ["checkpoint_1_2.pt",
                                                                        "checkpoint_1_4.pt"]
    recipe("multi30k_en_de", *opts, "translate", "luong_global_general")
    model = torch.load(work / "systems" / "luong_global_general" / "model.pt", weights_only=True)
    last = torch.load(ckpts / "checkpoint_last.pt", weights_only=True)
    four = torch.load(ckpts / "checkpoint_1_4.pt", weights_only=True)
    assert last["optimizer_history"][-1]["num_updates"] == 5
    assert model["optimizer_history"][-1]["num_updates"] == 5
    for k, v in model["model"].items():
        torch.testing.assert_close(v, (four["model"][k] + last["model"][k]) / 2)


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


VOCAB_WORDS = 40  # the release's vocabularies cut to 37 words: <unk> everywhere, to replace


@pytest.fixture(scope="module")
def wmt14(tmp_path_factory):
    """The release's files made from wmt_sample_en_de, with one training pair longer than
    50 words that preparation must drop, vocabularies cut so that <unk> is frequent and a
    dictionary translating every newstest2014 source word w as DE_w; curl and wget replaced
    by stubs that leave a mark. The row t4_localp_general (one local-p model, both with and
    without unk replacement) trained for 2 updates."""
    if not (SHARED_DATA / "wmt_sample_en_de" / "train.en").exists():
        pytest.skip("../shared/data/wmt_sample_en_de not present")
    data = make_wmt14_release(tmp_path_factory.mktemp("wmt14_release"), n_train=200, n_test=12)
    for lang in ("en", "de"):
        lines = (data / f"train.{lang}").read_text(encoding="utf-8").splitlines(True)
        lines[4] = lines[4].replace(" ", "\x92 ", 1)  # C1 mojibake, as in the real WMT text
        (data / f"train.{lang}").write_text("".join(lines), encoding="utf-8")
        with open(data / f"train.{lang}", "a", encoding="utf-8") as f:
            f.write(" ".join(["the"] * 51) + "\n")
        vocab = data / f"vocab.50K.{lang}"
        vocab.write_text("".join(vocab.read_text(encoding="utf-8").splitlines(True)[:VOCAB_WORDS]), encoding="utf-8")
    words = sorted({w for line in (data / "newstest2014.en").read_text(encoding="utf-8").splitlines()
                    for w in line.split()})
    (data / "dict.en-de").write_text("".join(f"{w}\tDE_{w}\n" for w in words), encoding="utf-8")
    stubs = tmp_path_factory.mktemp("stubs")
    for tool in ("curl", "wget"):
        (stubs / tool).write_text(f"#!/bin/sh\ntouch {stubs}/downloaded\nexit 1\n")
        (stubs / tool).chmod(0o755)
    work = tmp_path_factory.mktemp("wmt14_work")
    opts = ["--data-dir", data, "--work-dir", work]
    prep = recipe("wmt14_en_de", *opts, "prepare", path_prefix=str(stubs))
    train = recipe("wmt14_en_de", *opts, "train", "t4_localp_general", "--", *TINY, "--max-update", 2,
                   path_prefix=str(stubs))
    return data, work, opts, stubs, prep, train


def gold_from_model(data, work, out):
    """Gold links in the RWTH layout (German first, 1-based) that are the model's own
    forced alignment (footnote 14 rows): its AER against them is 0."""
    links = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "eval" / "force_align.py"), str(work / "data-bin"), "--path",
         str(work / "systems" / "localp_general_feed" / "model.pt"), "-s", "en", "-t", "de",
         "--source", str(data / "newstest2014.en"), "--target", str(data / "newstest2014.de"),
         "--paper-convention"], capture_output=True, text=True, check=True).stdout.splitlines()
    out.write_text("".join(" ".join(f"{int(j) + 1}-{int(i) + 1}" for i, j in (link.split("-") for link in line.split()))
                           + "\n" for line in links), encoding="utf-8")
    return out


def test_wmt14_prepare_train_eval(wmt14, tmp_path):
    data, work, opts, stubs, prep, train = wmt14
    assert not (stubs / "downloaded").exists()
    assert "kept 200 of 201 pairs" in prep.stderr
    assert f"warning: {data / 'train.en'}: 1 line holds control characters (first: line 5, U+0092" in prep.stderr
    assert "[localp_general_feed] epoch 1 done" in train.stderr
    # the paper's settings reach fairseq: SGD on the sentence-averaged gradient, batches of
    # 128, norm 5, U[-0.1, 0.1]; with dropout 0.2: 12 epochs, lr halved from epoch 9
    cfg = torch.load(work / "systems" / "localp_general_feed" / "checkpoints" / "checkpoint_last.pt",
                     weights_only=True)["cfg"]
    assert option(cfg, "optimizer", "optimizer") == "sgd" and cfg["optimization"]["lr"] == [1.0]
    assert cfg["optimization"]["sentence_avg"] and cfg["dataset"]["batch_size"] == 128
    assert cfg["optimization"]["clip_norm"] == 5 and cfg["optimization"]["max_epoch"] == 12
    assert cfg["lr_scheduler"]["force_anneal"] == 9 and cfg["lr_scheduler"]["lr_shrink"] == 0.5
    assert option(cfg, "model", "init_uniform") == 0.1 and option(cfg, "model", "dropout") == 0.2
    assert option(cfg, "model", "reverse_source") and option(cfg, "model", "_name") == "luong_localp"
    # with the untokenized reference: the paper's tokenized BLEU and sacreBLEU on detokenized text
    raw = work / "raw_ref.de"
    raw.write_text((data / "newstest2014.de").read_text(encoding="utf-8").replace(" ,", ","))
    row = work / "rows" / "t4_localp_general"
    recipe("wmt14_en_de", *opts, "translate", "t4_localp_general", path_prefix=str(stubs))
    gold = gold_from_model(data, work, tmp_path / "gold.de-en")
    ev = recipe("wmt14_en_de", *opts, "--raw-ref", raw, "--gold-align", gold, "--gold-text", data / "newstest2014",
                "eval", "t4_localp_general", path_prefix=str(stubs))
    assert "tokenized BLEU (as the paper)" in ev.stderr and "sacreBLEU on detokenized text" in ev.stderr
    tok = json.loads((row / "test.tok_bleu.json").read_text())
    assert "tok:none" in tok["signature"]
    # AER (Table 6) against gold links with German first: the model's own links give 0
    assert "t4_localp_general: AER = 0.0000  (precision 1.0000, recall 1.0000; 12 sentences" in ev.stderr

    # unk replacement with the dictionary: the same beam-search output, each <unk> now the
    # dictionary's translation of a word of its source sentence, also of source words
    # outside the vocabulary (read from the text)
    vocab_en = set((data / "vocab.50K.en").read_text(encoding="utf-8").split())
    sources = (data / "newstest2014.en").read_text(encoding="utf-8").splitlines()
    plain = (row / "test.hyp").read_text(encoding="utf-8").splitlines()
    replaced = (row / "test.unk.hyp").read_text(encoding="utf-8").splitlines()
    assert len(plain) == len(replaced) == 12
    unks = oov = 0
    for src, p_line, r_line in zip(sources, plain, replaced):
        assert len(p_line.split()) == len(r_line.split())
        for p_tok, r_tok in zip(p_line.split(), r_line.split()):
            if p_tok == "<unk>":
                unks += 1
                assert r_tok.startswith("DE_") and r_tok[3:] in src.split(), (r_tok, src)
                oov += r_tok[3:] not in vocab_en
            else:
                assert r_tok == p_tok
    assert unks > 0 and oov > 0

    # the table: scores, AER beside the paper's, BLEU by source length of both outputs
    proc = recipe("wmt14_en_de", *opts, "table", path_prefix=str(stubs))
    results = table_rows((work / "results.md").read_text(encoding="utf-8"))
    header, cells = results["row"], results["t4_localp_general"]
    assert dict(zip(header, cells))["AER"] == "0.0000" and dict(zip(header, cells))["paper AER"] == "0.36"
    assert dict(zip(header, cells))["tokenized BLEU"] == f"{tok['score']:.2f}"
    by_length = table_rows((work / "bleu_by_length.md").read_text(encoding="utf-8"))
    assert by_length["source words"][2:] == ["t4_localp_general", "t4_localp_general+unk"]
    assert by_length["all"][1:3] == ["12", f"{tok['score']:.2f}"]
    png_size(work / "bleu_by_length.png")
    assert str(work / "bleu_by_length.png") in proc.stderr

    # without the untokenized reference (cached steps): says how to get it, downloads nothing
    ev = recipe("wmt14_en_de", *opts, "eval", "t4_localp_general", path_prefix=str(stubs))
    assert "--raw-ref" in ev.stderr and "translating" not in ev.stderr
    assert not (stubs / "downloaded").exists()
    assert "tok:13a" in json.loads((row / "test.sacrebleu.json").read_text())["signature"]

    # without the dictionary: the attended source word itself, with a message
    (data / "dict.en-de").rename(tmp_path / "dict.en-de")
    try:
        tr = recipe("wmt14_en_de", *opts, "translate", "t4_localp_general", path_prefix=str(stubs))
    finally:
        (tmp_path / "dict.en-de").rename(data / "dict.en-de")
    assert "unk replacement copies the attended source word" in tr.stderr
    copied = (row / "test.unk.hyp").read_text(encoding="utf-8").splitlines()
    assert [line.replace("DE_", "") for line in replaced] == copied


def test_wmt14_names_missing_file(wmt14, tmp_path):
    data, work, opts, stubs, _, _ = wmt14
    partial = tmp_path / "release"
    partial.mkdir()
    for f in data.iterdir():
        if f.name not in ("vocab.50K.de", "dict.en-de"):
            (partial / f.name).symlink_to(f)
    proc = recipe("wmt14_en_de", "--data-dir", partial, "--work-dir", tmp_path / "w", "prepare",
                  check=False, path_prefix=str(stubs))
    assert proc.returncode == 1
    assert f"{partial}/vocab.50K.de not found" in proc.stderr and "nlp.stanford.edu" in proc.stderr
    # the dictionary is optional: unk replacement copies source words without it
    assert f"no {partial}/dict.en-de: unk replacement will copy the attended source word" in proc.stderr
    assert not (stubs / "downloaded").exists()
