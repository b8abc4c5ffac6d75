"""One training a --save-dir, and a --save-dir that is a folder.

What fairseq-train (0.12 and main) does, and what we do instead:

* **Two trainings into one --save-dir** overwrite each other's checkpoints; one dies with
  ``FileNotFoundError`` and the other's folder holds a mix of both runs. The training
  process (its first rank) now holds a lock on ``SAVE_DIR/.fairseq_luong.lock`` (the name it
  had when these fixes were part of the fairseq_luong plugin: a training of either holds it off
  the other) with ``fcntl.flock``: the system releases it when the process ends, however it
  ends, so a crashed or killed run leaves nothing stuck; a second training into the folder is
  refused in one line naming the process that holds it.
* **--save-dir naming a file**: ``NotADirectoryError`` after a warning. Refused before
  any work.
"""
import datetime
import fcntl
import functools
import os

import fairseq_cli.train
from fairseq.distributed import utils as distributed_utils

from .errors import UserError
from .patching import FIX, as_config, patch, wrap_once

LOCK_NAME = ".fairseq_luong.lock"


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


def _locked(main):
    @functools.wraps(main)
    def wrapper(cfg, *args, **kwargs):
        cfg = as_config(cfg)  # fairseq's main takes a legacy Namespace too (its own tests)
        ckpt = cfg.checkpoint
        if ckpt.no_save:
            return main(cfg, *args, **kwargs)
        if os.path.exists(ckpt.save_dir) and not os.path.isdir(ckpt.save_dir):
            raise UserError(f"--save-dir {ckpt.save_dir} is a file, not a folder: give a folder for the "
                            "checkpoints (it is made if missing)")
        if not distributed_utils.is_master(cfg.distributed_training):
            return main(cfg, *args, **kwargs)
        with SaveDirLock(ckpt.save_dir):
            return main(cfg, *args, **kwargs)

    return wrapper


@patch(FIX, "fairseq-train's --save-dir, for every model: one training a folder, and a folder, not a file")
def patch_save_dir():
    """fairseq-train's ``main``: --save-dir locked by its first rank, and not a file."""
    wrap_once(fairseq_cli.train, "main", _locked)
