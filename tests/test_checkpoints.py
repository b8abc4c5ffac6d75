"""Checkpoints load under torch's weights_only=True with exactly fairseq's globals allowlisted;
anything else is refused with a clear error; fairseq's final-batch bug is fixed."""
import argparse
import fractions
import pickle

import numpy as np
import pytest
import torch
from fairseq import checkpoint_utils
from fairseq.data import data_utils

import fairseq_luong  # noqa: F401  (allowlists, wraps the loader)
from fairseq_luong.fairseq_patches.checkpoints import CheckpointLoadError


def test_fairseq_checkpoint_contents_load_with_weights_only(tmp_path):
    path = tmp_path / "ckpt.pt"
    state = {
        "args": argparse.Namespace(arch="luong_localp", lr=[0.1]),
        "model": {"w": torch.randn(3)},
        # what --eval-bleu leaves in the logged metrics
        "extra_state": {"metrics": {"_bleu_counts": np.array([3, 2, 1, 0], dtype=np.int64)}},
    }
    torch.save(state, path)
    loaded = torch.load(path)  # the default: weights_only=True
    assert loaded["args"].arch == "luong_localp"
    assert loaded["extra_state"]["metrics"]["_bleu_counts"].tolist() == [3, 2, 1, 0]
    assert loaded["args"].lr == [0.1]  # real checkpoints load in the CLI tests


def test_a_checkpoint_with_any_other_global_is_refused(tmp_path):
    path = tmp_path / "crafted.pt"
    torch.save({"args": argparse.Namespace(), "payload": fractions.Fraction(1, 3)}, path)
    with pytest.raises(pickle.UnpicklingError, match="fractions.Fraction"):
        torch.load(path)
    with pytest.raises(CheckpointLoadError, match=f"refusing to load checkpoint {path}"):
        checkpoint_utils.load_checkpoint_to_cpu(str(path))


def test_crafted_pickle_calling_a_function_is_refused(tmp_path):
    """A pickle that would run os.system on load never gets to run it."""

    class Evil:
        def __reduce__(self):
            import os

            return (os.system, ("echo pwned > " + str(tmp_path / "pwned"),))

    path = tmp_path / "evil.pt"
    torch.save({"x": Evil()}, path)
    with pytest.raises(CheckpointLoadError) as err:
        checkpoint_utils.load_checkpoint_to_cpu(str(path))
    assert not (tmp_path / "pwned").exists()
    # names the refused global; never repeats torch's advice that weights_only=False "will likely succeed"
    assert str(err.value).startswith(f"refusing to load checkpoint {path}: it holds posix.system,")
    assert "likely succeed" not in str(err.value) and "weights_only=False" not in str(err.value)


def test_user_error_reaches_the_terminal_as_one_line(capsys, monkeypatch):
    import sys

    from fairseq_luong.errors import UserError

    monkeypatch.setattr(sys, "argv", ["fairseq-generate"])
    monkeypatch.delenv("FAIRSEQ_LUONG_TRACEBACK", raising=False)
    try:
        try:
            raise KeyError("inner")
        except KeyError as inner:
            raise CheckpointLoadError("cannot load checkpoint x.pt: what to do") from inner
    except UserError:
        sys.excepthook(*sys.exc_info())
    assert capsys.readouterr().err == "fairseq-generate: error: cannot load checkpoint x.pt: what to do\n"


def test_no_weights_only_false_anywhere_in_the_plugin():
    from pathlib import Path

    root = Path(fairseq_luong.__file__).parent
    for f in list(root.rglob("*.py")) + list((root.parent / "scripts").rglob("*.py")):
        assert "weights_only=False" not in f.read_text(), f


@pytest.mark.parametrize("n,max_tokens,max_sentences", [(12, None, 5), (12, None, 1), (100, 500, None), (37, 60, 10)])
def test_batch_by_size_keeps_the_final_partial_batch(n, max_tokens, max_sentences):
    sizes = np.sort(np.random.RandomState(n).randint(2, 30, n))
    batches = data_utils.batch_by_size(
        np.arange(n, dtype=np.int64), num_tokens_fn=lambda i: sizes[i], num_tokens_vec=sizes,
        max_tokens=max_tokens, max_sentences=max_sentences, required_batch_size_multiple=8,
    )
    assert sorted(np.concatenate(batches).tolist()) == list(range(n))


def test_every_plugin_model_is_named_as_the_no_user_dir_hint_expects():
    """scripts/setup.sh's start-up hint recognises our models by name prefix."""
    import runpy
    from pathlib import Path

    from fairseq.models import ARCH_MODEL_REGISTRY, MODEL_REGISTRY

    hint = runpy.run_path(str(Path(fairseq_luong.__file__).parent / "fairseq_patches" / "no_user_dir_hint.py"))
    ours = [name for name, cls in {**ARCH_MODEL_REGISTRY, **MODEL_REGISTRY}.items()
            if cls.__module__.startswith("fairseq_luong.")]
    assert len(ours) > 10
    assert all(name.startswith(hint["PLUGIN_NAME_PREFIXES"]) for name in ours), ours
