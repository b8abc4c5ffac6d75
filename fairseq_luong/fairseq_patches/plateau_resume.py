"""A training resumed between epochs keeps the rate schedule of ``reduce_lr_on_plateau``.

fairseq writes the end-of-epoch checkpoint inside ``train`` (``validate_and_save``) and only
afterwards, back in ``main``, steps the scheduler with that epoch's validation loss
(``trainer.lr_step(epoch, valid_losses[0])``). So ``checkpoint_last.pt`` holds the scheduler
as it was before the step, and ``Trainer.load_checkpoint`` steps it with no loss
(``lr_step(epoch)``): a training stopped after epoch E and resumed never takes E's step. A
halving due after E does not happen (epoch E + 1 runs at twice the rate, and every later
halving comes one epoch late), or, after an epoch that improved, the best loss stays that of
E - 1 and E + 1 is judged against it. The count of bad epochs (``--lr-patience``) and the
cooldown are not saved at all: a resume sets both to 0 (fairseq pull request #4071 proposed
saving the count; it was closed unmerged). fixed, inverse_sqrt and the other
schedulers compute the rate from the epoch or update number and resume as they were.

We save the count and the cooldown with the scheduler's state, and on resuming from a
checkpoint written at the end of epoch E (its iterator at the start of E + 1) we take the
step fairseq skipped: ``lr_step(E, val_loss)``, with the validation loss the checkpoint
recorded (the one ``main`` stepped with). Not with ``--reset-optimizer`` or
``--reset-lr-scheduler`` (a fresh schedule was asked for), nor where no loss was recorded
(``--disable-validation``, an epoch without validation: ``main`` did not step then either).
"""
import functools

from fairseq.optim.lr_scheduler.reduce_lr_on_plateau import ReduceLROnPlateauLRSchedule
from fairseq.trainer import Trainer

from .patching import FIX, patch, wrap_once

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


def _taking_the_skipped_step(load_checkpoint):
    @functools.wraps(load_checkpoint)
    def wrapper(self, filename, reset_optimizer=False, reset_lr_scheduler=False, *args, **kwargs):
        extra_state = load_checkpoint(self, filename, reset_optimizer, reset_lr_scheduler, *args, **kwargs)
        if (extra_state is not None and not reset_optimizer and not reset_lr_scheduler
                and isinstance(self.lr_scheduler, ReduceLROnPlateauLRSchedule)):
            epoch = skipped_epoch(extra_state)
            if epoch is not None:
                self.lr_step(epoch, extra_state["val_loss"])  # as fairseq_cli.train.main after epoch E
        return extra_state

    return wrapper


@patch(FIX, "--lr-scheduler reduce_lr_on_plateau stopped between epochs and resumed, for every model")
def patch_plateau_resume():
    wrap_once(ReduceLROnPlateauLRSchedule, "state_dict", _with_counters)
    wrap_once(ReduceLROnPlateauLRSchedule, "load_state_dict", _restoring_counters)
    wrap_once(Trainer, "load_checkpoint", _taking_the_skipped_step)
