"""Luong et al.'s attention one decoder step at a time, forward and backward, without autograd.

The step loops (``luong/input_feeding.py``, ``rnnsearch/steps.py``) attend once per target step
with the state of that step. ``attention_steps(attention, memory, ...)`` returns, for one call,
an object that

* ``forward(q)`` attends from the query q (rows x H: the rows still going at this step) and
  returns the context c_t (rows x C), keeping what its backward reads;
* ``backward(d_ctx, q, t)`` returns the query's gradient at step t (``begin_backward()``
  first; the steps in reverse order; a graph kept with ``retain_graph`` runs them again);
* ``finish(Q, unpack)`` returns, after the loop, the gradients of ``inputs()`` (the memory's
  values and keys and the parameters the steps read), from the queries of every step (Q:
  packed, step-major) and ``unpack`` (packed -> bsz x tgtlen x ..., zeros where a row had
  ended): the memory's gradients as batched products over all steps, not one per step.

The equations are those of ``luong/attention.py`` (eq. 7, 9, 10; masking and the softmax in
float32) and the score steps of ``luong/scores.py`` (eq. 8); ``tests/test_step_loops.py``
checks these steps against the autograd modules and by ``gradcheck``.
"""
from typing import Dict, List, Optional

import torch
from torch import Tensor

from ..steps.ops import MemoryPlan, dot_rows
from .attention import (
    LocalAttention,
    LocalPAttention,
    SourceMemory,
    gaussian_window,
    gaussian_window_backward,
    predictive_alignment,
    predictive_alignment_backward,
)


def attention_steps(attention, memory: SourceMemory, dtype: torch.dtype, save: bool,
                    need_weights: bool, step0: int = 0):
    """The step object of ``attention`` (a module of ``luong/attention.py``) for one call."""
    if isinstance(attention, LocalAttention):
        return LocalSteps(attention, memory, dtype, save, need_weights, step0)
    return GlobalSteps(attention, memory, dtype, save, need_weights)


class Slots:
    """The memory slots one step scores, for its rows: keys rows x N x K (``keys_t``: the same
    transposed), values rows x N x C (``values_t`` transposed), ``bias`` rows x N (0, or -inf:
    no weight; ``bias3``: rows x 1 x N), ``positions`` rows x N (the slots' sentence positions,
    as the score reads them) or None; ``plan``: how to compute with them (``MemoryPlan``)."""

    __slots__ = ("keys", "keys_t", "values", "values_t", "bias", "bias3", "positions", "plan")

    def __init__(self, keys, values, bias, plan: MemoryPlan, positions=None):
        self.keys, self.values, self.bias, self.positions, self.plan = keys, values, bias, positions, plan
        self.keys_t = keys.transpose(1, 2)
        self.values_t = self.keys_t if values is keys else values.transpose(1, 2)
        self.bias3 = bias.unsqueeze(1)


class GlobalSteps:
    """Global attention (Luong et al. 2015, eq. 7) one step at a time: the score of every
    source position, softmax over the sentence's real positions, c_t = sum_s a_t(s) h̄_s."""

    def __init__(self, attention, memory: SourceMemory, dtype, save: bool, need_weights: bool):
        self.score = attention.score.step(dtype)
        self.score.save = save
        self.save, self.need_weights = save, need_weights
        self.values = memory.values.to(dtype)  # bsz x srclen x C
        self.keys = self.values if memory.keys is None else memory.keys.to(dtype)  # bsz x srclen x K
        mask = memory.padding_mask  # bsz x srclen, True on padding
        self.positions = None
        if attention.score.uses_positions:
            # sentence positions of the padded slots (negative on left padding, clamped: padding)
            srclen = mask.size(1)
            steps = torch.arange(srclen, device=mask.device)
            positions = (steps.unsqueeze(0) - memory.start.unsqueeze(1)).clamp(min=0)  # bsz x srclen
            extra = self.score.extra_mask(positions)
            mask = mask if extra is None else mask | extra
            self.positions = self.score.slot_positions(positions)
        # added to the scores: 0, or -inf where a slot gets no weight (bsz x srclen)
        self.bias = torch.zeros(mask.shape, dtype=dtype, device=mask.device).masked_fill_(mask, float("-inf"))
        self.width = max(self.values.size(-1), self.keys.size(-1))  # numbers a slot, as a plan reads them
        self.plan = MemoryPlan(mask.size(1), self.width, dtype, mask.device)
        self._slots: Dict[int, Slots] = {}  # by rows: the memory's views of a row count
        self.saved: list = []  # per step
        self.weights: List[Tensor] = []  # per step, rows x srclen (need_weights)

    def begin_backward(self):
        """Before the backward's steps: what they collect starts empty."""
        self.recorded_align: List[Tensor] = []
        self.recorded_d_ctx: List[Tensor] = []
        self.recorded_d_scores: List[Tensor] = []
        self.d_keys_dense: Optional[Tensor] = None
        self.score.begin_backward()

    def inputs(self) -> List[Tensor]:
        """The tensors the steps read that may need gradients, in ``finish``'s order."""
        return [self.values] + ([self.keys] if self.keys is not self.values else []) + list(self.score.params)

    def slots(self, n: int) -> Slots:
        """The whole memory of the first n rows (made once per row count)."""
        slots = self._slots.get(n)
        if slots is None:
            positions = None if self.positions is None else self.positions[:n]
            slots = self._slots[n] = Slots(self.keys[:n], self.values[:n], self.bias[:n], self.plan, positions)
        return slots

    def forward(self, q: Tensor) -> Tensor:
        slots, plan = self.slots(q.size(0)), self.plan
        probs = plan.softmax(self.score.forward(q, slots))  # float32
        align = plan.probabilities(probs)  # rows x srclen
        if self.save:
            self.saved.append((probs, align))
        if self.need_weights:
            self.weights.append(align)
        return plan.weighted(align, slots.values)  # rows x C

    def backward(self, d_ctx: Tensor, q: Tensor, t: int) -> Tensor:
        probs, align = self.saved[t]
        n = q.size(0)
        slots = self.slots(n)
        d_scores = self.plan.softmax_backward(dot_rows(d_ctx, slots.values_t), probs)  # rows x srclen
        d_q, d_keys = self.score.backward(d_scores, q, slots, t)
        self.recorded_align.append(align)
        self.recorded_d_ctx.append(d_ctx)
        self._record_keys(d_keys, n)
        return d_q

    def _record_keys(self, d_keys, n: int):
        if d_keys is None:
            return
        kind, d = d_keys
        if kind == "outer":  # rows x srclen, formed after the loop
            self.recorded_d_scores.append(d)
        else:  # rows x srclen x K, summed here
            if self.d_keys_dense is None:
                self.d_keys_dense = torch.zeros_like(self.keys)
            self.d_keys_dense[:n] += d

    def finish(self, Q: Tensor, unpack) -> List[Optional[Tensor]]:
        """The gradients of ``inputs()``. Q: the queries of every step, packed (sum of rows x H)."""
        # d h̄_s = sum_t a_t(s) d c_t: bsz x srclen x tgtlen @ bsz x tgtlen x C
        align = unpack(torch.cat(self.recorded_align[::-1]))  # bsz x tgtlen x srclen
        d_values = torch.bmm(align.transpose(1, 2), unpack(torch.cat(self.recorded_d_ctx[::-1])))
        d_keys = self.d_keys_dense
        if self.recorded_d_scores:  # d k_s = sum_t d score_t(s) q_t: bsz x srclen x tgtlen @ bsz x tgtlen x K
            d_scores = unpack(torch.cat(self.recorded_d_scores[::-1]))
            d_keys = torch.bmm(d_scores.transpose(1, 2), unpack(Q))
        grads: List[Optional[Tensor]] = [d_values]
        if self.keys is self.values:
            if d_keys is not None:
                d_values += d_keys
        else:
            grads.append(d_keys)
        return grads + list(self.score.param_grads(Q))


class LocalSteps(GlobalSteps):
    """Local attention (Luong et al. 2015, section 3.2) one step at a time: the window
    [p_t - D, p_t + D] around the aligned position p_t (local-m: t; local-p: eq. 9), scored
    and normalised over its slots inside the sentence; local-p reweights the window by eq. 10's
    Gaussian. Short sources (``LocalAttention.scores_whole``) are scored whole with all but the
    window masked, longer ones gather the window's keys and values (``LocalAttention``)."""

    def __init__(self, attention: LocalAttention, memory: SourceMemory, dtype, save, need_weights, step0: int):
        super().__init__(attention, memory, dtype, save, need_weights)
        self.attention = attention
        self.predictive = isinstance(attention, LocalPAttention)
        if self.predictive:
            self.W_p = attention.W_p.weight.to(dtype)  # H x H
            self.v_p = attention.v_p.weight.to(dtype)  # 1 x H
        self.t = step0
        self.length, self.start = memory.length, memory.start  # bsz
        self.last = memory.length - 1  # bsz: each sentence's last position
        bsz, srclen = memory.padding_mask.shape
        self.srclen = srclen
        self.dense = attention.scores_whole(srclen)
        if self.dense:
            # sentence positions of the padded slots (negative on left padding): bsz x srclen
            self.slot_positions = (torch.arange(srclen, device=self.bias.device).unsqueeze(0)
                                   - memory.start.unsqueeze(1))
        else:
            # each row's first slot in the flattened memory: bsz
            self.row_base = torch.arange(bsz, device=self.bias.device) * srclen + memory.start
            self.window_plan = MemoryPlan(attention.offsets.numel(), self.width, dtype, self.bias.device)

    def begin_backward(self):
        super().begin_backward()
        self.recorded_p: list = []
        self.d_values_flat: Optional[Tensor] = None
        self.d_keys_flat: Optional[Tensor] = None

    def inputs(self):
        return super().inputs() + ([self.W_p, self.v_p] if self.predictive else [])

    def _aligned_position(self, q: Tensor):
        """p_t for the rows of this step (rows, float32 or wider) and what its backward reads."""
        n = q.size(0)
        if self.predictive:  # eq. 9
            return predictive_alignment(q, self.W_p, self.v_p, self.length[:n])
        # local-m: p_t = t, clipped to the sentence
        wide = torch.promote_types(q.dtype, torch.float32)
        return torch.clamp(self.last[:n], max=self.t).to(wide), None

    def _window(self, p_t: Tensor, n: int):
        """The window's slots (``Slots``), their sentence positions (rows x W, or rows x srclen
        when dense) and, for a gathered window, its slots' rows in the flattened memory."""
        positions, valid = self.attention.window_positions(p_t.unsqueeze(1), self.length[:n])
        positions, valid = positions.squeeze(1), valid.squeeze(1)  # rows x W
        if self.dense:  # the whole memory, masked outside [centre - D, centre + D]
            whole = self.slots(n)
            slots = self.slot_positions[:n]  # rows x srclen
            inside = (slots >= positions[:, :1]) & (slots <= positions[:, -1:])
            bias = torch.where(inside, whole.bias, float("-inf"))
            return Slots(whole.keys, whole.values, bias, self.plan), slots, None
        bias = torch.zeros(valid.shape, dtype=self.bias.dtype, device=valid.device).masked_fill_(~valid, float("-inf"))
        # invalid slots read a valid one (their weight is exactly 0): padded index, flattened
        inside = torch.minimum(positions.clamp(min=0), self.last[:n].unsqueeze(1))
        flat = (self.row_base[:n].unsqueeze(1) + inside).view(-1)  # rows*W
        keys, values = self._gather(flat, n)
        return Slots(keys, values, bias, self.window_plan), positions, flat

    def _gather(self, flat: Tensor, n: int):
        """A window's keys and values: rows x W x K and rows x W x C."""
        values = self.values.reshape(-1, self.values.size(-1)).index_select(0, flat).view(n, -1, self.values.size(-1))
        if self.keys is self.values:
            return values, values
        return self.keys.reshape(-1, self.keys.size(-1)).index_select(0, flat).view(n, -1, self.keys.size(-1)), values

    def forward(self, q):
        n = q.size(0)
        p_t, p_saved = self._aligned_position(q)
        slots, positions, flat = self._window(p_t, n)
        plan = slots.plan
        probs = plan.softmax(self.score.forward(q, slots))  # float32
        align = plan.probabilities(probs)  # rows x N
        weighted, gauss = align, None
        if self.predictive:  # eq. 10, not renormalised
            gauss = gaussian_window(positions.unsqueeze(1), p_t.unsqueeze(1), self.attention.sigma).squeeze(1)
            weighted = align * gauss.to(align.dtype)
        if self.save:
            # a gathered window's slots are gathered again in the backward, not kept
            self.saved.append((probs, align, weighted, gauss, p_t, p_saved, positions, flat,
                               slots if flat is None else slots.bias))
        if self.need_weights:
            self.weights.append(weighted if flat is None else weighted.new_zeros(n, self.srclen).scatter_add_(
                1, (flat.view(n, -1) - self.row_base[:n].unsqueeze(1) + self.start[:n].unsqueeze(1)), weighted))
        self.t += 1
        return plan.weighted(weighted, slots.values)  # rows x C

    def backward(self, d_ctx, q, t):
        probs, align, weighted, gauss, p_t, p_saved, positions, flat, slots = self.saved[t]
        n = q.size(0)
        if flat is not None:
            slots = Slots(*self._gather(flat, n), slots, self.window_plan)
        d_weighted = dot_rows(d_ctx, slots.values_t)  # rows x N
        d_align = d_weighted
        if self.predictive:
            d_align = d_weighted * gauss.to(d_weighted.dtype)
            d_p = gaussian_window_backward(d_weighted * align, gauss, positions, p_t, self.attention.sigma)
        d_q, d_keys = self.score.backward(slots.plan.softmax_backward(d_align, probs), q, slots, t)
        if self.predictive:
            d_q = d_q + predictive_alignment_backward(d_p, p_saved, self.W_p, self.v_p, self.length[:n],
                                                      self.recorded_p)
        if flat is None:
            self.recorded_align.append(weighted)
            self.recorded_d_ctx.append(d_ctx)
            self._record_keys(d_keys, n)
        else:  # the window's slots: their gradients added at once
            self._add_to_window(flat, weighted, d_ctx, d_keys, q)
        return d_q

    def _add_to_window(self, flat, weighted, d_ctx, d_keys, q):
        C = self.values.size(-1)
        if self.d_values_flat is None:
            self.d_values_flat = self.values.new_zeros(self.values.numel() // C, C)
        # rows x N x 1 * rows x 1 x C -> (rows*N) x C
        self.d_values_flat.index_add_(0, flat, (weighted.unsqueeze(2) * d_ctx.unsqueeze(1)).reshape(-1, C))
        if d_keys is None:
            return
        kind, d = d_keys
        if kind == "outer":  # rows x N x 1 * rows x 1 x K
            d = d.unsqueeze(2) * q.unsqueeze(1)
        K = d.size(-1)
        if self.keys is self.values:
            self.d_values_flat.index_add_(0, flat, d.reshape(-1, K))
            return
        if self.d_keys_flat is None:
            self.d_keys_flat = self.keys.new_zeros(self.keys.numel() // K, K)
        self.d_keys_flat.index_add_(0, flat, d.reshape(-1, K))

    def finish(self, Q, unpack):
        if self.dense:
            grads = super().finish(Q, unpack)
        else:
            d_values = self.d_values_flat
            grads = [None if d_values is None else d_values.view_as(self.values)]
            if self.keys is not self.values:
                grads.append(None if self.d_keys_flat is None else self.d_keys_flat.view_as(self.keys))
            grads += list(self.score.param_grads(Q))
        if self.predictive:  # W_p: H x H and v_p: 1 x H, from every step's gradients at once
            d_hidden = torch.cat([d for d, _, _ in self.recorded_p[::-1]])  # sum of rows x H
            d_logit = torch.cat([d for _, d, _ in self.recorded_p[::-1]])  # sum of rows
            hidden = torch.cat([h for _, _, h in self.recorded_p[::-1]])  # sum of rows x H
            grads += [d_hidden.t().mm(Q), d_logit.unsqueeze(0).mm(hidden)]
        return grads
