"""fairseq-generate's ``--num-shards N --shard-id I`` (fairseq 0.12.0 to 0.12.2 and main): every
shard translated the whole subset.

fairseq's ``DatasetConfig`` offers ``--num-shards`` ("shard generation over N shards") and
``--shard-id`` ("id of the shard to generate"), and the generate of fairseq 0.9 and 0.10 passed
them to ``get_batch_iterator``: N runs, one a GPU, each translated a part. Since the Hydra
configs (3b27ed79, fairseq #1510, first in 0.12.0) ``fairseq_cli/generate.py`` passes
``--distributed-world-size`` and the rank there instead, so each of the N runs translates
everything, with exit status 0 (fairseq issue #1937 describes the recipe that stopped working;
``eval_lm.py`` still reads the options).

Where the options are given (N > 1) and generate runs as one process (world size 1, the
default), ``generate._main`` now runs with them as its world size and rank: fairseq's own
sharding of the batches (``ShardedIterator``, batch b to shard b mod N), as in 0.10. A shard id
outside 0..N-1 is one line (fairseq's ``ShardedIterator`` raised ``ValueError`` from deep
inside), and so are both options together with a world size above 1 (each would shard).
Without ``--num-shards`` nothing changes.
"""
import copy
import functools
import logging

from .errors import UserError
from .patching import FIX, fairseq_cli_modules, patch, wrap_once

logger = logging.getLogger(__name__)


def _honouring_shards(_main):
    @functools.wraps(_main)
    def wrapper(cfg, *args, **kwargs):
        shards, shard = cfg.dataset.num_shards, cfg.dataset.shard_id
        if shards <= 1 and shard == 0:
            return _main(cfg, *args, **kwargs)
        if not 0 <= shard < shards:
            raise UserError(f"--shard-id {shard} with --num-shards {shards}: give an id from 0 to {shards - 1}")
        world = cfg.distributed_training.distributed_world_size
        if world > 1:
            raise UserError(f"--num-shards {shards} with --distributed-world-size {world}: fairseq-generate "
                            "shards by the world size; give one of the two")
        cfg = copy.deepcopy(cfg)  # the caller's config stays as it is
        cfg.distributed_training.distributed_world_size = shards
        cfg.distributed_training.distributed_rank = shard
        logger.info("--num-shards %d --shard-id %d: translating the batches b of %s with b mod %d = %d",
                    shards, shard, cfg.dataset.gen_subset, shards, shard)
        return _main(cfg, *args, **kwargs)

    return wrapper


@patch(FIX, "fairseq-generate with --num-shards above 1, for every model (fairseq translated every shard whole)")
def patch_generate_shards():
    """fairseq-generate's ``_main`` runs with ``--num-shards``/``--shard-id`` as its world size
    and rank."""
    for module in fairseq_cli_modules("generate"):
        wrap_once(module, "_main", _honouring_shards)
