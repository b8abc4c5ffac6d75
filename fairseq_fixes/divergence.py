"""A diverging training ends in one line naming its last checkpoint.

fairseq-train (0.12 and main) ends a diverging run with ``FloatingPointError`` (``Minimum loss
scale reached``, or ``gradients are Nan/Inf``) as a traceback. We raise one line naming the last
checkpoint saved and what to change.
"""
import datetime
import functools
import os

import fairseq_cli.train

from .errors import UserError
from .patching import FIX, as_config, patch, wrap_once


def _last_checkpoint(save_dir):
    path = os.path.join(save_dir, "checkpoint_last.pt")
    if not os.path.exists(path):
        return f"no checkpoint was saved in {save_dir} yet"
    saved = datetime.datetime.fromtimestamp(os.path.getmtime(path)).strftime("%Y-%m-%d %H:%M:%S")
    return f"{path} (saved {saved}) holds the last state saved before"


def _named_divergence(main):
    @functools.wraps(main)
    def wrapper(cfg, *args, **kwargs):
        cfg = as_config(cfg)  # fairseq's main takes a legacy Namespace too (its own tests)
        if cfg.checkpoint.no_save:
            return main(cfg, *args, **kwargs)
        try:
            return main(cfg, *args, **kwargs)
        except FloatingPointError as e:
            raise UserError(f"training diverged: {e}; {_last_checkpoint(cfg.checkpoint.save_dir)}: train again "
                            "with a lower --lr, gradient clipping (--clip-norm) or larger batches") from e

    return wrapper


@patch(FIX, "a diverging fairseq-train, for every model: one line naming the last checkpoint")
def patch_divergence():
    """fairseq-train's ``main``: ``FloatingPointError`` becomes one line."""
    wrap_once(fairseq_cli.train, "main", _named_divergence)
