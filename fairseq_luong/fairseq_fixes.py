"""A fix for a fairseq bug that silently drops sentences (fairseq issue #5036).

``fairseq.data.data_utils.batch_by_size`` ends with::

    if bsz_mult > 1 and len(b[-1]) % bsz_mult != 0:
        b = b[:-1]

so with the default ``--required-batch-size-multiple 8`` the final partial
batch disappears: ``fairseq-generate`` skips the last (longest) test
sentences and reports BLEU on a subset, validation skips sentences, and
every training epoch drops up to 7. We keep that batch. Batches are
consecutive runs of ``indices``, so the dropped batch is exactly the
indices after the last kept one. Importing fairseq_luong (``--user-dir``)
applies this; everything else about batching is unchanged.
"""
import functools
import logging

import numpy as np
from fairseq.data import data_utils

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


wrap_once(data_utils, "batch_by_size", _keep_final_batch)
