"""Checkpoint files are written whole or not at all.

**A disk that fills while saving** (fairseq 0.12 and main): an ``OSError`` traceback (after
three tries 2.5 s apart, each logged with its traceback) and a stray ``checkpoint*.pt.tmp``;
the copies fairseq makes of the first file (``checkpoint_last.pt``, ``checkpoint_best.pt``)
are written in place, so a full disk during a copy leaves that checkpoint half-written. When
the space runs out inside torch's zip writer, the error is a ``RuntimeError: [enforce fail at
inline_container.cc:672] . unexpected pos ...`` traceback instead. Every checkpoint file is
now written to ``NAME.tmp`` and renamed over NAME only when complete; on a write error (either
kind) the ``.tmp`` is removed and the run stops with one line saying that the previous
checkpoints are intact.

``checkpoint_utils.torch_persistent_save`` is wrapped; the copies go through
``checkpoint_utils.PathManager.copy``, a static method of a class fairseq imported into the
module, so that name is replaced by a subclass whose copy writes whole files
(:class:`WholeCopies`).
"""
import errno
import functools
import os
import shutil

import torch
from fairseq import checkpoint_utils
from fairseq.file_io import PathManager

from .errors import UserError
from .patching import FIX, patch, replace, wrap_once


def _cannot_save(path, err):
    folder = os.path.dirname(path) or "."
    kept = sorted(f for f in os.listdir(folder) if f.endswith(".pt")) if os.path.isdir(folder) else []
    if "checkpoint_last.pt" in kept:
        resume = "run the same command to resume from checkpoint_last.pt"
    elif kept:
        newest = max(kept, key=lambda f: os.path.getmtime(os.path.join(folder, f)))
        resume = f"resume from the newest with --restore-file {os.path.join(folder, newest)}"
    else:
        resume = "run the same command again"
    return UserError(f"cannot write checkpoint {path}: {err.strerror or err}; nothing half-written is left, "
                     f"and {folder} keeps the checkpoints saved before ({', '.join(kept) or 'none yet'}): free "
                     f"space (or give another --save-dir), then {resume}")


# torch.save writes through its zip writer (PyTorchStreamWriter), which reports a write that
# failed (a full disk, a file-size limit) as a RuntimeError ("[enforce fail at
# inline_container.cc:672] . unexpected pos 704 vs 598"), not as the OSError of a plain write
_ZIP_WRITE_FAILED = ("inline_container.cc", "PytorchStreamWriter failed")
_NEARLY_FULL = 64 * 2 ** 20  # bytes free below which a failed write is put down to a full disk


def _as_write_error(err, folder):
    """The OSError a failed write of torch's zip writer stands for (None: another RuntimeError)."""
    if not any(mark in str(err) for mark in _ZIP_WRITE_FAILED):
        return None
    try:
        full = shutil.disk_usage(folder).free < _NEARLY_FULL
    except OSError:
        full = False
    if full:
        return OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    return OSError(errno.EIO, f"the write failed inside torch's zip writer ({str(err).splitlines()[0]})")


def _write_whole(path, write):
    """write(PATH.tmp), then rename it over PATH; when the write fails (an OSError, or torch's
    zip writer's RuntimeError), no PATH.tmp is left and the error is one line."""
    tmp = path + ".tmp"
    try:
        write(tmp)
        os.replace(tmp, path)
    except (OSError, RuntimeError) as e:
        failed = e if isinstance(e, OSError) else _as_write_error(e, os.path.dirname(os.path.abspath(path)))
        if failed is None:
            raise
        if failed is not e:
            failed.__cause__ = e
        if os.path.exists(tmp):
            os.remove(tmp)
        raise _cannot_save(path, failed) from failed


def _whole_save(persistent_save):
    @functools.wraps(persistent_save)
    def torch_persistent_save(obj, filename, async_write: bool = False):
        if async_write or "://" in str(filename):
            return persistent_save(obj, filename, async_write=async_write)

        def write(tmp):
            with open(tmp, "wb") as f:
                torch.save(obj, f)

        _write_whole(filename, write)

    return torch_persistent_save


class WholeCopies(PathManager):
    """fairseq's PathManager, whose copy (checkpoint_last.pt, checkpoint_best.pt from the
    first file saved) writes a whole file or none."""

    @staticmethod
    def copy(src_path, dst_path, overwrite=False):
        if "://" in str(src_path) + str(dst_path):
            return PathManager.copy(src_path, dst_path, overwrite=overwrite)
        _write_whole(dst_path, lambda tmp: shutil.copyfile(src_path, tmp))
        return True


@patch(FIX, "fairseq-train's checkpoint writes, for every model: whole files or none, a full disk in one line")
def patch_whole_checkpoints():
    """``torch_persistent_save`` and checkpoint_utils' copies: whole files or none."""
    wrap_once(checkpoint_utils, "torch_persistent_save", _whole_save)
    if checkpoint_utils.PathManager is PathManager:  # not another package's replacement
        replace(checkpoint_utils, "PathManager", WholeCopies)
