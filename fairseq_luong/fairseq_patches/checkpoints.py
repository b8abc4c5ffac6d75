"""Checkpoints: torch >= 2.6 loads fairseq's with ``weights_only=True``, and load errors say what to do.

**Safe globals.** fairseq's ``checkpoint_utils.load_checkpoint_to_cpu`` calls ``torch.load``
without ``weights_only``, so torch uses its safe unpickler, which refuses fairseq
checkpoints. A fairseq checkpoint holds, besides tensors and builtins, exactly these
globals: ``argparse.Namespace`` (the legacy ``args`` entry, and inside ``cfg``), and numpy's
``_reconstruct``, ``ndarray``, ``dtype`` and ``dtypes.Int64DType`` (arrays that
``--eval-bleu`` stores in the logged metrics). :func:`allow_checkpoint_globals` allowlists
those and nothing else; any other global is still refused. The weights-only safety is
never turned off.

**Load errors** (:func:`patch_load_errors`). fairseq's ``load_checkpoint_to_cpu`` lets a
truncated file or a refused pickle surface as a traceback from deep inside torch's
unpickler. We wrap it (every caller in fairseq looks it up on the module, so the wrapper
is seen by fairseq-train, -generate and -interactive) and raise a ``UserError`` (one line
at the terminal, see ``errors.py``) with the file name, the Python global that was
refused, and what to do; a directory given as the checkpoint is named as such (fairseq's
IsADirectoryError read as a corrupt file). ``load_model_ensemble_and_task``'s ``OSError:
Model file not found`` (a ``--path`` that does not exist) becomes one line too, saying
what the folder holds. Loading itself is unchanged, and we never repeat torch's advice to
turn the safety off.
"""
import argparse
import functools
import os
import pickle
import re
import zipfile

import numpy as np
import torch
from fairseq import checkpoint_utils

from ..errors import UserError
from .patching import wrap_once


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


def allow_checkpoint_globals():
    """torch's weights-only unpickler: allow :func:`checkpoint_safe_globals` (and nothing else)."""
    torch.serialization.add_safe_globals(checkpoint_safe_globals())


def _refused_global(text):
    """The ``module.name`` torch's weights-only unpickler refused, from its message."""
    match = re.search(r"GLOBAL ([\w.]+)", text)
    return match.group(1) if match else None


def _checkpoints(folder):
    return sorted(n for n in os.listdir(folder) if n.endswith(".pt"))


def _holds(folder):
    """What checkpoints ``folder`` holds, for messages: "holds a.pt, b.pt" or "holds no .pt file"."""
    names = _checkpoints(folder)
    if not names:
        return "holds no .pt file"
    return f"holds {', '.join(names[:5])}{' ...' if len(names) > 5 else ''}"


_WRITES = "fairseq-train writes checkpoint_best.pt, checkpoint_last.pt and checkpointN.pt into its --save-dir"


def _explain(path, err):
    if os.path.isdir(path):
        names = _checkpoints(path)
        choice = "checkpoint_best.pt" if "checkpoint_best.pt" in names else names[0] if names else None
        advice = (f"give a checkpoint in it, e.g. {os.path.join(path, choice)}" if choice
                  else f"give a checkpoint file ({_WRITES})")
        return f"{path} is a directory, not a checkpoint file (it {_holds(path)}): {advice}"
    text = str(err)
    if "Weights only load failed" in text or "Unsupported global" in text:
        name = _refused_global(text) or "an object torch does not allow"
        return (
            f"refusing to load checkpoint {path}: it holds {name}, which fairseq checkpoints "
            "never contain (torch loads checkpoints with weights_only=True; fairseq_luong allows "
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


def _explained_errors(load):
    @functools.wraps(load)
    def load_checkpoint_to_cpu(path, *args, **kwargs):
        try:
            return load(path, *args, **kwargs)
        except (pickle.UnpicklingError, EOFError, zipfile.BadZipFile, RuntimeError, OSError) as err:
            if isinstance(err, (UserError, FileNotFoundError, PermissionError)):
                raise
            raise CheckpointLoadError(_explain(path, err)) from err

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
            there = _holds(folder) if os.path.isdir(folder) else "does not exist"
            raise CheckpointLoadError(
                f"no checkpoint {path} ({folder} {there}): check --path; {_WRITES}"
            ) from err

    return load_model_ensemble_and_task


def patch_load_errors():
    """``load_checkpoint_to_cpu`` and ``load_model_ensemble_and_task``: a checkpoint that
    cannot be loaded, or is not there, is a one-line ``CheckpointLoadError``."""
    wrap_once(checkpoint_utils, "load_checkpoint_to_cpu", _explained_errors)
    wrap_once(checkpoint_utils, "load_model_ensemble_and_task", _named_missing_file)
