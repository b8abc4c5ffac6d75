"""A recurrent decoder's step loop as one ``torch.autograd.Function``: backward through time
written once for the whole loop.

Autograd records every operation of every step and walks the records back one by one: on the
CPU several microseconds of bookkeeping an operation, on a GPU a kernel launch each, when a
step's arithmetic is small (Luong et al.'s input feeding at 4 x 16, or at 4 x 1000 on a GPU).
Here the forward runs with autograd off and keeps only what the backward reads; the backward
walks the steps in reverse with a few operations a step and forms each weight's gradient after
the loop, one matrix product over all steps (what cuDNN and haste do inside their RNNs).

An *engine* (``luong.input_feeding.InputFeedingSteps``, ``rnnsearch.steps.RNNsearchSteps``) holds
one call's loop: ``inputs()`` the tensors whose gradients it gives (in order), ``forward()``
the outputs, ``backward(grads)`` the inputs' gradients. :func:`run_steps` runs it through
:class:`StepLoop` when a gradient is wanted, and plainly otherwise (inference: nothing kept).
"""
from contextlib import nullcontext
from typing import Tuple

import torch
from torch import Tensor
from torch.autograd.function import once_differentiable


def compute_dtype(device: torch.device, param_dtype: torch.dtype) -> torch.dtype:
    """The dtype a step loop computes in: autocast's where it is on (the loop's matrix products
    would run in it; the engines cast their inputs once per call instead of once a step),
    the parameters' otherwise (``--fp16``/``--bf16`` models)."""
    if torch.is_autocast_enabled(device.type) and param_dtype == torch.float32:
        return torch.get_autocast_dtype(device.type)
    return param_dtype


class StepLoop(torch.autograd.Function):
    """The engine's forward without autograd; its backward through time."""

    @staticmethod
    def forward(ctx, engine, *inputs):
        ctx.set_materialize_grads(False)  # an unused output's gradient stays None
        ctx.engine, ctx.device = engine, inputs[0].device
        with _no_autocast(ctx.device):
            # new tensor objects on the same memory: autograd gives *them* this node as grad_fn.
            # An output the engine also keeps for its backward (h~_t is the feed itself at output
            # dropout 0) would otherwise hold the node that holds the engine that holds it: a
            # cycle that outlives the step until Python's cyclic collector runs
            return tuple(x.detach() for x in engine.forward())

    @staticmethod
    @once_differentiable
    def backward(ctx, *grads):
        # the engine keeps what it saved (retain_graph=True runs this again); it goes with the graph
        # (fairseq's train_step drops the loss, and so the graph, right after the backward)
        with _no_autocast(ctx.device):
            return (None,) + tuple(ctx.engine.backward(grads))


def _no_autocast(device: torch.device):
    """The engines cast their inputs to one dtype themselves; autocast would cast again."""
    kind = device.type
    return torch.autocast(kind, enabled=False) if torch.is_autocast_enabled(kind) else nullcontext()


def run_steps(engine) -> Tuple[Tensor, ...]:
    """The engine's outputs; differentiable through :class:`StepLoop` if an input needs a
    gradient. An engine keeps what its backward reads only if built with autograd on."""
    inputs = engine.inputs()
    if torch.is_grad_enabled() and any(x.requires_grad for x in inputs):
        return StepLoop.apply(engine, *inputs)
    with torch.no_grad(), _no_autocast(inputs[0].device):
        return tuple(engine.forward())
