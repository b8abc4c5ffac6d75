"""fairseq's label-smoothed cross entropy with the output layer fused in, chunked over tokens.

``--criterion fused_label_smoothed_cross_entropy`` takes the same options and computes the
same loss as ``label_smoothed_cross_entropy`` (same value and gradients up to float
rounding; tests compare both), but never builds the tokens x vocabulary logits,
log-probabilities and their gradients as whole tensors:

* padding positions are dropped before the output layer (fairseq computes and discards
  them);
* the non-padding tokens go through W_s (eq. 6) ``--loss-chunk-tokens`` at a time; each
  chunk's softmax, loss and gradient are computed at once, in one reused buffer, and the
  gradient is pushed through W_s straight away (so a step allocates one chunk x vocabulary
  buffer instead of several tokens x vocabulary ones, and skips fairseq's zero-filled
  gather gradient and the sum of two full-size gradients).

It needs a decoder with ``forward(..., features_only=True)`` and
``output_projection_params()`` returning (weight, bias) (LuongDecoder has both); for other
models, ``reduce=False`` or ``--ignore-prefix-size`` it falls back to fairseq's criterion.
"""
from dataclasses import dataclass, field
from typing import Optional

import torch
from fairseq import utils
from fairseq.criterions import register_criterion
from fairseq.criterions.label_smoothed_cross_entropy import (
    LabelSmoothedCrossEntropyCriterion,
    LabelSmoothedCrossEntropyCriterionConfig,
)
from torch import Tensor

from ..errors import ConfigError


@dataclass
class FusedLabelSmoothedCrossEntropyCriterionConfig(LabelSmoothedCrossEntropyCriterionConfig):
    loss_chunk_tokens: int = field(
        default=512,
        metadata={"help": "target tokens per chunk of the fused output layer + loss "
                  "(chunk x vocabulary floats are allocated once per step)"},
    )


def smoothed_loss_rows(logits: Tensor, target: Tensor, epsilon: float, want_grad: bool):
    """Label-smoothed loss of rows of logits (Szegedy et al. 2016, as fairseq computes it).

    With p = softmax(z), V classes, eps_i = epsilon / (V - 1):
      nll = -log p_y,   smooth = -sum_v log p_v,
      loss = (1 - epsilon - eps_i) * nll + eps_i * smooth
      dloss/dz = p - (1 - epsilon - eps_i) * onehot(y) - eps_i
    (the coefficient of p is 1 - epsilon - eps_i + V eps_i = 1).

    logits: n x V (float32 or double), overwritten with dloss/dz when want_grad (else with p).
    Returns (loss sum, nll sum, number of argmax hits).
    """
    vocab = logits.size(1)
    eps_i = epsilon / (vocab - 1)
    target_logit = logits.gather(1, target.unsqueeze(1)).squeeze(1)  # n
    logit_sum = logits.sum(1)  # n
    top, argmax = logits.max(1)  # n, n
    logits.sub_(top.unsqueeze(1)).exp_()  # n x V: exp(z - max)
    norm = logits.sum(1)  # n
    lse = top + norm.log()  # n: log sum exp z
    nll = (lse - target_logit).sum()
    smooth = (vocab * lse - logit_sum).sum()
    loss = (1.0 - epsilon - eps_i) * nll + eps_i * smooth
    if want_grad:
        logits.div_(norm.unsqueeze(1))  # n x V: p
        if eps_i:
            logits.sub_(eps_i)
        hit = logits.new_full((target.size(0), 1), -(1.0 - epsilon - eps_i))
        logits.scatter_add_(1, target.unsqueeze(1), hit)
    return loss, nll, argmax.eq(target).sum()


class FusedOutputLoss(torch.autograd.Function):
    """sum over rows of the label-smoothed loss of (features W^T + b); gradients computed
    in the forward, chunk by chunk, and scaled in the backward."""

    @staticmethod
    def forward(ctx, features, weight, bias, target, epsilon, chunk, want_grad):
        # features: n x H (padding already dropped); weight: V x H; bias: V or None; target: n
        n, vocab = features.size(0), weight.size(0)
        cdt = features.dtype  # GEMMs in the features' dtype (bf16 under autocast)
        acc = torch.promote_types(cdt, torch.float32)  # softmax and sums in >= float32
        w = weight.to(cdt)  # V x H; no copy unless mixed precision
        b = None if bias is None else bias.to(cdt)
        loss = features.new_zeros((), dtype=acc)
        nll = features.new_zeros((), dtype=acc)
        n_correct = torch.zeros((), dtype=torch.long, device=features.device)
        grad_features = torch.empty_like(features) if want_grad else None
        grad_weight = torch.zeros_like(weight, dtype=acc) if want_grad else None
        grad_bias = torch.zeros_like(bias, dtype=acc) if want_grad and bias is not None else None
        # chunk x V buffers made once and reused: the logits, and under mixed precision their
        # float32 copy (the softmax's). Fresh chunk x V tensors at every chunk cost more than the
        # copies themselves on the CPU (new pages, each touched first)
        buf = features.new_empty(min(chunk, n), vocab)
        wide = buf if acc == cdt else features.new_empty(buf.shape, dtype=acc)
        # and for the weight's gradient under mixed precision: each chunk's V x H product in
        # cdt and its acc copy, added to the sum (an add of mixed dtypes would copy anew)
        if want_grad and acc != cdt:
            part, part_wide = torch.empty_like(w), torch.empty_like(grad_weight)
        with torch.autocast(features.device.type, enabled=False):
            for start in range(0, n, chunk):
                f = features[start : start + chunk]  # m x H
                t = target[start : start + chunk]  # m
                logits = buf[: f.size(0)]  # m x V
                if b is None:
                    torch.mm(f, w.t(), out=logits)
                else:
                    torch.addmm(b, f, w.t(), out=logits)
                rows = logits if wide is buf else wide[: f.size(0)].copy_(logits)  # m x V, in acc
                chunk_loss, chunk_nll, hits = smoothed_loss_rows(rows, t, epsilon, want_grad)
                loss += chunk_loss
                nll += chunk_nll
                n_correct += hits
                if want_grad:
                    g = rows if wide is buf else logits.copy_(rows)  # m x V: dloss/dlogits, in cdt
                    torch.mm(g, w, out=grad_features[start : start + chunk])  # m x H
                    if acc == cdt:
                        grad_weight.addmm_(g.t(), f)  # V x H
                    else:
                        grad_weight += part_wide.copy_(torch.mm(g.t(), f, out=part))
                    if grad_bias is not None:
                        grad_bias += rows.sum(0)
        if want_grad:
            grad_weight = grad_weight.to(weight.dtype)
            grad_bias = None if grad_bias is None else grad_bias.to(bias.dtype)
        ctx.save_for_backward(grad_features, grad_weight, grad_bias)
        ctx.mark_non_differentiable(nll, n_correct)
        return loss, nll, n_correct

    @staticmethod
    def backward(ctx, grad_loss, grad_nll, grad_correct):
        grad_features, grad_weight, grad_bias = ctx.saved_tensors
        if grad_features is None:
            raise RuntimeError("FusedOutputLoss: gradients were not computed in the forward "
                               "(it ran with autograd off)")
        return (
            grad_features * grad_loss.to(grad_features.dtype),
            grad_weight * grad_loss.to(grad_weight.dtype),
            None if grad_bias is None else grad_bias * grad_loss.to(grad_bias.dtype),
            None, None, None, None,
        )


def fused_output_loss(features: Tensor, weight: Tensor, bias: Optional[Tensor], target: Tensor,
                      epsilon: float, chunk: int):
    """(loss sum, nll sum, argmax hits) of softmax(features W^T + b) against target."""
    want_grad = torch.is_grad_enabled() and any(
        t is not None and t.requires_grad for t in (features, weight, bias)
    )
    return FusedOutputLoss.apply(features, weight, bias, target, epsilon, chunk, want_grad)


@register_criterion(
    "fused_label_smoothed_cross_entropy", dataclass=FusedLabelSmoothedCrossEntropyCriterionConfig
)
class FusedLabelSmoothedCrossEntropyCriterion(LabelSmoothedCrossEntropyCriterion):
    def __init__(self, task, sentence_avg, label_smoothing, ignore_prefix_size=0,
                 report_accuracy=False, loss_chunk_tokens=512):
        super().__init__(task, sentence_avg, label_smoothing, ignore_prefix_size, report_accuracy)
        if loss_chunk_tokens < 1:
            raise ConfigError(f"--loss-chunk-tokens must be >= 1, got {loss_chunk_tokens}")
        self.chunk = loss_chunk_tokens

    def forward(self, model, sample, reduce=True):
        decoder = getattr(model, "decoder", None)
        if not reduce or self.ignore_prefix_size > 0 or not hasattr(decoder, "output_projection_params"):
            return super().forward(model, sample, reduce=reduce)
        features, _ = model(**sample["net_input"], features_only=True)  # B x T x H
        target = sample["target"]  # B x T
        keep = target.ne(self.padding_idx).view(-1)  # B*T
        features = features.reshape(-1, features.size(-1))[keep]  # n x H (non-padding)
        weight, bias = decoder.output_projection_params()
        loss, nll_loss, n_correct = fused_output_loss(
            features, weight, bias, target.view(-1)[keep], self.eps, self.chunk
        )
        sample_size = sample["target"].size(0) if self.sentence_avg else sample["ntokens"]
        logging_output = {
            "loss": loss.data,
            "nll_loss": nll_loss.data,
            "ntokens": sample["ntokens"],
            "nsentences": sample["target"].size(0),
            "sample_size": sample_size,
        }
        if self.report_accuracy:
            logging_output["n_correct"] = utils.item(n_correct)
            logging_output["total"] = int(keep.sum())
        return loss, sample_size, logging_output
