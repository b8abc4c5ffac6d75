"""``--bf16``, ``--fp16`` and ``--amp`` do what they say on CPUs and GPUs.

What fairseq does with them, and what we change:

* ``--bf16`` makes ``parse_args_and_arch`` set ``--tpu`` too, so without
  torch_xla it stops at ``'NoneType' object has no attribute 'xla_device'``,
  on a GPU as on the CPU. Without torch_xla we take the TPU back out: the
  trainer then keeps bfloat16 weights with float32 master copies (fairseq's
  ``FP16Optimizer``, no loss scaling), on the GPU or the CPU.
* ``--fp16`` builds ``FP16Optimizer`` with flattened float32 master
  weights keyed by ``torch.cuda.current_device()``, which fails on a machine
  without CUDA. On the CPU we use fairseq's unflattened master copies
  (``--fp16-no-flatten-grads``, what ``--bf16`` uses everywhere).
* ``--fp16`` on the CPU dies at the first gradient overflow: the trainer's handler sets
  ``grad_norm = torch.tensor(0.0).cuda()`` (``Trainer.train_step``), which on a torch
  without CUDA raises ``Torch not compiled with CUDA enabled``. On the CPU, ``.cuda()``
  inside a training step (in the thread that runs it) now leaves the tensor where it is: the step is skipped and the
  loss scale lowered, as on a GPU.
* ``--amp`` autocasts with ``torch.cuda.amp.autocast``, which does nothing
  on the CPU: the run silently trains in float32. On the CPU we autocast the
  forward pass (the criterion call, as fairseq does on CUDA) to bfloat16,
  ``torch.autocast('cpu')``'s type, which needs no loss scaling. On a GPU
  ``--amp`` is unchanged (float16 autocast with a gradient scaler).

fairseq-generate and fairseq-interactive halve the models for ``--fp16`` and
ignore ``--bf16`` and ``--amp``: they translated in float32 without a word. There
each flag now does what it does in training: ``--bf16`` converts the models to
bfloat16 where fairseq halves them for ``--fp16`` (just before
``prepare_for_inference_``), and ``--amp`` runs every generation step
(``FairseqTask.inference_step``) under autocast, bfloat16 on the CPU and float16
on a GPU. The commands' main functions mark the run (a context variable), so a
model prepared elsewhere (fairseq's hub interface, whose config is the
checkpoint's training config) is left as it is.

Each change is logged. On a CPU without native bfloat16/float16 arithmetic
(AVX2 only, like the test machine's) these flags only check that a GPU recipe
runs; their speed on CPUs with native support is not measured here.
"""
import contextvars
import functools
import logging

import torch
from fairseq.distributed import utils as distributed_utils
from fairseq.models import BaseFairseqModel
from fairseq.optim.amp_optimizer import AMPOptimizer
from fairseq.tasks import FairseqTask
from fairseq.trainer import Trainer
from omegaconf import DictConfig

from .patching import FIX, as_config, fairseq_cli_modules, patch, runs_on_cpu, wrap_once

logger = logging.getLogger(__name__)


def fix_precision_flags(cfg):
    """Make --bf16/--fp16 runnable without a TPU or CUDA (in place on the full config)."""
    common = cfg.common
    if common.bf16 and common.tpu and distributed_utils.xm is None:
        for group in cfg.values():  # common, distributed_training, optimizer hold copies
            if isinstance(group, DictConfig) and group.get("tpu"):
                group.tpu = False
        logger.info("--bf16 without torch_xla: bfloat16 weights on the %s, not a TPU "
                    "(fairseq's --bf16 implies --tpu)", "CPU" if runs_on_cpu(cfg) else "GPU")
    if common.fp16 and runs_on_cpu(cfg) and not common.fp16_no_flatten_grads:
        common.fp16_no_flatten_grads = True
        logger.info("--fp16 on the CPU: float32 master weights per parameter "
                    "(--fp16-no-flatten-grads)")
    if common.amp and runs_on_cpu(cfg):
        logger.info("--amp on the CPU: the forward pass autocasts to bfloat16 "
                    "(torch.autocast('cpu')), without loss scaling")


def _fixing_precision(call_main):
    @functools.wraps(call_main)
    def wrapper(cfg, main, **kwargs):
        fix_precision_flags(cfg)
        return call_main(cfg, main, **kwargs)

    return wrapper


class _AutocastCPU:
    """A criterion whose call runs under ``torch.autocast('cpu', torch.bfloat16)``."""

    def __init__(self, criterion):
        self._criterion = criterion

    def __getattr__(self, name):
        return getattr(self._criterion, name)

    def __call__(self, *args, **kwargs):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            return self._criterion(*args, **kwargs)


def _on_cpu(model):
    return next(model.parameters()).device.type == "cpu"


def _amp_on_cpu(train_step):
    @functools.wraps(train_step)
    def wrapper(self, sample, model, criterion, optimizer, *args, **kwargs):
        if isinstance(optimizer, AMPOptimizer) and _on_cpu(model):
            criterion = _AutocastCPU(criterion)
        return train_step(self, sample, model, criterion, optimizer, *args, **kwargs)

    return wrapper


_CPU_TRAIN_STEP = contextvars.ContextVar("fairseq_fixes_cpu_train_step", default=False)


def _stays_in_a_cpu_train_step(cuda):
    """``Tensor.cuda()`` returns the tensor itself inside a training step on the CPU (in that
    thread: fairseq's batch-collating threads are not affected); everywhere else it is torch's."""
    @functools.wraps(cuda)
    def wrapper(self, *args, **kwargs):
        if _CPU_TRAIN_STEP.get():
            return self
        return cuda(self, *args, **kwargs)

    return wrapper


def _overflow_on_cpu(train_step):
    @functools.wraps(train_step)
    def wrapper(self, *args, **kwargs):
        if not runs_on_cpu(self.cfg):
            return train_step(self, *args, **kwargs)
        token = _CPU_TRAIN_STEP.set(True)  # fairseq's overflow handler: torch.tensor(0.0).cuda()
        try:
            return train_step(self, *args, **kwargs)
        finally:
            _CPU_TRAIN_STEP.reset(token)

    return wrapper


def _no_cuda_scaler_on_cpu(init):
    @functools.wraps(init)
    def wrapper(self, cfg, params, *args, **kwargs):
        init(self, cfg, params, *args, **kwargs)
        params = list(params)
        if params and params[0].device.type == "cpu":
            # bfloat16 needs no loss scaling; torch.cuda.amp's scaler would want CUDA
            self._grad_scaler = torch.amp.GradScaler("cpu", enabled=False)

    return wrapper


# ------------------------------------------------------------------ generation

# "bf16" or "amp" while fairseq-generate / fairseq-interactive run with that flag
_GENERATION_PRECISION = contextvars.ContextVar("fairseq_fixes_generation_precision", default=None)


def generation_precision(cfg):
    """What fairseq-generate/-interactive must do beyond fairseq: "bf16", "amp" or None."""
    common = cfg.common
    if common.fp16:
        return None  # fairseq halves the models itself
    if common.bf16 or getattr(common, "memory_efficient_bf16", False):
        return "bf16"
    return "amp" if common.amp else None


def _marking_precision(main):
    @functools.wraps(main)
    def wrapper(cfg, *args, **kwargs):
        cfg = as_config(cfg)  # interactive.main takes a Namespace too
        token = _GENERATION_PRECISION.set(generation_precision(cfg))
        try:
            return main(cfg, *args, **kwargs)
        finally:
            _GENERATION_PRECISION.reset(token)

    return wrapper


def _autocast_dtype(device_type):
    return torch.bfloat16 if device_type == "cpu" else torch.float16


def _precision_for_generation(prepare_for_inference_):
    @functools.wraps(prepare_for_inference_)
    def wrapper(self, cfg, *args, **kwargs):
        precision = _GENERATION_PRECISION.get()
        if precision == "bf16":
            self.bfloat16()
            logger.info("--bf16: %s translates with bfloat16 weights", type(self).__name__)
        elif precision == "amp":
            device = next(self.parameters()).device.type
            logger.info("--amp: %s translates under autocast to %s (%s)", type(self).__name__,
                        str(_autocast_dtype(device)).replace("torch.", ""), device.upper())
        return prepare_for_inference_(self, cfg, *args, **kwargs)

    return wrapper


def _amp_for_generation(inference_step):
    @functools.wraps(inference_step)
    def wrapper(self, generator, models, sample, *args, **kwargs):
        if _GENERATION_PRECISION.get() != "amp":
            return inference_step(self, generator, models, sample, *args, **kwargs)
        device = next(models[0].parameters()).device.type
        with torch.autocast(device, dtype=_autocast_dtype(device)):
            return inference_step(self, generator, models, sample, *args, **kwargs)

    return wrapper


@patch(FIX, "--bf16, --fp16 and --amp training on the CPU, for every model")
def patch_training_precision():
    """``call_main`` makes the flags runnable; ``FairseqTask.train_step`` autocasts on the CPU
    under ``--amp``; ``AMPOptimizer.__init__`` takes no CUDA gradient scaler on the CPU;
    ``Trainer.train_step`` survives a gradient overflow on the CPU (``Tensor.cuda`` leaves a
    tensor where it is inside it)."""
    wrap_once(distributed_utils, "call_main", _fixing_precision)
    wrap_once(Trainer, "train_step", _overflow_on_cpu)
    wrap_once(torch.Tensor, "cuda", _stays_in_a_cpu_train_step)
    wrap_once(FairseqTask, "train_step", _amp_on_cpu)
    wrap_once(AMPOptimizer, "__init__", _no_cuda_scaler_on_cpu)


@patch(FIX, "--bf16 and --amp in fairseq-generate and -interactive, for every model (fairseq ignored both)")
def patch_generation_precision():
    """fairseq-generate's ``_main`` and fairseq-interactive's ``main`` mark the run;
    ``prepare_for_inference_`` converts to bfloat16 for ``--bf16``; ``inference_step``
    autocasts for ``--amp``."""
    wrap_once(BaseFairseqModel, "prepare_for_inference_", _precision_for_generation)
    wrap_once(FairseqTask, "inference_step", _amp_for_generation)
    for module in fairseq_cli_modules("generate"):
        wrap_once(module, "_main", _marking_precision)
    for module in fairseq_cli_modules("interactive"):
        wrap_once(module, "main", _marking_precision)
