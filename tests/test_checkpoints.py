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
from fairseq_fixes.checkpoint_loading import CheckpointLoadError


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


def test_a_malicious_checkpoint_is_refused_whatever_torch_force_no_weights_only_load_says(tmp_path, monkeypatch):
    """TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD=1 turns torch's default to weights_only=False: fairseq's
    own load_checkpoint_to_cpu ran the pickle's code. The plugin's loading says weights_only=True
    itself, so the code never runs; a torch.load elsewhere is left as the caller wrote it."""

    class Evil:
        def __reduce__(self):
            import os

            return (os.system, ("echo pwned > " + str(tmp_path / "pwned"),))

    monkeypatch.setenv("TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD", "1")
    path = tmp_path / "evil.pt"
    torch.save({"model": {}, "cfg": {}, "x": Evil()}, path)
    with pytest.raises(CheckpointLoadError, match=rf"^refusing to load checkpoint {path}: it holds posix.system,"):
        checkpoint_utils.load_checkpoint_to_cpu(str(path))
    assert not (tmp_path / "pwned").exists()
    # a torch.load outside fairseq's loader: as it is (here the variable's default, weights_only=False)
    torch.save({"payload": fractions.Fraction(1, 3)}, tmp_path / "fraction.pt")
    assert torch.load(tmp_path / "fraction.pt")["payload"] == fractions.Fraction(1, 3)


def test_fairseq_mains_own_weights_only_off_is_turned_back_on(tmp_path):
    """fairseq's main since 3d262bb2 (pull request #5611) calls torch.load in load_checkpoint_to_cpu
    with weights_only=False: every checkpoint unpickled in full. Around that function (as fairseq
    main writes it), the fix's torch.load still loads with weights_only=True: the code never runs."""
    from fairseq_fixes.checkpoint_loading import _explained_errors

    class Evil:
        def __reduce__(self):
            import os

            return (os.system, ("echo pwned > " + str(tmp_path / "pwned"),))

    def load_checkpoint_to_cpu_of_fairseq_main(path, arg_overrides=None, load_on_all_ranks=False):
        with open(path, "rb") as f:
            return torch.load(f, map_location=torch.device("cpu"), weights_only=False)

    path = tmp_path / "evil.pt"
    torch.save({"model": {}, "cfg": {}, "x": Evil()}, path)
    with pytest.raises(CheckpointLoadError, match=rf"^refusing to load checkpoint {path}: it holds posix.system,"):
        _explained_errors(load_checkpoint_to_cpu_of_fairseq_main)(str(path))
    assert not (tmp_path / "pwned").exists()
    _fairseq_checkpoint(tmp_path / "good.pt")  # and a fairseq checkpoint loads
    assert _explained_errors(load_checkpoint_to_cpu_of_fairseq_main)(str(tmp_path / "good.pt"))["model"]["w"].sum() == 2


def _fairseq_checkpoint(path):
    """What fairseq-train saves, in the smallest form fairseq's loader takes."""
    torch.save({"cfg": {"model": {}, "task": {}}, "model": {"w": torch.ones(2)}, "extra_state": {},
                "optimizer_history": [{"criterion_name": "x", "optimizer_name": "y", "num_updates": 3,
                                       "lr_scheduler_state": {"best": None}}]}, path)


def test_a_checkpoint_loads_with_the_variable_set(tmp_path, monkeypatch):
    monkeypatch.setenv("TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD", "1")
    _fairseq_checkpoint(tmp_path / "ok.pt")
    state = checkpoint_utils.load_checkpoint_to_cpu(str(tmp_path / "ok.pt"))
    assert state["model"]["w"].tolist() == [1.0, 1.0]


def _write(path, kind):
    if kind == "zip archive":
        import zipfile

        with zipfile.ZipFile(path, "w") as archive:
            archive.writestr("notes.txt", "hello")
    elif kind == "state dict":
        torch.save({"w": torch.zeros(2), "b": torch.zeros(1)}, path)
    elif kind == "list":
        torch.save([1, 2], path)
    elif kind == "weights without config":
        torch.save({"model": {"w": torch.zeros(2)}}, path)
    elif kind == "python pickle":
        with open(path, "wb") as f:
            pickle.dump({"model": {}}, f, protocol=4)
    else:
        path.write_bytes({"text": b"hello world\nsecond line\n", "json": b'{"model": "x", "cfg": {}}\n',
                          "random bytes": bytes(np.random.RandomState(0).randint(0, 256, 3000, dtype=np.uint8)),
                          "empty": b""}[kind])


NOT_A_CHECKPOINT = {
    "text": "it holds text (it starts with 'hello world second line')",
    "json": """it holds JSON (it starts with '{"model": "x", "cfg": {}}')""",
    "random bytes": "it holds bytes that are neither a zip archive nor a pickle (it starts with ac 0a 7f 8c 2f aa c4 "
                    "97)",
    "empty": "the file is empty (0 bytes)",
    "python pickle": "it is a Python pickle without torch's header, not a file torch.save writes",
    "zip archive": "it is a zip archive of 1 file(s) without torch's data.pkl",
    "state dict": "it holds 2 tensors and no config (torch.save(model.state_dict()) writes such a file), not the dict "
                  "fairseq-train saves (the weights, 'model', beside their config, 'cfg')",
    "list": "torch reads a list from it, not the dict fairseq-train saves (the weights, 'model', beside their config, "
            "'cfg')",
    "weights without config": "it holds weights ('model') but not the config that builds their model ('cfg')",
}


@pytest.mark.parametrize("kind", sorted(NOT_A_CHECKPOINT))
def test_a_file_that_is_not_a_checkpoint_is_named_as_such(tmp_path, kind):
    """Text, JSON, random bytes or an empty file gave a KeyError, IndexError or UnicodeDecodeError
    from torch's unpickler, or "it holds an object torch does not allow"; a state dict KeyError:
    'best_loss' from fairseq."""
    path = tmp_path / "model.pt"
    _write(path, kind)
    with pytest.raises(CheckpointLoadError) as err:
        checkpoint_utils.load_checkpoint_to_cpu(str(path))
    assert str(err.value) == (f"{path} is not a checkpoint: {NOT_A_CHECKPOINT[kind]}; give a checkpoint file "
                              "(fairseq-train writes checkpoint_best.pt, checkpoint_last.pt and checkpointN.pt into "
                              "its --save-dir)")


def test_a_truncated_checkpoint_is_named_as_one(tmp_path):
    _fairseq_checkpoint(tmp_path / "whole.pt")
    data = (tmp_path / "whole.pt").read_bytes()
    (tmp_path / "cut.pt").write_bytes(data[: len(data) // 2])
    with pytest.raises(CheckpointLoadError, match=rf"^cannot load checkpoint {tmp_path / 'cut.pt'}: RuntimeError: .*"
                                                  r"The file is truncated or corrupt"):
        checkpoint_utils.load_checkpoint_to_cpu(str(tmp_path / "cut.pt"))


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


def test_no_weights_only_false_anywhere_in_the_plugin_or_the_fixes():
    from pathlib import Path

    root = Path(fairseq_luong.__file__).parent
    for f in [*root.rglob("*.py"), *(root.parent / "fairseq_fixes").rglob("*.py"),
              *(root.parent / "scripts").rglob("*.py")]:
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
