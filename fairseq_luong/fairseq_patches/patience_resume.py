"""A training resumed from a checkpoint stops early (``--patience``) where it would have without the stop.

``fairseq_cli.train.should_stop_early`` keeps the best validation score and the count of
validations since it (``num_runs``) as attributes of the function, and no checkpoint saves
them (fairseq saves ``save_checkpoint.best``, the best checkpoint's score, which
should_stop_early does not read). A resumed process starts with no best: it takes its first
validation as the best, whatever it is, and counts from 0. A training stopped after a
validation that did not improve, or whose first validation after the resume is worse than
the best before it, trains on past the point where the same training without the stop
ends: up to ``--patience`` validations further at each resume (the perSPE recipe's seeds,
stopped by a session's end). In one process, a second training starts with the first one's
count.

We save both with the checkpoint (``Trainer.save_checkpoint``; ``validate_and_save`` calls
should_stop_early before it writes the checkpoint, so the saved state is the one after the
checkpoint's validation) and set them when a training loads its checkpoint: the saved state
when it resumes, under fairseq's own condition for ``save_checkpoint.best`` (neither
``--reset-optimizer`` nor ``--reset-meters``), else none (a new training's). Without
``--patience`` should_stop_early keeps nothing, and nothing is saved.
"""
import functools

import fairseq_cli.train
from fairseq.trainer import Trainer

from .patching import FIX, patch, wrap_once

KEY = "should_stop_early"  # in the checkpoint's extra_state: {"best": float, "num_runs": int}


def _saving_the_count(save_checkpoint):
    @functools.wraps(save_checkpoint)
    def wrapper(self, filename, extra_state):
        stop = fairseq_cli.train.should_stop_early
        if getattr(stop, "best", None) is not None:
            extra_state = {**extra_state, KEY: {"best": stop.best, "num_runs": stop.num_runs}}
        return save_checkpoint(self, filename, extra_state)

    return wrapper


def _restoring_the_count(load_checkpoint):
    @functools.wraps(load_checkpoint)
    def wrapper(self, filename, reset_optimizer=False, reset_lr_scheduler=False, optimizer_overrides=None,
                reset_meters=False):
        extra_state = load_checkpoint(self, filename, reset_optimizer, reset_lr_scheduler, optimizer_overrides,
                                      reset_meters=reset_meters)
        saved = (extra_state or {}).get(KEY)
        if saved is None or reset_optimizer or reset_meters:
            saved = {"best": None, "num_runs": 0}  # a new training's: should_stop_early takes its first
        stop = fairseq_cli.train.should_stop_early
        stop.best, stop.num_runs = saved["best"], saved["num_runs"]
        return extra_state

    return wrapper


@patch(FIX, "--patience across a resume, for every model")
def patch_patience_resume():
    wrap_once(Trainer, "save_checkpoint", _saving_the_count)
    wrap_once(Trainer, "load_checkpoint", _restoring_the_count)
