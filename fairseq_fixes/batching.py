"""Batching: fixes for fairseq bugs that drop sentences or stop a run.

**The final batch** (fairseq issue #5036). ``fairseq.data.data_utils.batch_by_size``
ends with::

    if bsz_mult > 1 and len(b[-1]) % bsz_mult != 0:
        b = b[:-1]

so with the default ``--required-batch-size-multiple 8`` the final partial
batch disappears: ``fairseq-generate`` skips the last (longest) test
sentences and reports BLEU on a subset, validation and ``fairseq-eval-lm`` skip
sentences. We keep that batch wherever sentences are scored or translated. Batches are
consecutive runs of ``indices``, so the dropped batch is exactly the indices after the
last kept one. A training epoch drops up to 7 sentences too, but there that is fairseq's
design (each epoch orders the sentences anew) and its results are fairseq's: the batches
of a training set (``Trainer.get_train_iterator``'s, also when ``--rebuild-batches`` makes
them again each epoch) are left exactly as fairseq makes them, for every model.

**numpy 2.** ``--num-batch-buckets`` stopped with ``TypeError: percentile() got an
unexpected keyword argument 'interpolation'`` (``data_utils.get_buckets``) and then
``AttributeError: module 'numpy' has no attribute 'compat'``
(``LanguagePairDataset.__init__``: ``np.compat.long``; ``TokenBlockDataset`` has it
too): numpy 2 removed both. Those three fairseq modules get, as their ``np``, numpy
with the two numpy 1 names put back (``percentile(interpolation=)`` passed on as
``method=``, ``compat.long`` = ``int``); numpy itself is not changed.

**A sentence longer than --max-tokens.** ``batch_by_size`` stops with
``AssertionError: Sentences lengths should not exceed max_tokens=N``, a traceback
that names neither the flag's fix nor the sentence. We raise a ``UserError`` naming
the longest sentence, its length and the value to give.

**A resumed training's batches.** ``FairseqTask.get_batch_iterator`` (ve-fairseq 0.12.3)
orders the sentences under ``numpy_seed(seed + epoch)`` and, unless ``--rebuild-batches``,
freezes those batches for every later epoch of the process (each epoch shuffles their order).
So the batches depend on the epoch the *process* started at: a training stopped after epoch E
and resumed builds them from epoch E + 1's permutation, and every later epoch trains on other
batches than the uninterrupted training (measured: a 4-epoch lstm resumed after epoch 2 differed
from the first update of epoch 3 on). Where the batches are frozen (the iterator is cached
and neither ``--rebuild-batches`` nor ``--update-epoch-batch-itr`` is given) we build them
from epoch 1's permutation, as an uninterrupted training does, and then set the epoch asked
for.

``apply_all`` applies all four.
"""
import contextvars
import functools
import inspect
import logging
import types
import weakref

import numpy as np
from fairseq.data import data_utils, language_pair_dataset, token_block_dataset
from fairseq.tasks import FairseqTask
from fairseq.trainer import Trainer

from .errors import UserError
from .patching import FIX, patch, replace, wrap_once

logger = logging.getLogger(__name__)


_MAKING_TRAIN_ITERATOR = contextvars.ContextVar("fairseq_fixes_train_iterator", default=False)
_TRAINING_SETS = weakref.WeakSet()  # the datasets a Trainer trains on (their batches: fairseq's)


def _for_training(num_tokens_fn):
    """Whether the batches are a training set's: made inside ``Trainer.get_train_iterator``, or
    of a dataset made there before (``--rebuild-batches`` makes them again at each epoch)."""
    dataset = getattr(num_tokens_fn, "__self__", None)  # FairseqDataset.batch_by_size passes its num_tokens
    if _MAKING_TRAIN_ITERATOR.get():
        if dataset is not None:
            _TRAINING_SETS.add(dataset)
        return True
    return dataset is not None and dataset in _TRAINING_SETS


def _keep_final_batch(batch_by_size):
    @functools.wraps(batch_by_size)
    def wrapper(indices, *args, **kwargs):
        if not isinstance(indices, np.ndarray):
            indices = np.fromiter(indices, dtype=np.int64, count=-1)
        try:
            batches = batch_by_size(indices, *args, **kwargs)
        except AssertionError as e:
            if "should not exceed max_tokens" not in str(e):
                raise
            raise _too_long(indices, e, *args, **kwargs) from e
        if _for_training(kwargs.get("num_tokens_fn", args[0] if args else None)):
            return batches
        fixed_shapes = kwargs.get("fixed_shapes", args[5] if len(args) > 5 else None)
        covered = sum(len(b) for b in batches)
        if fixed_shapes is None and covered < len(indices):
            batches = list(batches) + [indices[covered:]]
        return batches

    return wrapper


def _too_long(indices, error, num_tokens_fn=None, num_tokens_vec=None, max_tokens=None, *rest, **kwargs):
    """The UserError for a sentence longer than --max-tokens (batch_by_size's arguments)."""
    num_tokens_vec = kwargs.get("num_tokens_vec", num_tokens_vec)
    max_tokens = kwargs.get("max_tokens", max_tokens)
    num_tokens_fn = kwargs.get("num_tokens_fn", num_tokens_fn)
    if num_tokens_vec is not None:
        lengths = np.asarray(num_tokens_vec)
    else:
        lengths = np.array([num_tokens_fn(i) for i in indices])
    longest = int(np.argmax(lengths))
    n = int(lengths[longest])
    return UserError(f"--max-tokens {max_tokens} is smaller than sentence {int(indices[longest])} of this split "
                     f"({n} tokens, end of sentence included): give --max-tokens {n} or more, or leave the longer "
                     "sentences out of training (--max-source-positions / --max-target-positions, with "
                     "--skip-invalid-size-inputs-valid-test)")


class _NumpyWithVersion1Names(types.ModuleType):
    """numpy, plus ``np.compat.long`` and ``np.percentile(..., interpolation=)``."""

    def __init__(self):
        super().__init__("numpy")
        self.compat = types.SimpleNamespace(long=int)

    def percentile(self, a, q, *args, interpolation=None, **kwargs):
        if interpolation is not None:
            kwargs["method"] = interpolation
        return np.percentile(a, q, *args, **kwargs)

    def __getattr__(self, name):
        return getattr(np, name)


_NUMPY_WITH_VERSION_1_NAMES = _NumpyWithVersion1Names()


def _marking_training_batches(get_train_iterator):
    @functools.wraps(get_train_iterator)
    def wrapper(*args, **kwargs):
        token = _MAKING_TRAIN_ITERATOR.set(True)
        try:
            return get_train_iterator(*args, **kwargs)
        finally:
            _MAKING_TRAIN_ITERATOR.reset(token)

    return wrapper


@patch(FIX, "batches of sentences scored or translated (generate, validate, eval-lm, interactive), for every "
       "model; a training set's batches stay fairseq's")
def patch_final_batch():
    """``data_utils.batch_by_size``: the final partial batch is kept (fairseq issue #5036) where
    sentences are scored or translated; ``Trainer.get_train_iterator`` marks a training set's
    batches, which stay fairseq's."""
    wrap_once(data_utils, "batch_by_size", _keep_final_batch)
    wrap_once(Trainer, "get_train_iterator", _marking_training_batches)


@patch(FIX, "--num-batch-buckets under numpy 2, for every model")
def patch_numpy_2():
    """``data_utils``, ``language_pair_dataset``, ``token_block_dataset``: numpy with the two
    numpy 1 names they use (numpy 2 only; numpy itself is not changed)."""
    if int(np.__version__.split(".")[0]) >= 2:
        for module in (data_utils, language_pair_dataset, token_block_dataset):
            if module.np is np or isinstance(module.np, _NumpyWithVersion1Names):
                replace(module, "np", _NUMPY_WITH_VERSION_1_NAMES)


def _batches_of_the_first_epoch(get_batch_iterator):
    signature = inspect.signature(get_batch_iterator)

    @functools.wraps(get_batch_iterator)
    def wrapper(self, *args, **kwargs):
        bound = signature.bind(self, *args, **kwargs)
        bound.apply_defaults()
        a = bound.arguments
        frozen = (not a["disable_iterator_cache"] and not a["update_epoch_batch_itr"]
                  and not getattr(self.cfg, "rebuild_batches", False) and self.can_reuse_epoch_itr(a["dataset"]))
        epoch = a["epoch"]
        if not frozen or epoch <= 1 or a["dataset"] in self.dataset_to_epoch_iter:
            return get_batch_iterator(*bound.args, **bound.kwargs)
        a["epoch"] = 1  # the batches an uninterrupted training made at its start
        itr = get_batch_iterator(*bound.args, **bound.kwargs)
        a["dataset"].set_epoch(epoch)
        itr.epoch = epoch  # as EpochBatchIterator(epoch=epoch); a checkpoint's iterator state follows
        return itr

    return wrapper


@patch(FIX, "a training resumed after its first epoch, for every model: the uninterrupted run's batches")
def patch_resume_batches():
    wrap_once(FairseqTask, "get_batch_iterator", _batches_of_the_first_epoch)
