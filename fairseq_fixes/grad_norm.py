"""Gradient clipping: the norm is computed where the gradients are.

``fairseq.utils.clip_grad_norm_`` (0.12) sums the per-parameter norms on
``torch.cuda.current_device()`` whenever CUDA is available and apex's fused
``amp_C`` kernels are not, whatever device the gradients are on. So ``fairseq-train
--cpu`` on a machine with a GPU stops at its first update with ``--clip-norm`` above 0
(fairseq's default is 0, the Luong and Bahdanau recipes clip at 5 and 1)::

    torch._foreach_mul_(grads + expert_grads, clip_coef)
    RuntimeError: scalar tensor is expected to be on cpu but is on cuda:0

(found by ``scripts/bench/gpu_check.py``'s CPU reference training on an NVIDIA H200,
torch 2.11.0+cu130). When no gradient is on a CUDA device, the wrapper below does what
fairseq's function does on a machine without CUDA: the float32 norm of each gradient,
their norm, ``aggregate_norm_fn``, then every gradient (experts' too) scaled by
``min(1, max_norm / (norm + 1e-6))``. With a gradient on CUDA, fairseq's own function
runs, unchanged.
"""
import functools

import torch
from fairseq import utils

from .patching import FIX, patch, wrap_once


def _norm_where_the_grads_are(clip_grad_norm_):
    @functools.wraps(clip_grad_norm_)
    def wrapper(params, max_norm, aggregate_norm_fn=None):
        params = [params] if isinstance(params, torch.Tensor) else list(params)
        with_grad = [p for p in params if p is not None and getattr(p, "grad", None) is not None]
        if len(with_grad) < 2 or not torch.cuda.is_available() or any(p.grad.is_cuda for p in with_grad):
            return clip_grad_norm_(params, max_norm, aggregate_norm_fn)  # fairseq's choice is right here
        grads = [p.grad.detach() for p in with_grad if not hasattr(p, "expert")]
        expert_grads = [p.grad.detach() for p in with_grad if hasattr(p, "expert")]
        if not grads:
            return clip_grad_norm_(params, max_norm, aggregate_norm_fn)
        total_norm = torch.norm(torch.stack([torch.norm(g, p=2, dtype=torch.float32) for g in grads]))
        if aggregate_norm_fn is not None:
            total_norm = aggregate_norm_fn(total_norm)
        if max_norm > 0:
            clip_coef = (float(max_norm) / (total_norm + 1e-6)).clamp_(max=1)
            torch._foreach_mul_(grads + expert_grads, clip_coef)
        return total_norm

    return torch.no_grad()(wrapper)


@patch(FIX, "--clip-norm with --cpu on a machine with a GPU, for every model")
def patch_grad_norm_device():
    wrap_once(utils, "clip_grad_norm_", _norm_where_the_grads_are)
