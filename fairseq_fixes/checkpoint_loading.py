"""Checkpoints: loaded with ``weights_only=True`` whatever the environment says, and anything
that is not one, or cannot be loaded, is one line that says what to do.

**Safe globals.** fairseq's ``checkpoint_utils.load_checkpoint_to_cpu`` calls ``torch.load``
without ``weights_only``, so torch >= 2.6 uses its safe unpickler, which refuses fairseq
checkpoints. A fairseq checkpoint holds, besides tensors and builtins, exactly these
globals: ``argparse.Namespace`` (the legacy ``args`` entry, and inside ``cfg``), and numpy's
``_reconstruct``, ``ndarray``, ``dtype`` and ``dtypes.Int64DType`` (arrays that
``--eval-bleu`` stores in the logged metrics). :func:`allow_checkpoint_globals` allowlists
those and nothing else; any other global is still refused.

**Safe loading whatever the environment says** (:func:`patch_safe_loading`). fairseq 0.12
leaves ``weights_only`` to torch's default, so ``TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD=1`` (often
suggested for fairseq on newer torch) turned the safety off: a malicious checkpoint's code ran,
and fairseq-generate exited 0. fairseq's ``main`` since 3d262bb2 ("Pt2.6 compatibility", pull
request #5611, 2025-09) turns ``weights_only`` off itself: every checkpoint is unpickled in
full. The ``torch.load`` that fairseq's ``load_checkpoint_to_cpu`` calls now gets
``weights_only=True`` either way (torch lets the variable override only a call that does not
say); every other ``torch.load`` is left as it is (``load_ema_from_checkpoint``, which ``--ema``
resumes with, among them).

**Not a checkpoint, or not loadable** (:func:`patch_load_errors`). A text file, JSON, random
bytes or an empty file given as the checkpoint gave a ``KeyError``, ``IndexError`` or
``UnicodeDecodeError`` traceback from torch's unpickler, or the misleading "it holds an
object torch does not allow"; a ``torch.save(model.state_dict())`` file gave ``KeyError:
'best_loss'``; a truncated file or a refused pickle a traceback from deep inside torch. We
look at the file before torch reads it (a file ``torch.save`` writes is a zip archive, or,
in torch's legacy format, a pickle), check that what torch read is what fairseq-train saves
(a dict with the weights, ``model``, and their config, ``cfg``), and raise a ``UserError``
(one line at the terminal, see ``errors.py``) naming the file and what it is; a refused
pickle names the Python global that was refused, a directory what it holds.
``load_model_ensemble_and_task``'s ``OSError: Model file not found`` (a ``--path`` that does
not exist) becomes one line too, saying what the folder holds. We never repeat torch's
advice to turn the safety off.
"""
import argparse
import contextvars
import functools
import os
import pickle
import re
import zipfile

import numpy as np
import torch
from fairseq import checkpoint_utils

from .errors import UserError
from .option_names import in_python_call
from .patching import FIX, patch, wrap_once


class CheckpointLoadError(UserError):
    """A checkpoint file exists but cannot be loaded."""


def _numpy_reconstruct():
    # numpy >= 2 moved the pickled name to numpy._core; keep both spellings.
    core = getattr(np, "_core", None) or np.core
    return core.multiarray._reconstruct


def checkpoint_safe_globals():
    """The exact list of non-tensor globals a fairseq checkpoint may hold."""
    return [
        argparse.Namespace,
        _numpy_reconstruct(),
        np.ndarray,
        np.dtype,
        np.dtypes.Int64DType,
    ]


@patch(FIX, "torch's weights-only loading of every fairseq checkpoint: exactly the globals they hold")
def allow_checkpoint_globals():
    """torch's weights-only unpickler: allow :func:`checkpoint_safe_globals` (and nothing else)."""
    torch.serialization.add_safe_globals(checkpoint_safe_globals())


def _refused_global(text):
    """The ``module.name`` torch's weights-only unpickler refused, from its message."""
    match = re.search(r"GLOBAL ([\w.]+)", text)
    return match.group(1) if match else None


def _checkpoints(folder):
    return sorted(n for n in os.listdir(folder) if n.endswith(".pt"))


def folder_holds(folder):
    """What checkpoints ``folder`` holds, for messages: "holds a.pt, b.pt" or "holds no .pt file"."""
    names = _checkpoints(folder)
    if not names:
        return "holds no .pt file"
    return f"holds {', '.join(names[:5])}{' ...' if len(names) > 5 else ''}"


_WRITES = "fairseq-train writes checkpoint_best.pt, checkpoint_last.pt and checkpointN.pt into its --save-dir"
_ZIP = b"PK\x03\x04"  # torch.save's format since torch 1.6
_PICKLE_PROTOCOLS = tuple(bytes([0x80, n]) for n in range(2, 6))  # torch's legacy format starts with a pickle
_LEGACY_MAGIC = b"\x8a\nl\xfc\x9cF\xf9 j\xa8P\x19"  # ... of torch's magic number, pickled first
_LOADING = contextvars.ContextVar("fairseq_fixes_loading_checkpoint", default=None)  # the path being loaded


def _not_a_checkpoint(path, what):
    return CheckpointLoadError(f"{path} is not a checkpoint: {what}; give a checkpoint file ({_WRITES})")


def _looks_like(head):
    """What a file that torch cannot read as a checkpoint is, from its first bytes."""
    if head.startswith(_PICKLE_PROTOCOLS):
        return "it is a Python pickle without torch's header, not a file torch.save writes"
    try:
        text = head.decode("utf-8")
    except UnicodeDecodeError as err:
        if err.start < len(head) - 3:  # not just a character cut at the end of the bytes read
            return f"it holds bytes that are neither a zip archive nor a pickle (it starts with {head[:8].hex(' ')})"
        text = head[:err.start].decode("utf-8")
    kind = "JSON" if text.lstrip()[:1] in ("{", "[") else "text"
    start = " ".join(text.split())[:40]
    return f"it holds {kind} (it starts with {start!r})"


def _is_legacy_torch(head):
    return head.startswith(_PICKLE_PROTOCOLS) and _LEGACY_MAGIC in head[:32]


def check_is_torch_file(path):
    """Raise CheckpointLoadError when the local file ``path`` cannot be one ``torch.save`` wrote."""
    if not os.path.isfile(path):
        return  # a directory, a missing or remote file: named where fairseq opens it
    with open(path, "rb") as f:
        head = f.read(64)
    if not head:
        raise _not_a_checkpoint(path, "the file is empty (0 bytes)")
    if not head.startswith(_ZIP) and not _is_legacy_torch(head):
        raise _not_a_checkpoint(path, _looks_like(head))
    if zipfile.is_zipfile(path):  # whole: torch's archive holds ARCHIVE/data.pkl
        with zipfile.ZipFile(path) as archive:
            names = archive.namelist()
        if not any(name.endswith("data.pkl") for name in names):
            raise _not_a_checkpoint(path, f"it is a zip archive of {len(names)} file(s) without torch's data.pkl")


def check_holds_checkpoint(path, state):
    """Raise CheckpointLoadError when what torch read from ``path`` is not a fairseq checkpoint:
    a dict with the weights (``model``) and their config (``cfg``, or ``args`` in old ones)."""
    if not isinstance(state, dict):
        raise _not_a_checkpoint(path, f"torch reads a {type(state).__name__} from it, not the dict fairseq-train "
                                      "saves (the weights, 'model', beside their config, 'cfg')")
    if "model" not in state:
        if state and all(isinstance(v, torch.Tensor) for v in state.values()):
            what = (f"it holds {len(state)} tensors and no config (torch.save(model.state_dict()) writes such a "
                    "file), not the dict fairseq-train saves (the weights, 'model', beside their config, 'cfg')")
        else:
            keys = ", ".join(map(repr, list(state)[:5])) or "none"
            what = f"it holds a dict without 'model' (its keys: {keys})"
        raise _not_a_checkpoint(path, what)
    if state.get("cfg") is None and state.get("args") is None:
        raise _not_a_checkpoint(path, "it holds weights ('model') but not the config that builds their model "
                                      "('cfg')")


def _explain(path, err):
    if os.path.isdir(path):
        names = _checkpoints(path)
        choice = "checkpoint_best.pt" if "checkpoint_best.pt" in names else names[0] if names else None
        where = "checkpoint_file= a checkpoint" if in_python_call() else "a checkpoint"
        advice = (f"give {where} in it, e.g. {os.path.join(path, choice)}" if choice
                  else f"give a checkpoint file ({_WRITES})")
        return f"{path} is a directory, not a checkpoint file (it {folder_holds(path)}): {advice}"
    text = str(err)
    name = _refused_global(text)
    if name:
        return (
            f"refusing to load checkpoint {path}: it holds {name}, which fairseq checkpoints "
            "never contain (torch loads checkpoints with weights_only=True; fairseq_fixes allows "
            "only argparse.Namespace and the numpy types fairseq stores besides tensors). "
            "Do not load it unless you made it yourself; then save its tensors and config again "
            "without that object"
        )
    first = text.splitlines()[0] if text else ""
    return (
        f"cannot load checkpoint {path}: {type(err).__name__}: {first}. "
        "The file is truncated or corrupt (was training killed while saving?). "
        "Use another checkpoint from the same directory (checkpointN.pt, checkpoint_best.pt)"
    )


def _weights_only_for_checkpoints(load):
    @functools.wraps(load)
    def wrapper(f, *args, **kwargs):
        path = _LOADING.get()
        if path is None:  # not fairseq's load_checkpoint_to_cpu: torch.load as it is
            return load(f, *args, **kwargs)
        try:
            state = load(f, *args, **dict(kwargs, weights_only=True))
        except (UserError, MemoryError):
            raise
        except Exception as err:  # KeyError, IndexError, UnicodeDecodeError, ... from torch's unpickler
            raise CheckpointLoadError(_explain(path, err)) from err
        check_holds_checkpoint(path, state)
        return state

    return wrapper


def _explained_errors(load):
    @functools.wraps(load)
    def load_checkpoint_to_cpu(path, *args, **kwargs):
        check_is_torch_file(path)
        token = _LOADING.set(str(path))  # the torch.load inside: weights_only=True, its errors explained
        try:
            return load(path, *args, **kwargs)
        except (pickle.UnpicklingError, EOFError, zipfile.BadZipFile, RuntimeError, OSError) as err:
            if isinstance(err, (UserError, FileNotFoundError, PermissionError)):
                raise
            raise CheckpointLoadError(_explain(path, err)) from err
        finally:
            _LOADING.reset(token)

    return load_checkpoint_to_cpu


def _named_missing_file(load_ensemble):
    @functools.wraps(load_ensemble)
    def load_model_ensemble_and_task(filenames, *args, **kwargs):
        try:
            return load_ensemble(filenames, *args, **kwargs)
        except OSError as err:
            prefix = "Model file not found: "
            if isinstance(err, UserError) or not str(err).startswith(prefix):
                raise
            path = str(err)[len(prefix):]
            folder = os.path.dirname(path) or "."
            there = folder_holds(folder) if os.path.isdir(folder) else "does not exist"
            given = "the folder and checkpoint_file" if in_python_call() else "--path"
            raise CheckpointLoadError(f"no checkpoint {path} ({folder} {there}): check {given}; {_WRITES}") from err

    return load_model_ensemble_and_task


@patch(FIX, "load_checkpoint_to_cpu, for every checkpoint: weights_only=True whatever the environment says")
def patch_safe_loading():
    """``torch.load`` called by fairseq's ``load_checkpoint_to_cpu``: ``weights_only=True``,
    whatever ``TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD`` says; any other call: as it is."""
    wrap_once(torch, "load", _weights_only_for_checkpoints)


@patch(FIX, "a checkpoint that does not load (missing, cut short, refused, not a checkpoint), for every model: "
       "one line where fairseq's traceback was")
def patch_load_errors():
    """``load_checkpoint_to_cpu`` and ``load_model_ensemble_and_task``: a file that is not a
    checkpoint, a checkpoint that cannot be loaded, or one that is not there, is a one-line
    ``CheckpointLoadError``."""
    wrap_once(checkpoint_utils, "load_checkpoint_to_cpu", _explained_errors)
    wrap_once(checkpoint_utils, "load_model_ensemble_and_task", _named_missing_file)
