"""Batching: fixes for fairseq bugs that drop sentences or stop a run.

**The final batch** (fairseq issue #5036). ``fairseq.data.data_utils.batch_by_size``
ends with::

    if bsz_mult > 1 and len(b[-1]) % bsz_mult != 0:
        b = b[:-1]

so with the default ``--required-batch-size-multiple 8`` the final partial
batch disappears: ``fairseq-generate`` skips the last (longest) test
sentences and reports BLEU on a subset, validation skips sentences, and
every training epoch drops up to 7. We keep that batch. Batches are
consecutive runs of ``indices``, so the dropped batch is exactly the
indices after the last kept one. Everything else about batching is unchanged.

**numpy 2.** ``--num-batch-buckets`` stopped with ``TypeError: percentile() got an
unexpected keyword argument 'interpolation'`` (``data_utils.get_buckets``) and then
``AttributeError: module 'numpy' has no attribute 'compat'``
(``LanguagePairDataset.__init__``: ``np.compat.long``; ``TokenBlockDataset`` has it
too): numpy 2 removed both. Those three fairseq modules get, as their ``np``, numpy
with the two numpy 1 names put back (``percentile(interpolation=)`` passed on as
``method=``, ``compat.long`` = ``int``); numpy itself is not changed.

``apply_all`` applies both.
"""
import functools
import logging
import types

import numpy as np
from fairseq.data import data_utils, language_pair_dataset, token_block_dataset

from .patching import wrap_once

logger = logging.getLogger(__name__)


def _keep_final_batch(batch_by_size):
    @functools.wraps(batch_by_size)
    def wrapper(indices, *args, **kwargs):
        if not isinstance(indices, np.ndarray):
            indices = np.fromiter(indices, dtype=np.int64, count=-1)
        batches = batch_by_size(indices, *args, **kwargs)
        fixed_shapes = kwargs.get("fixed_shapes", args[5] if len(args) > 5 else None)
        covered = sum(len(b) for b in batches)
        if fixed_shapes is None and covered < len(indices):
            batches = list(batches) + [indices[covered:]]
        return batches

    return wrapper


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


def patch_final_batch():
    """``data_utils.batch_by_size``: the final partial batch is kept (fairseq issue #5036)."""
    wrap_once(data_utils, "batch_by_size", _keep_final_batch)


def patch_numpy_2():
    """``data_utils``, ``language_pair_dataset``, ``token_block_dataset``: numpy with the two
    numpy 1 names they use (numpy 2 only; numpy itself is not changed)."""
    if int(np.__version__.split(".")[0]) >= 2:
        for module in (data_utils, language_pair_dataset, token_block_dataset):
            if module.np is np:
                module.np = _NumpyWithVersion1Names()
