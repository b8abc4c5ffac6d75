"""A training resumed from a checkpoint goes on as the same training without the stop would:
the plateau schedule's step and counters, and ``--patience``'s best and count.

**reduce_lr_on_plateau** (fairseq 0.12 and main). fairseq writes the end-of-epoch checkpoint
inside ``train`` (``validate_and_save``) and only afterwards, back in ``main``, steps the
scheduler with that epoch's validation loss (``trainer.lr_step(epoch, valid_losses[0])``). So
``checkpoint_last.pt`` holds the scheduler as it was before the step, and
``Trainer.load_checkpoint`` steps it with no loss (``lr_step(epoch)``): a training stopped after
epoch E and resumed never takes E's step. A halving due after E does not happen (epoch E + 1
runs at twice the rate, and every later halving comes one epoch late), or, after an epoch that
improved, the best loss stays that of E - 1 and E + 1 is judged against it. The count of bad
epochs (``--lr-patience``) and the cooldown are not saved at all: a resume sets both to 0
(fairseq pull request #4071 proposed saving the count; it was closed unmerged). fixed,
inverse_sqrt and the other schedulers compute the rate from the epoch or update number and
resume as they were.

We save the count and the cooldown with the scheduler's state, and on resuming from a
checkpoint written at the end of epoch E (its iterator at the start of E + 1) we take the
step fairseq skipped: ``lr_step(E, val_loss)``, with the validation loss the checkpoint
recorded (the one ``main`` stepped with). Not with ``--reset-optimizer`` or
``--reset-lr-scheduler`` (a fresh schedule was asked for), nor where no loss was recorded
(``--disable-validation``, an epoch without validation: ``main`` did not step then either).

**--patience** (fairseq 0.12 and main). ``fairseq_cli.train.should_stop_early`` keeps the best
validation score and the count of validations since it (``num_runs``) as attributes of the
function, and no checkpoint saves them (fairseq saves ``save_checkpoint.best``, the best
checkpoint's score, which should_stop_early does not read). A resumed process starts with no
best: it takes its first validation as the best, whatever it is, and counts from 0. A training
stopped after a validation that did not improve, or whose first validation after the resume is
worse than the best before it, trains on past the point where the same training without the stop
ends: up to ``--patience`` validations further at each resume. In one process, a second training
starts with the first one's count.

We save both with the checkpoint (``Trainer.save_checkpoint``; ``validate_and_save`` calls
should_stop_early before it writes the checkpoint, so the saved state is the one after the
checkpoint's validation) and set them when a training loads its checkpoint: the saved state
when it resumes, under fairseq's own condition for ``save_checkpoint.best`` (neither
``--reset-optimizer`` nor ``--reset-meters``), else none (a new training's). Without
``--patience`` should_stop_early keeps nothing, and nothing is saved.

One wrapper of ``Trainer.load_checkpoint`` sets both back; ``Trainer.save_checkpoint`` and the
scheduler's ``state_dict`` save them.
"""
import functools

import fairseq_cli.train
from fairseq.optim.lr_scheduler.reduce_lr_on_plateau import ReduceLROnPlateauLRSchedule
from fairseq.trainer import Trainer

from .patching import FIX, patch, wrap_once

PATIENCE_KEY = "should_stop_early"  # in the checkpoint's extra_state: {"best": float, "num_runs": int}
_UNSAVED = ("num_bad_epochs", "cooldown_counter")  # torch's ReduceLROnPlateau counters


def _with_counters(state_dict):
    @functools.wraps(state_dict)
    def wrapper(self):
        state = state_dict(self)
        state.update({k: getattr(self.lr_scheduler, k) for k in _UNSAVED})
        return state

    return wrapper


def _restoring_counters(load_state_dict):
    @functools.wraps(load_state_dict)
    def wrapper(self, state_dict):
        load_state_dict(self, state_dict)
        for k in _UNSAVED:
            if k in state_dict:  # checkpoints written without the patch have neither
                setattr(self.lr_scheduler, k, state_dict[k])

    return wrapper


def skipped_epoch(extra_state):
    """The epoch whose plateau step a checkpoint missed: E when it was written at the end of
    epoch E with a validation loss, else None."""
    itr = extra_state.get("train_iterator") or {}
    if extra_state.get("val_loss") is None or itr.get("version", 1) < 2 or itr.get("iterations_in_epoch") != 0:
        return None  # no loss to step with, or written inside an epoch (no step was due)
    return itr["epoch"] - 1 if itr.get("epoch", 1) > 1 else None


def _saving_the_count(save_checkpoint):
    @functools.wraps(save_checkpoint)
    def wrapper(self, filename, extra_state):
        stop = fairseq_cli.train.should_stop_early
        if getattr(stop, "best", None) is not None:
            extra_state = {**extra_state, PATIENCE_KEY: {"best": stop.best, "num_runs": stop.num_runs}}
        return save_checkpoint(self, filename, extra_state)

    return wrapper


def _resuming(load_checkpoint):
    @functools.wraps(load_checkpoint)
    def wrapper(self, filename, reset_optimizer=False, reset_lr_scheduler=False, optimizer_overrides=None,
                reset_meters=False):
        extra_state = load_checkpoint(self, filename, reset_optimizer, reset_lr_scheduler, optimizer_overrides,
                                      reset_meters=reset_meters)
        # the plateau step fairseq skipped
        if (extra_state is not None and not reset_optimizer and not reset_lr_scheduler
                and isinstance(self.lr_scheduler, ReduceLROnPlateauLRSchedule)):
            epoch = skipped_epoch(extra_state)
            if epoch is not None:
                self.lr_step(epoch, extra_state["val_loss"])  # as fairseq_cli.train.main after epoch E
        # --patience's best and count
        saved = (extra_state or {}).get(PATIENCE_KEY)
        if saved is None or reset_optimizer or reset_meters:
            saved = {"best": None, "num_runs": 0}  # a new training's: should_stop_early takes its first
        stop = fairseq_cli.train.should_stop_early
        stop.best, stop.num_runs = saved["best"], saved["num_runs"]
        return extra_state

    return wrapper


@patch(FIX, "a training resumed from a checkpoint, for every model: --lr-scheduler reduce_lr_on_plateau's step "
       "and counters, and --patience's best and count, as without the stop")
def patch_resume_state():
    wrap_once(ReduceLROnPlateauLRSchedule, "state_dict", _with_counters)
    wrap_once(ReduceLROnPlateauLRSchedule, "load_state_dict", _restoring_counters)
    wrap_once(Trainer, "save_checkpoint", _saving_the_count)
    wrap_once(Trainer, "load_checkpoint", _resuming)
