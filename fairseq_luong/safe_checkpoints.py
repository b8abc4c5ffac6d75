"""Let torch >= 2.6 load fairseq checkpoints with ``weights_only=True``.

fairseq's ``checkpoint_utils.load_checkpoint_to_cpu`` calls ``torch.load``
without ``weights_only``, so torch uses its safe unpickler. A fairseq
checkpoint holds, besides tensors and builtins, exactly these globals:

* ``argparse.Namespace`` -- the legacy ``args`` entry (and inside ``cfg``);
* numpy's ``_reconstruct``, ``ndarray``, ``dtype`` and ``dtypes.Int64DType``
  -- arrays that ``--eval-bleu`` stores in the logged metrics.

We allowlist those and nothing else; any other global in a checkpoint is
still refused by torch. We never turn the weights-only safety off.
"""
import argparse

import numpy as np
import torch


def _numpy_reconstruct():
    # numpy >= 2 moved the pickled name to numpy._core; keep both spellings.
    core = getattr(np, "_core", None) or np.core
    return core.multiarray._reconstruct


def checkpoint_safe_globals():
    """The exact list of non-tensor globals a fairseq checkpoint may hold."""
    return [
        argparse.Namespace,
        _numpy_reconstruct(),
        np.ndarray,
        np.dtype,
        np.dtypes.Int64DType,
    ]


def allowlist_fairseq_checkpoint_globals():
    torch.serialization.add_safe_globals(checkpoint_safe_globals())
