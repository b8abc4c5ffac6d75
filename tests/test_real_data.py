"""A tiny model on a slice of real data (Multi30k En-De): the loss falls."""
import re
import sys

import pytest

from tests.helpers import SHARED_DATA, USER_DIR, cli

MULTI30K = SHARED_DATA / "multi30k_en_de"


@pytest.mark.skipif(not MULTI30K.exists(), reason=f"{MULTI30K} not found (shared/ beside the checkout)")
def test_loss_falls_on_multi30k_slice(tmp_path):
    for split, n in (("train", 3000), ("valid", 200)):
        for lang in ("en", "de"):
            lines = (MULTI30K / f"{split}.{lang}").read_text(encoding="utf-8").splitlines()[:n]
            # lowercase, split off punctuation: word-level vocabulary for a tiny model
            text = "\n".join(" ".join(re.findall(r"\w+|[^\w\s]", s.lower())) for s in lines)
            (tmp_path / f"{split}.{lang}").write_text(text + "\n", encoding="utf-8")
    # fairseq's commands in this process (tests/helpers.py's cli): what they print and log
    cli("preprocess", ["-s", "en", "-t", "de", "--trainpref", str(tmp_path / "train"),
                       "--validpref", str(tmp_path / "valid"), "--destdir", str(tmp_path / "bin"),
                       "--thresholdsrc", "2", "--thresholdtgt", "2", "--workers", "1"])
    proc = cli("train", [str(tmp_path / "bin"), "--user-dir", USER_DIR,
                         "--arch", "luong_localp", "--encoder-embed-dim", "64", "--encoder-hidden-size", "64",
                         "--decoder-embed-dim", "64", "--decoder-hidden-size", "64", "--dropout", "0.1",
                         "--optimizer", "adam", "--lr", "0.003", "--clip-norm", "1", "--max-tokens", "2000",
                         "--max-epoch", "2", "--save-dir", str(tmp_path / "ckpt"), "--no-save",
                         "--log-format", "simple", "--log-interval", "5", "--num-workers", "0", "--seed", "1"])
    log = proc.stdout + proc.stderr
    valid = [float(x) for x in re.findall(r"valid on 'valid' subset \| loss ([\d.]+)", log)]
    train = [float(x) for x in re.findall(r"train_inner .* loss=([\d.]+)", log)]
    assert len(valid) == 2 and len(train) >= 4, log[-2000:]
    assert train[-1] < train[0] - 1.0, train
    assert valid[1] < valid[0], valid
    print(f"multi30k slice: train loss {train[0]:.2f} -> {train[-1]:.2f}, valid {valid}", file=sys.stderr)
