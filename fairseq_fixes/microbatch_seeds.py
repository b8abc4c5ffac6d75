"""Dropout masks that depend on the global micro-batch, not on the process that runs it.

fairseq's ``Trainer._set_seed`` seeds torch with ``--seed`` + the update
number at the start of each update, on every process alike. So with N
processes every rank draws its dropout masks from the same stream (ranks'
masks coincide whenever their batches have the same shape), and a run on N
processes differs from one process with ``--update-freq N``, where the
second micro-batch continues the stream of the first.

We reseed before each micro-batch k > 0 of an update, where k = rank x
(micro-batches per rank) + i counts the update's micro-batches across all
processes, from (seed, update, k). Micro-batch 0 keeps fairseq's seed, so a
single process with ``--update-freq 1`` draws exactly what it drew before;
N processes now equal one process with ``--update-freq N`` (the same masks
for the same batches, tested to the last bit), and ranks' masks differ.
"""
import functools

import numpy as np
from fairseq import utils
from fairseq.tasks import FairseqTask
from fairseq.trainer import Trainer

from .patching import FIX, patch, wrap_once

_update = {}  # the update in progress: seed, num_updates, first_index, next micro-batch


def microbatch_seed(seed, num_updates, k):
    """The torch seed of micro-batch ``k > 0`` of an update (micro-batch 0 keeps fairseq's)."""
    return int(np.random.SeedSequence([seed, num_updates, k]).generate_state(1)[0])


def _plan_update(train_step):
    @functools.wraps(train_step)
    def wrapper(self, samples, *args, **kwargs):
        _update.update(seed=self.cfg.common.seed, num_updates=self.get_num_updates(),
                       first=self.data_parallel_rank * len(samples), next=0)
        try:
            return train_step(self, samples, *args, **kwargs)
        finally:
            _update.clear()

    return wrapper


def _reseed_microbatch(train_step):
    @functools.wraps(train_step)
    def wrapper(self, *args, **kwargs):
        if _update:
            k = _update["first"] + _update["next"]
            _update["next"] += 1
            if k > 0:
                utils.set_torch_seed(microbatch_seed(_update["seed"], _update["num_updates"], k))
        return train_step(self, *args, **kwargs)

    return wrapper


@patch(FIX, "a training with more than one micro-batch an update, for every model: a seed per micro-batch")
def patch_microbatch_seeds():
    """``Trainer.train_step`` notes the update; ``FairseqTask.train_step`` reseeds each
    micro-batch after the first from (seed, update, its index across processes)."""
    wrap_once(Trainer, "train_step", _plan_update)
    wrap_once(FairseqTask, "train_step", _reseed_microbatch)
