"""Faults of long training runs: a clear line each, and no checkpoint lost.

What fairseq-train does, and what we do instead:

* **Two trainings into one --save-dir** overwrite each other's checkpoints; one dies with
  ``FileNotFoundError`` and the other's folder holds a mix of both runs. The training
  process (its first rank) now holds a lock on ``SAVE_DIR/.fairseq_luong.lock``
  (``fcntl.flock``: the system releases it when the process ends, however it ends, so a
  crashed or killed run leaves nothing stuck); a second training into the folder is refused.
* **--save-dir naming a file**: ``NotADirectoryError`` after a warning. Refused before
  any work.
* **--restore-file that is not there** (fairseq reads it from the current folder, not from
  --save-dir): training starts from scratch without a word; ``--finetune-from-model``:
  a ``ValueError`` traceback. Both refused before any work, naming the file in --save-dir
  when that is what was meant.
* **A disk that fills while saving**: an ``OSError`` traceback (after three tries 2.5 s
  apart, each logged with its traceback) and a stray ``checkpoint*.pt.tmp``; the copies
  fairseq makes of the first file (``checkpoint_last.pt``, ``checkpoint_best.pt``) are
  written in place, so a full disk during a copy leaves that checkpoint half-written.
  When the space runs out inside torch's zip writer, the error is a ``RuntimeError:
  [enforce fail at inline_container.cc:672] . unexpected pos ...`` traceback instead.
  Every checkpoint file is now written to ``NAME.tmp`` and renamed over NAME only when
  complete; on a write error (either kind) the ``.tmp`` is removed and the run stops with
  one line saying that the previous checkpoints are intact.
* **A diverging run**: ``FloatingPointError`` (``Minimum loss scale reached``, or
  ``gradients are Nan/Inf``) as a traceback. One line naming the last checkpoint saved
  and what to change.
* **A training that ends inside an epoch aborts at exit** (``terminate called without an
  active exception``, status 134, after "done training"): fairseq's ``BackgroundConsumer``, a
  daemon thread, is still collating the next batches when Python finalizes, and the thread
  is killed inside a torch call. Its consumers now put with a timeout and stop when asked;
  an ``atexit`` handler asks them and waits for them, before finalization.
* **Resuming into a --save-dir whose checkpoint is of another architecture**: fairseq's
  ``Exception: Cannot load model parameters ... please ensure that the architectures
  match`` after a chained traceback. One line naming both architectures (or the shapes
  that differ) and what to do.
"""
import atexit
import datetime
import errno
import fcntl
import functools
import os
import queue
import shutil
import threading
import weakref

import fairseq_cli.train
import torch
from fairseq import checkpoint_utils
from fairseq.data import iterators
from fairseq.distributed import utils as distributed_utils
from fairseq.file_io import PathManager
from fairseq.trainer import Trainer

from ..errors import UserError
from .patching import FIX, as_config, patch, wrap_once

LOCK_NAME = ".fairseq_luong.lock"


# ------------------------------------------------------------------ the save-dir
class SaveDirLock:
    """An exclusive lock on SAVE_DIR for one training process (flock: released with it)."""

    def __init__(self, save_dir):
        self.save_dir = save_dir
        self.path = os.path.join(save_dir, LOCK_NAME)
        self.file = None

    def __enter__(self):
        os.makedirs(self.save_dir, exist_ok=True)
        self.file = open(self.path, "a+")
        try:
            fcntl.flock(self.file, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            self.file.seek(0)
            holder = self.file.read().strip() or "another process"
            self.file.close()
            raise UserError(f"--save-dir {self.save_dir} is in use by another training ({holder}): its "
                            "checkpoints would overwrite each other; wait for it to end, or give another "
                            "--save-dir") from None
        self.file.seek(0)
        self.file.truncate()
        started = datetime.datetime.now().astimezone().strftime("%Y-%m-%d %H:%M:%S %Z")
        self.file.write(f"pid {os.getpid()} on {os.uname().nodename}, started {started}\n")
        self.file.flush()
        return self

    def __exit__(self, *exc):
        fcntl.flock(self.file, fcntl.LOCK_UN)
        self.file.close()


def _last_checkpoint(save_dir):
    path = os.path.join(save_dir, "checkpoint_last.pt")
    if not os.path.exists(path):
        return f"no checkpoint was saved in {save_dir} yet"
    saved = datetime.datetime.fromtimestamp(os.path.getmtime(path)).strftime("%Y-%m-%d %H:%M:%S")
    return f"{path} (saved {saved}) holds the last state saved before"


def _check_restore_file(ckpt):
    """--restore-file / --finetune-from-model that is not there: fairseq starts from scratch
    without a word (--restore-file) or raises a ValueError traceback."""
    for flag, path in (("--restore-file", ckpt.restore_file), ("--finetune-from-model", ckpt.finetune_from_model)):
        if not path or path == "checkpoint_last.pt" or "://" in path or os.path.isfile(path):
            continue
        in_save_dir = os.path.join(ckpt.save_dir, path)
        hint = (f"; {in_save_dir} exists: fairseq reads {flag} from the current folder, not from --save-dir, so "
                f"give {flag} {in_save_dir}") if os.path.isfile(in_save_dir) else ""
        raise UserError(f"{flag} {path}: no such checkpoint (fairseq would train from scratch){hint}")


def _guarded(main):
    @functools.wraps(main)
    def wrapper(cfg, *args, **kwargs):
        cfg = as_config(cfg)  # fairseq's main takes a legacy Namespace too (its own tests)
        ckpt = cfg.checkpoint
        if ckpt.no_save:
            return main(cfg, *args, **kwargs)
        if os.path.exists(ckpt.save_dir) and not os.path.isdir(ckpt.save_dir):
            raise UserError(f"--save-dir {ckpt.save_dir} is a file, not a folder: give a folder for the "
                            "checkpoints (it is made if missing)")
        _check_restore_file(ckpt)
        first = distributed_utils.is_master(cfg.distributed_training)
        lock = SaveDirLock(ckpt.save_dir) if first else None
        if lock:
            lock.__enter__()
        try:
            return main(cfg, *args, **kwargs)
        except FloatingPointError as e:
            raise UserError(f"training diverged: {e}; {_last_checkpoint(ckpt.save_dir)}: train again with "
                            "a lower --lr, gradient clipping (--clip-norm) or larger batches") from e
        finally:
            if lock:
                lock.__exit__(None, None, None)

    return wrapper


# ------------------------------------------------------------------ saving
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


class _WholeCopies(PathManager):
    """fairseq's PathManager, whose copy (checkpoint_last.pt, checkpoint_best.pt from the
    first file saved) writes a whole file or none."""

    @staticmethod
    def copy(src_path, dst_path, overwrite=False):
        if "://" in str(src_path) + str(dst_path):
            return PathManager.copy(src_path, dst_path, overwrite=overwrite)
        _write_whole(dst_path, lambda tmp: shutil.copyfile(src_path, tmp))
        return True


# ------------------------------------------------------------------ resuming
def _saved_arch(path):
    try:
        cfg = checkpoint_utils.load_checkpoint_to_cpu(path).get("cfg")
        return cfg["model"]._name if hasattr(cfg["model"], "_name") else cfg["model"]["_name"]
    except Exception:  # the message then says less, nothing more
        return None


def _named_architectures(load_checkpoint):
    @functools.wraps(load_checkpoint)
    def wrapper(self, filename, *args, **kwargs):
        try:
            return load_checkpoint(self, filename, *args, **kwargs)
        except Exception as e:
            if isinstance(e, UserError) or not str(e).startswith("Cannot load model parameters from checkpoint"):
                raise
            saved, now = _saved_arch(filename), getattr(self.cfg.model, "_name", None) or "?"
            cause = [line.strip().rstrip(".") for line in str(e.__cause__ or e.__context__ or "").splitlines()
                     if "size mismatch" in line or "Missing key" in line or "Unexpected key" in line]
            if saved and saved != now:
                what = f"holds a {saved} model, and this command trains {now}"
                go_on = f"to go on with that model, train with --arch {saved}"
            else:
                what = (f"holds a {saved or 'model'} whose parameters differ from this command's"
                        + (f" ({cause[0]})" if cause else ""))
                go_on = "to go on with it, give the options it was trained with (sizes, attention, ...)"
            raise UserError(f"{filename} {what}: give another --save-dir (or --restore-file) to start this "
                            f"model, or {go_on}") from e

    return wrapper


# ------------------------------------------------------------------ exit
_STOP = threading.Event()
_CONSUMERS = weakref.WeakSet()


class StoppableConsumer(iterators.BackgroundConsumer):
    """fairseq's BackgroundConsumer (the thread that fills BufferedIterator's queue), which
    stops when ``_STOP`` is set instead of being killed inside a torch call at exit."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        _CONSUMERS.add(self)

    def _put(self, item):
        while not _STOP.is_set():
            try:
                self._queue.put(item, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def run(self):
        if self.cuda_device is not None:
            torch.cuda.set_device(self.cuda_device)
        try:
            for item in self._source:
                if not self._put(item):
                    return
                self.count += 1
                if self._max_len is not None and self.count >= self._max_len:
                    break
            self._put(iterators._sentinel)
        except Exception as e:
            self._put(e)


def stop_consumers(timeout=30.0):
    """Ask every running consumer to stop, and wait for them (atexit)."""
    _STOP.set()
    for consumer in list(_CONSUMERS):
        consumer.join(timeout)


@patch(FIX, "fairseq-train's --save-dir and checkpoint writes, for every model: one training a folder, whole "
       "files or none, another architecture on resume in one line")
def patch_long_runs():
    """fairseq-train's ``main``: --save-dir locked, not a file, divergence in one line;
    ``torch_persistent_save`` and checkpoint_utils' copies: whole files or none;
    ``Trainer.load_checkpoint``: another architecture named in one line; fairseq's background
    batch consumers stop cleanly at exit."""
    wrap_once(fairseq_cli.train, "main", _guarded)
    wrap_once(checkpoint_utils, "torch_persistent_save", _whole_save)
    if checkpoint_utils.PathManager is PathManager:
        checkpoint_utils.PathManager = _WholeCopies
    wrap_once(Trainer, "load_checkpoint", _named_architectures)
    if iterators.BackgroundConsumer is not StoppableConsumer:
        iterators.BackgroundConsumer = StoppableConsumer
        atexit.register(stop_consumers)
