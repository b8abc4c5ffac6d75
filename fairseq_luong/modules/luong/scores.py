"""Alignment score functions of Luong, Pham & Manning (2015), eq. 8 and footnote 6.

Every score is a small subclass of :class:`AttentionScore`, so that global and
local attention (``luong/attention.py``) and Bahdanau et al.'s RNNsearch apply
on top of any of them. Masking, softmax and the context vector live in the
attention modules, not here.
"""
from typing import Optional, Tuple

import torch
import torch.nn as nn
from torch import Tensor

from ...errors import ConfigError
from ..layers import Linear


class AttentionScore(nn.Module):
    """score(query, h̄_s): the interface of every alignment score.

    * ``precompute(values)`` runs once per source sentence and returns the "keys"
      the score compares queries against, ``bsz x srclen x K`` (for *general* and
      *concat* the source half of W_a applied to every h̄_s). The decoder caches
      them in its incremental state and reorders them in beam search.
    * ``forward(query, keys, positions)`` returns unnormalised scores. ``query``
      is ``bsz x tgtlen x H`` (``tgtlen`` steps at once); ``keys`` is either
      ``bsz x srclen x K`` (global: the same memory for every step) or
      ``bsz x tgtlen x W x K`` (local: one window of W slots per step);
      ``positions`` holds the sentence positions of the scored slots,
      ``bsz x 1 x srclen`` or ``bsz x tgtlen x W``, and is None unless the score
      declares ``uses_positions``. The result is ``bsz x tgtlen x N`` (N =
      srclen or W).

    What a score needs is declared, not guessed from its type:

    * ``keys_are_values``: it compares queries with the values themselves (or
      ignores them): there are no keys to precompute, cache or gather, and
      ``precompute`` is never called;
    * ``uses_positions``: it needs the positions of the scored slots;
    * ``global_only``: it is defined over whole sentences and cannot score a
      local window;
    * ``content_based``: it compares h_t with the source states (dot, general,
      concat), unlike the location score. Footnote 14: a content-based a_t is read
      as the alignment of the input word y_{t-1}, a location-based one as that of
      the predicted y_t.
    """

    keys_are_values = False
    uses_positions = False
    global_only = False
    content_based = True

    def precompute(self, values: Tensor) -> Tensor:
        raise NotImplementedError

    def forward(self, query: Tensor, keys: Tensor, positions) -> Tensor:
        raise NotImplementedError

    def step(self, dtype: torch.dtype) -> "ScoreStep":
        """The same score one decoder step at a time without autograd, for one call of a step
        loop (``luong/step_attention.py``), its parameters in ``dtype``."""
        raise NotImplementedError


class ScoreStep:
    """One call's steps of a score, forward and backward, without autograd.

    The slots a step scores come as a :class:`luong.step_attention.Slots` (the memory's rows that run
    at this step, or a gathered window): ``keys`` (rows x N x K), ``keys_t`` (the same,
    transposed), ``bias`` (rows x N: 0, or -inf where a slot gets no weight; ``bias3`` the
    same as rows x 1 x N) and ``positions`` (the slots' sentence positions, rows x N, for a
    score that ``uses_positions``).

    * ``forward(q, slots)``: the scores of one step (rows x N), bias added, for the query q
      (rows x H);
    * ``backward(d_scores, q, slots, t)``: the gradient of q and of the slot keys at step t, as
      ``("outer", d_scores)`` (d_keys[r, s] = d_scores[r, s] q[r], formed by the caller),
      ``("dense", rows x N x K)`` or None (the score reads no keys);
    * ``param_grads(Q)``: after the loop, the gradients of ``params`` (the score's parameters
      as the steps read them), from the queries of every step (Q: packed, sum of rows x H).

    ``forward`` keeps what ``backward`` reads, per step; ``begin_backward`` empties what the
    backward collects (the steps go back in reverse order, again if the graph is kept).
    """

    def __init__(self, *params: Tensor):
        self.params = params
        self.save = True  # keep what the backward reads (off in inference)
        self.saved = []

    def begin_backward(self):
        self.recorded = []

    def extra_mask(self, positions: Tensor) -> Optional[Tensor]:
        """Slots this score cannot score (True), beyond padding and windows; None if none."""
        return None

    def slot_positions(self, positions: Tensor) -> Tensor:
        """The positions as ``forward`` reads them (``slots.positions``)."""
        return positions

    def forward(self, q: Tensor, slots) -> Tensor:
        raise NotImplementedError

    def backward(self, d_scores: Tensor, q: Tensor, slots, t: int):
        raise NotImplementedError

    def param_grads(self, Q: Tensor) -> Tuple[Tensor, ...]:
        return ()


class KeysDotStep(ScoreStep):
    """The step of h_t^T k_s (dot: k = h̄; general: k = W_a h̄, precomputed): a batched
    matrix-vector product per step, the mask added in the same operation."""

    def forward(self, q, slots):
        # rows x 1 x N + rows x 1 x K @ rows x K x N -> rows x N
        return torch.baddbmm(slots.bias3, q.unsqueeze(1), slots.keys_t).squeeze(1)

    def backward(self, d_scores, q, slots, t):
        return slots.plan.weighted(d_scores, slots.keys), ("outer", d_scores)  # rows x K


def _dot_with_keys(query: Tensor, keys: Tensor) -> Tensor:
    """Batched h_t^T k_s for every step and slot.

    query: bsz x tgtlen x K; keys: bsz x srclen x K or bsz x tgtlen x W x K.
    """
    if keys.dim() == 3:
        # bsz x tgtlen x K  @  bsz x K x srclen  ->  bsz x tgtlen x srclen
        return torch.bmm(query, keys.transpose(1, 2))
    # bsz x tgtlen x W x K  @  bsz x tgtlen x K x 1  ->  bsz x tgtlen x W
    return torch.matmul(keys, query.unsqueeze(-1)).squeeze(-1)


class DotScore(AttentionScore):
    """score(h_t, h̄_s) = h_t^T h̄_s (Luong et al. 2015, eq. 8, "dot")."""

    keys_are_values = True

    def __init__(self, query_dim: int, value_dim: int):
        super().__init__()
        if query_dim != value_dim:
            raise ConfigError(
                f"the dot score needs equal decoder and encoder output sizes, got "
                f"{query_dim} and {value_dim}; use --attention-score general"
            )

    def forward(self, query: Tensor, keys: Tensor, positions: Tensor) -> Tensor:
        return _dot_with_keys(query, keys)

    def step(self, dtype):
        return KeysDotStep()


class GeneralScore(AttentionScore):
    """score(h_t, h̄_s) = h_t^T W_a h̄_s (Luong et al. 2015, eq. 8, "general").

    W_a h̄_s is computed once per sentence (``precompute``), so a decoder step
    costs one batched dot product per scored slot.
    """

    def __init__(self, query_dim: int, value_dim: int):
        super().__init__()
        self.W_a = Linear(value_dim, query_dim, bias=False)

    def precompute(self, values: Tensor) -> Tensor:
        # bsz x srclen x C -> bsz x srclen x H
        return self.W_a(values)

    def forward(self, query: Tensor, keys: Tensor, positions: Tensor) -> Tensor:
        return _dot_with_keys(query, keys)

    def step(self, dtype):
        return KeysDotStep()  # the keys W_a h̄_s are precomputed: the step is dot's


def concat_score(keys: Tensor, q_a: Tensor, v_a: Tensor) -> Tuple[Tensor, Tensor]:
    """v_a^T tanh(W_q h_t + k_s) (Luong et al. 2015, eq. 8, "concat"), k_s = W_k h̄_s precomputed.

    keys: ... x N x A (N scored slots a query); q_a = W_q h_t: ... x A; v_a: 1 x A (the weight
    of ``ConcatScore.v_a``). Returns the scores (... x N) and tanh(W_q h_t + k_s) (... x N x A),
    which :meth:`ConcatStep.backward` reads. The one forward of the score: ``ConcatScore``
    (autograd) and ``ConcatStep`` (the step loops) both call it."""
    hidden = torch.add(keys, q_a.unsqueeze(-2)).tanh_()  # ... x N x A
    return torch.matmul(hidden, v_a[0]), hidden  # ... x N


class ConcatScore(AttentionScore):
    """score(h_t, h̄_s) = v_a^T tanh(W_a [h_t; h̄_s]) (Luong et al. 2015, eq. 8, "concat").

    W_a = [W_q  W_k] is stored as its two halves: W_k h̄_s is computed once per
    sentence (``precompute``), W_q h_t once per step. This is also Bahdanau et
    al.'s (2014) alignment model e_ij = v_a^T tanh(W_a s_{i-1} + U_a h_j)
    (W_q = W_a, W_k = U_a), queried there with the previous decoder state.
    """

    def __init__(self, query_dim: int, value_dim: int, attention_dim: int):
        super().__init__()
        self.W_q = Linear(query_dim, attention_dim, bias=False)
        self.W_k = Linear(value_dim, attention_dim, bias=False)
        self.v_a = Linear(attention_dim, 1, bias=False)

    def precompute(self, values: Tensor) -> Tensor:
        # bsz x srclen x C -> bsz x srclen x A
        return self.W_k(values)

    def forward(self, query: Tensor, keys: Tensor, positions: Tensor) -> Tensor:
        q = self.W_q(query)  # bsz x tgtlen x A
        if keys.dim() == 3:  # global: bsz x srclen x A, the same slots for every step
            keys = keys.unsqueeze(1)  # bsz x 1 x srclen x A
        # local: bsz x tgtlen x W x A; both + bsz x tgtlen x 1 x A -> bsz x tgtlen x N
        return concat_score(keys, q, self.v_a.weight)[0]

    def step(self, dtype):
        return ConcatStep(self.W_q.weight.to(dtype), self.v_a.weight.to(dtype))


class ConcatStep(ScoreStep):
    """The step of v_a^T tanh(W_q h_t + k_s), k_s = W_k h̄_s precomputed. Its backward gives
    the keys' gradient dense (rows x N x A), W_q's after the loop from the packed gradients of
    W_q h_t, v_a's summed step by step."""

    def begin_backward(self):
        super().begin_backward()
        self.d_v_a = torch.zeros_like(self.params[1])

    def forward(self, q, slots):
        W_q, v_a = self.params  # A x H, 1 x A
        scores, hidden = concat_score(slots.keys, q.mm(W_q.t()), v_a)  # rows x N; rows x N x A
        if self.save:
            self.saved.append(hidden)
        return scores.add_(slots.bias)  # rows x N

    def backward(self, d_scores, q, slots, t):
        W_q, v_a = self.params
        hidden = self.saved[t]
        # v_a: sum over rows and slots of d_scores * hidden: 1 x (rows*N) @ (rows*N) x A
        self.d_v_a.addmm_(d_scores.reshape(1, -1), hidden.reshape(-1, hidden.size(-1)))
        d_pre = torch.ops.aten.tanh_backward(d_scores.unsqueeze(-1) * v_a[0], hidden)  # rows x N x A
        d_q_a = d_pre.sum(1)  # rows x A: the gradient of W_q h_t
        self.recorded.append(d_q_a)
        return d_q_a.mm(W_q), ("dense", d_pre)

    def param_grads(self, Q):
        D = torch.cat(self.recorded[::-1])  # sum of rows x A, in step order as Q
        return D.t().mm(Q), self.d_v_a  # W_q: A x H; v_a: 1 x A


class LocationScore(AttentionScore):
    """a_t = softmax(W_a h_t) (Luong et al. 2015, eq. 8, "location", footnote 6).

    W_a h_t gives one score per sentence position 0 .. max_len - 1 (no bias, as in
    eq. 8; positions
    count real tokens from the sentence start, whatever the padding side).
    Footnote 6: for a shorter sentence only its first positions are used.
    Positions at or past ``max_len`` have no score: they get -inf and so
    exactly zero weight (documented in docs/models.md; choose
    ``--location-max-len`` at least as long as your longest source).
    """

    uses_positions = True
    global_only = True  # positions of a whole sentence (section 3.1)
    keys_are_values = True  # it ignores the source content: nothing to precompute
    content_based = False

    def __init__(self, query_dim: int, max_len: int):
        super().__init__()
        self.max_len = max_len
        self.W_a = Linear(query_dim, max_len, bias=False)

    def forward(self, query: Tensor, keys: Tensor, positions: Tensor) -> Tensor:
        by_position = self.W_a(query)  # bsz x tgtlen x max_len
        tgtlen = query.size(1)
        # positions: bsz x 1 x N (global) or bsz x tgtlen x N (local)
        positions = positions.expand(-1, tgtlen, -1)
        scores = by_position.gather(2, positions.clamp(0, self.max_len - 1))
        # bsz x tgtlen x N
        return scores.masked_fill(positions >= self.max_len, float("-inf"))

    def step(self, dtype):
        return LocationStep(self.W_a.weight.to(dtype), max_len=self.max_len)


class LocationStep(ScoreStep):
    """The step of (W_a h_t)[s]: the positions past ``max_len`` are masked by ``extra_mask``
    (the caller adds them to the bias once per call), the rest gathered; W_a's gradient after
    the loop from the scattered gradients of W_a h_t."""

    def __init__(self, W_a: Tensor, max_len: int):
        super().__init__(W_a)
        self.max_len = max_len

    def extra_mask(self, positions):
        return positions >= self.max_len

    def slot_positions(self, positions):
        return positions.clamp(max=self.max_len - 1)  # the others are masked by extra_mask

    def forward(self, q, slots):
        # rows x max_len, gathered at the slots' positions (clamped: the others are masked): rows x N
        return q.mm(self.params[0].t()).gather(1, slots.positions).add_(slots.bias)

    def backward(self, d_scores, q, slots, t):
        W_a = self.params[0]
        # masked slots have d_scores 0: adding them at the clamped position adds nothing
        d_by_position = d_scores.new_zeros(d_scores.size(0), self.max_len).scatter_add_(
            1, slots.positions, d_scores)  # rows x max_len
        self.recorded.append(d_by_position)
        return d_by_position.mm(W_a), None

    def param_grads(self, Q):
        return (torch.cat(self.recorded[::-1]).t().mm(Q),)  # max_len x H


def build_score(name: str, query_dim: int, value_dim: int, location_max_len: int) -> AttentionScore:
    if name == "dot":
        return DotScore(query_dim, value_dim)
    if name == "general":
        return GeneralScore(query_dim, value_dim)
    if name == "concat":
        return ConcatScore(query_dim, value_dim, query_dim)
    if name == "location":
        return LocationScore(query_dim, location_max_len)
    raise ConfigError(f"unknown --attention-score {name!r}")
