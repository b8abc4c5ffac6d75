"""Multi-process training started by ``torchrun``, on GPUs (nccl) and on CPUs (gloo).

What fairseq 0.12 does with ``torchrun --nproc_per_node N fairseq-train ...``:
``infer_init_method`` looks at torchrun's environment only when
``--distributed-world-size`` (default: the number of GPUs, 1 on a CPU) is
above 1, so on CPUs every process trains alone, N duplicate runs writing to
one save directory; given the world size it takes the device as
``RANK % torch.cuda.device_count()`` (``ZeroDivisionError`` without GPUs, the
wrong GPU on multi-node jobs where ranks are global); and
``DistributedDataParallel`` gets ``device_ids=[device_id]``, which torch
refuses for a CPU model.

Under torchrun (its ``WORLD_SIZE``, ``RANK``, ``LOCAL_RANK``, ``MASTER_ADDR``
and ``MASTER_PORT`` are set) we take the world size, rank and local device
from that environment before fairseq looks, initialise through ``env://``
(which also serves torchrun's multi-node rendezvous), use gloo when the
processes train on the CPU (also with a hand-made ``--distributed-init-method
tcp://...``, where fairseq keeps its default nccl), and build CPU
``DistributedDataParallel`` without device ids. ``--distributed-world-size N`` on a CPU without torchrun,
which fairseq cannot start (it spawns one process per GPU), is a one-line
error that gives the torchrun command.
"""
import functools
import logging
import os

import torch
from fairseq.distributed import utils as distributed_utils
from fairseq.models import distributed_fairseq_model

from .errors import UserError
from .patching import FIX, patch, runs_on_cpu, wrap_once

logger = logging.getLogger(__name__)
TORCHRUN_ENV = ("WORLD_SIZE", "RANK", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT")


def launched_by_torchrun():
    return all(name in os.environ for name in TORCHRUN_ENV)


def init_from_torchrun(cfg):
    """Set fairseq's distributed options from torchrun's environment (in place)."""
    dt = cfg.distributed_training
    world_size = int(os.environ["WORLD_SIZE"])
    fairseq_default = max(1, torch.cuda.device_count())
    if dt.distributed_world_size not in (world_size, fairseq_default):
        raise UserError(
            f"--distributed-world-size {dt.distributed_world_size}, but torchrun started "
            f"{world_size} processes in all (WORLD_SIZE={world_size}): leave "
            "--distributed-world-size out, torchrun sets it"
        )
    dt.distributed_world_size = world_size
    if world_size == 1:
        return
    dt.distributed_rank = int(os.environ["RANK"])
    dt.device_id = int(os.environ["LOCAL_RANK"])
    dt.distributed_init_method = "env://"
    dt.distributed_no_spawn = True
    use_gloo_on_cpu(cfg)
    if dt.distributed_rank == 0:
        logger.info("torchrun: %d processes, torch.distributed backend %s, training on the %s",
                    world_size, dt.distributed_backend, "CPU" if runs_on_cpu(cfg) else "GPU")


def use_gloo_on_cpu(cfg):
    """nccl (fairseq's default backend) needs GPUs: processes training on the CPU use gloo."""
    dt = cfg.distributed_training
    if runs_on_cpu(cfg) and dt.distributed_backend == "nccl":
        dt.distributed_backend = "gloo"


def check_cpu_world_size(cfg):
    dt = cfg.distributed_training
    if (dt.distributed_world_size > 1 and dt.distributed_init_method is None
            and dt.distributed_port <= 0 and runs_on_cpu(cfg)
            and "SLURM_JOB_NODELIST" not in os.environ and "SLURM_STEP_NODELIST" not in os.environ):
        n = dt.distributed_world_size
        raise UserError(
            f"--distributed-world-size {n} on the CPU: fairseq starts one process per GPU and "
            f"there is none; start the processes with torchrun instead, without "
            f"--distributed-world-size: torchrun --standalone --nproc_per_node {n} --no-python fairseq-train ..."
        )


def _from_torchrun(call_main):
    @functools.wraps(call_main)
    def wrapper(cfg, main, **kwargs):
        if cfg.distributed_training.distributed_init_method is None:
            if launched_by_torchrun():
                init_from_torchrun(cfg)
            else:
                check_cpu_world_size(cfg)
        elif cfg.distributed_training.distributed_world_size > 1:  # --distributed-init-method given
            use_gloo_on_cpu(cfg)
        return call_main(cfg, main, **kwargs)

    return wrapper


def _no_device_ids_on_cpu(ddp):
    def cpu_or_gpu_ddp(module, *args, device_ids=None, output_device=None, **kwargs):
        """torch's DistributedDataParallel; a CPU module gets no device ids (torch requires that)."""
        if next(module.parameters()).device.type == "cpu":
            device_ids = output_device = None
        return ddp(module, *args, device_ids=device_ids, output_device=output_device, **kwargs)

    return cpu_or_gpu_ddp


@patch(FIX, "a training under torchrun on CPUs, for every model (fairseq trained each process alone)")
def patch_torchrun():
    """``call_main``: world size, rank and device from torchrun's environment, gloo on the CPU;
    ``DistributedDataParallel``: no device ids for a CPU model."""
    wrap_once(distributed_utils, "call_main", _from_torchrun)
    wrap_once(distributed_fairseq_model, "DistributedDataParallel", _no_device_ids_on_cpu)
