"""A --restore-file or --finetune-from-model that is not there is refused (a check).

fairseq-train reads ``--restore-file`` from the current folder, not from --save-dir; one that
is not there trains from scratch without a word. ``--finetune-from-model`` that is not there
ends in a ``ValueError`` traceback. Both are refused before any work, naming the file in
--save-dir when that is what was meant.
"""
import functools
import os

import fairseq_cli.train

from fairseq_fixes.errors import UserError
from fairseq_fixes.patching import CHECK, as_config, patch, wrap_once


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


def _checked_restore_file(main):
    @functools.wraps(main)
    def wrapper(cfg, *args, **kwargs):
        cfg = as_config(cfg)  # fairseq's main takes a legacy Namespace too (its own tests)
        if not cfg.checkpoint.no_save:
            _check_restore_file(cfg.checkpoint)
        return main(cfg, *args, **kwargs)

    return wrapper


@patch(CHECK, "fairseq-train's --restore-file or --finetune-from-model that is not there (fairseq trains from "
       "scratch, or fails)")
def patch_restore_file():
    """fairseq-train's ``main``: a missing --restore-file or --finetune-from-model refused."""
    wrap_once(fairseq_cli.train, "main", _checked_restore_file)
