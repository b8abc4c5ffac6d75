"""``--lr-scheduler reduce_lr_on_plateau_until_flat``: fairseq's plateau schedule, trained until
the learning curve is flat.

fairseq's ``reduce_lr_on_plateau`` multiplies the rate by ``--lr-shrink`` after each epoch
whose validation metric is not better than the best by ``--lr-threshold`` (relative), and a
training stops at ``--stop-min-lr`` or ``--max-epoch``. A floor on the rate stops after a
fixed number of reductions, whether or not the curve has flattened: in the Luong study
(examples/luong2015_in_form) 7 halvings stopped Multi30k's global (location) model with its
validation perplexity still falling 1.28 % over its last two epochs.

This scheduler is the same schedule (it is ``reduce_lr_on_plateau``, and resumes as it does:
``fairseq_fixes/resume_state.py``) with one more stop: after an epoch's step, once the
last ``--flat-epochs`` epochs were all trained at a rate already reduced at least
``--min-shrinks`` times **and** the validation metric fell by less than ``--flat-below`` over
them, the rate is set to 0 and fairseq's ``--stop-min-lr 0`` ends the training (required:
without it fairseq would go on at rate 0). Only epochs trained at the final rates count: a
noisy epoch that halves the rate early cannot stop the training at the step of its last
halving, before the new rate has trained a single epoch (the IWSLT'15 recipe's (a) once
stopped so after 13 epochs: examples/iwslt15_en_vi/README.md). ``--max-epoch`` still caps it.
With ``--best-checkpoint-metric nll_loss`` (bits a token) a fall below log2(100 / 99) = 0.0145
is a perplexity that fell by less than 1 %.

The history of validation values, the count of reductions and whether it has converged are
saved with the scheduler's state, so a training stopped and resumed stops where it would have.
"""
import logging
from dataclasses import dataclass, field

from fairseq.optim.lr_scheduler import register_lr_scheduler
from fairseq.optim.lr_scheduler.reduce_lr_on_plateau import (
    ReduceLROnPlateauLRSchedule,
    ReduceLROnPlateauLRScheduleConfig,
)
from omegaconf import II

from ..errors import UserError

logger = logging.getLogger(__name__)


@dataclass
class UntilFlatConfig(ReduceLROnPlateauLRScheduleConfig):
    min_shrinks: int = field(default=7, metadata={
        "help": "stop only once the last --flat-epochs epochs trained after this many reductions of the rate"})
    flat_below: float = field(default=0.0145, metadata={
        "help": "then stop once the validation metric fell by less than this over the last --flat-epochs "
                "epochs (its units; 0.0145 bits of nll_loss: perplexity fell by less than 1 %%)"})
    flat_epochs: int = field(default=2, metadata={"help": "the epochs --flat-below is measured over"})
    stop_min_lr: float = II("optimization.stop_min_lr")
    best_checkpoint_metric: str = II("checkpoint.best_checkpoint_metric")


def fall(history, epochs, maximize=False):
    """How much the validation metric improved over the last ``epochs`` epochs (negative: it got
    worse); None before ``epochs`` + 1 values."""
    if len(history) <= epochs:
        return None
    gain = history[-1 - epochs] - history[-1]
    return -gain if maximize else gain


@register_lr_scheduler("reduce_lr_on_plateau_until_flat", dataclass=UntilFlatConfig)
class ReduceLROnPlateauUntilFlat(ReduceLROnPlateauLRSchedule):
    def __init__(self, cfg: UntilFlatConfig, optimizer):
        if cfg.stop_min_lr < 0:
            raise UserError("--lr-scheduler reduce_lr_on_plateau_until_flat ends a training by setting its rate "
                            "to 0, which fairseq stops only with --stop-min-lr 0: add --stop-min-lr 0")
        if cfg.min_shrinks < 0 or cfg.flat_epochs < 1:
            raise UserError(f"--min-shrinks {cfg.min_shrinks} / --flat-epochs {cfg.flat_epochs}: give at least 0 / 1")
        super().__init__(cfg, optimizer)
        self.history = []  # the validation metric after each epoch
        self.shrinks = 0
        self.at_final = 0  # epochs trained at a rate reduced at least --min-shrinks times
        self.converged = False

    def step(self, epoch, val_loss=None):
        if self.converged:
            self.optimizer.set_lr(0.0)
            return 0.0
        before = self.optimizer.get_lr()
        lr = super().step(epoch, val_loss)
        if val_loss is None or not self.warmup_end:
            return lr
        self.at_final += self.shrinks >= self.cfg.min_shrinks  # the epoch just trained, at the rate before this step
        self.shrinks += lr < before
        self.history.append(float(val_loss))
        fell = fall(self.history, self.cfg.flat_epochs, self.cfg.maximize_best_checkpoint_metric)
        if self.at_final >= self.cfg.flat_epochs and fell is not None and fell < self.cfg.flat_below:
            logger.info(f"converged after epoch {epoch}: the rate was reduced {self.shrinks} times and the validation "
                        f"{self.cfg.best_checkpoint_metric} improved by {fell:.4f} over the last "
                        f"{self.cfg.flat_epochs} epochs, trained after at least {self.cfg.min_shrinks} reductions "
                        f"(--flat-below {self.cfg.flat_below:g}): the rate is set to 0 and training stops")
            self.converged = True
            self.optimizer.set_lr(0.0)
            return 0.0
        return lr

    def state_dict(self):
        state = super().state_dict()
        state["until_flat"] = {"history": list(self.history), "shrinks": self.shrinks, "at_final": self.at_final,
                               "converged": self.converged}
        return state

    def load_state_dict(self, state_dict):
        super().load_state_dict(state_dict)
        mine = state_dict.get("until_flat")
        if mine is not None:
            self.history, self.shrinks, self.converged = list(mine["history"]), mine["shrinks"], mine["converged"]
            # a state saved before at_final was counted: none of its epochs counts (the stop waits for
            # --flat-epochs more epochs at the final rates, never fewer)
            self.at_final = mine.get("at_final", 0)
