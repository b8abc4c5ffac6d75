"""Global and local attention of Luong, Pham & Manning (2015), sections 3.1-3.2.

Every attention is an :class:`Attention`: ``precompute(...)`` builds the
:class:`SourceMemory` once per sentence (the score's keys included), and
``forward(query, memory, step0, need_weights)`` attends:

* ``query``: the decoder state the score compares with the memory for
  ``tgtlen`` consecutive steps, ``bsz x tgtlen x H`` (``tgtlen`` is 1 inside a
  step-by-step loop and in incremental decoding, the whole target otherwise);
* ``memory``: a :class:`SourceMemory`;
* ``step0``: the target index of the first query (local-m needs t);
* returns the context c_t (``bsz x tgtlen x C``) and, if ``need_weights``, the
  alignment a_t over the padded source positions (``bsz x tgtlen x srclen``,
  exactly zero on padding and, for local attention, outside the window).

The score function (``luong/scores.py``) is pluggable and declares what it
needs; the softmax (:func:`softmax_wide`), eq. 9 and eq. 10 live here, once, for the
attention modules and the step loops (``luong/step_attention.py``) alike; each has one backward,
the step loops'. The attentional hidden state of eq. 5 is :class:`AttentionalHidden`.
"""
from typing import NamedTuple, Optional, Tuple

import torch
import torch.nn as nn
from torch import Tensor
from torch.utils.checkpoint import checkpoint

from ...errors import ConfigError
from .. import cpu_sizes
from ..layers import Linear
from ..steps.ops import at_least_float32, softmax_wide
from .scores import AttentionScore


class SourceMemory(NamedTuple):
    """What attention reads, per sentence; every field is batch-first."""

    values: Tensor  # bsz x srclen x C: h̄_s at the ORIGINAL padded positions
    keys: Optional[Tensor]  # bsz x srclen x K: score.precompute(values); None if keys_are_values
    padding_mask: Tensor  # bsz x srclen: True on padding
    start: Tensor  # bsz: padded index of each sentence's first token
    length: Tensor  # bsz: each sentence's length S, appended EOS included

    def score_keys(self) -> Tensor:
        """What the score compares queries against: the keys, or the values themselves."""
        return self.values if self.keys is None else self.keys

    def map_rows(self, select) -> "SourceMemory":
        """``select`` (a row selection: index_select, narrowing) applied to every field."""
        return SourceMemory(*(None if field is None else select(field) for field in self))


def masked_softmax(scores: Tensor, mask: Tensor) -> Tensor:
    """softmax over the last dim with ``mask`` (True = excluded) at exactly 0, in float32 or
    wider (:func:`softmax_wide`) and cast back to the scores' dtype."""
    return softmax_wide(scores.masked_fill(mask, float("-inf")), -1).type_as(scores)


class Attention(nn.Module):
    """The interface of global and local attention (see the module docstring)."""

    def __init__(self, score: AttentionScore):
        super().__init__()
        self.score = score

    def precompute(self, values: Tensor, padding_mask: Tensor, start: Tensor, length: Tensor,
                   keys: Optional[Tensor] = None) -> SourceMemory:
        """The memory of a batch of sentences; ``keys`` if already computed (cached in
        incremental decoding), else the score's precomputed keys, once per sentence."""
        if keys is None and not self.score.keys_are_values:
            keys = self.score.precompute(values)  # bsz x srclen x K
        return SourceMemory(values, keys, padding_mask, start, length)

    def forward(self, query: Tensor, memory: SourceMemory, step0: int,
                need_weights: bool) -> Tuple[Tensor, Optional[Tensor]]:
        raise NotImplementedError


class GlobalAttention(Attention):
    """a_t(s) = exp(score(h_t, h̄_s)) / sum_s' exp(score(h_t, h̄_s')) (Luong et al. 2015, eq. 7).

    Over each sentence's real positions only; c_t = sum_s a_t(s) h̄_s.
    """

    def forward(self, query, memory, step0, need_weights):
        positions = None
        if self.score.uses_positions:
            srclen = memory.values.size(1)
            # sentence positions of the padded slots (negative on left padding)
            positions = torch.arange(srclen, device=query.device).unsqueeze(0) - memory.start.unsqueeze(1)
            positions = positions.clamp(min=0).unsqueeze(1)  # bsz x 1 x srclen
        scores = self.score(query, memory.score_keys(), positions)  # bsz x tgtlen x srclen
        align = masked_softmax(scores, memory.padding_mask.unsqueeze(1))
        # bsz x tgtlen x srclen @ bsz x srclen x C -> bsz x tgtlen x C
        context = torch.bmm(align, memory.values)
        return context, (align if need_weights else None)


def predictive_alignment(h: Tensor, W_p: Tensor, v_p: Tensor, src_len: Tensor):
    """p_t = S * sigmoid(v_p^T tanh(W_p h_t)) (Luong et al. 2015, eq. 9).

    h: ... x H (rows x H in a step loop, bsz x tgtlen x H in the attention module); W_p: H x H
    and v_p: 1 x H, the weights of ``LocalPAttention``'s W_p and v_p; src_len: each row's own
    S, shaped as h's leading dims or broadcast to them (bsz x 1). Returns p_t (h's leading dims,
    real-valued in [0, S], float32 or wider whatever the autocast dtype: bf16 could not even
    represent every integer position past 256) and what :func:`predictive_alignment_backward`
    reads. Differentiable: the attention module's autograd goes through it."""
    # mm for a step's rows x H (one operation, as the step loops count them), matmul otherwise
    times = torch.mm if h.dim() == 2 else torch.matmul
    hidden = torch.tanh(times(h, W_p.t()))  # ... x H
    logit = times(hidden, v_p.t()).squeeze(-1)  # ...
    sig = torch.sigmoid(logit.to(at_least_float32(logit.dtype)))
    return src_len.to(sig.dtype) * sig, (hidden, sig)


def predictive_alignment_backward(d_p: Tensor, saved, W_p: Tensor, v_p: Tensor, src_len: Tensor,
                                  recorded: list) -> Tensor:
    """h's gradient (rows x H) from p_t's (rows) through eq. 9; appends to ``recorded`` what the
    weights' gradients are formed from after the loop: (d(W_p h), d logit, tanh(W_p h))."""
    hidden, sig = saved
    d_logit = torch.ops.aten.sigmoid_backward(d_p * src_len.to(sig.dtype), sig).to(hidden.dtype)  # rows
    d_hidden = torch.ops.aten.tanh_backward(d_logit.unsqueeze(1) * v_p, hidden)  # rows x H
    recorded.append((d_hidden, d_logit, hidden))
    return d_hidden.mm(W_p)


def gaussian_window(positions: Tensor, p_t: Tensor, sigma: float) -> Tensor:
    """exp(-(s - p_t)^2 / (2 sigma^2)) (Luong et al. 2015, eq. 10), sigma = D / 2.

    positions: integer source positions s, bsz x tgtlen x W; p_t: bsz x tgtlen.
    """
    return torch.exp(-((positions.to(p_t.dtype) - p_t.unsqueeze(-1)) ** 2) / (2.0 * sigma**2))


def gaussian_window_backward(d_window: Tensor, window: Tensor, positions: Tensor, p_t: Tensor,
                             sigma: float) -> Tensor:
    """p_t's gradient (rows) from that of eq. 10's window (rows x W, any float dtype):
    d exp(-(s - p_t)^2 / (2 sigma^2)) / d p_t = window * (s - p_t) / sigma^2, summed over s.
    window: rows x W as :func:`gaussian_window` gave it; positions rows x W; p_t rows."""
    offset = positions.to(p_t.dtype) - p_t.unsqueeze(-1)  # rows x W
    return (d_window.to(window.dtype) * window * offset).sum(-1) / sigma**2


class LocalAttention(Attention):
    """Local attention (Luong et al. 2015, section 3.2, footnotes 8-10).

    The window [p_t - D, p_t + D] (2D + 1 slots, centred on floor(p_t)) is
    gathered from the memory and scored; nothing outside it is scored, so a
    step costs O(D), not O(S). For sources at most ``cpu_sizes.LOCAL_DENSE_UP_TO`` windows long the
    whole memory is scored instead and all but the window masked (the same
    alignment, cheaper there). Slots outside the sentence or on padding get
    exactly zero weight and the softmax runs over the valid slots only
    (footnote 8). Subclasses say how p_t is found (:meth:`aligned_position`)
    and may reweight the window's alignment (:meth:`reweight`).

    Positions count from each sentence's first token in the ORIGINAL source
    order (the encoder maps reversed sources back), and the memory holds the
    appended EOS, so S = words + 1 (docs/models.md says why).
    """

    def __init__(self, score: AttentionScore, window: int):
        super().__init__(score)
        if score.global_only:
            raise ConfigError(
                f"the {type(score).__name__} is global-only (Luong et al. 2015, section 3.1): "
                "use --attention-type global"
            )
        if window < 0:
            raise ConfigError(f"--local-window must be >= 0, got {window}")
        self.window = window
        self.register_buffer("offsets", torch.arange(-window, window + 1), persistent=False)

    def aligned_position(self, query: Tensor, memory: SourceMemory, step0: int) -> Tensor:
        """p_t for every query step: bsz x tgtlen, float32 or wider."""
        raise NotImplementedError

    def reweight(self, align: Tensor, positions: Tensor, p_t: Tensor) -> Tensor:
        """The window's alignment (bsz x tgtlen x W) after the softmax; unchanged here."""
        return align

    def window_positions(self, p_t: Tensor, length: Tensor) -> Tuple[Tensor, Tensor]:
        """The window [p_t - D, p_t + D]: the 2D + 1 sentence positions centred on floor(p_t)
        (bsz x tgtlen x W; the centre clipped to the sentence's last position: p_t = S only
        if the sigmoid saturates to 1.0 in floating point), and which of them lie inside the
        sentence (footnote 8: the others get no weight). p_t: bsz x tgtlen; length: bsz."""
        last = (length - 1).view(-1, 1, 1)
        centre = torch.minimum(p_t.detach().floor().long().unsqueeze(-1), last)  # bsz x tgtlen x 1
        positions = centre + self.offsets  # bsz x tgtlen x W
        return positions, (positions >= 0) & (positions <= last)

    def scores_whole(self, srclen: int) -> bool:
        """Whether a memory of ``srclen`` slots is scored whole (all but the window masked)
        rather than the window gathered: at most ``cpu_sizes.LOCAL_DENSE_UP_TO`` windows long
        (read at every call). The step loops ask this too (``luong.step_attention.LocalSteps``)."""
        return srclen <= cpu_sizes.LOCAL_DENSE_UP_TO * self.offsets.numel()

    def forward(self, query, memory, step0, need_weights):
        p_t = self.aligned_position(query, memory, step0)  # bsz x tgtlen
        if self.scores_whole(memory.values.size(1)):
            return self._attend_dense(query, p_t, memory, need_weights)
        if torch.is_grad_enabled() and query.requires_grad:
            # The gathered windows (bsz x tgtlen x W x C, values and keys) are gathered
            # again in the backward instead of being kept: stored, they would be local
            # attention's largest activations (C times the alignment's size, more than
            # global attention keeps), for an index_select that costs next to nothing.
            context, align, padded = checkpoint(
                self._attend_window, query, p_t, *memory, use_reentrant=False, preserve_rng_state=False
            )
        else:
            context, align, padded = self._attend_window(query, p_t, *memory)
        weights = None
        if need_weights:
            # invalid slots carry exactly 0 and point at a valid slot: add, never overwrite
            srclen = memory.values.size(1)
            weights = align.new_zeros(align.size(0), align.size(1), srclen).scatter_add_(2, padded, align)
        return context, weights

    def _attend_dense(self, query, p_t, memory, need_weights):
        """The same alignment over the whole (short) memory: slots farther than D from
        floor(p_t), outside the sentence or on padding are masked before the softmax.
        Where the window covers most of the source this is cheaper than gathering it
        (and its backward, which scatters into a zero-filled memory-sized gradient)."""
        srclen = memory.padding_mask.size(1)
        window, _ = self.window_positions(p_t, memory.length)  # bsz x tgtlen x W, consecutive positions
        # sentence positions of the padded slots (negative on left padding): bsz x 1 x srclen
        positions = (torch.arange(srclen, device=query.device).unsqueeze(0) - memory.start.unsqueeze(1)).unsqueeze(1)
        inside = (positions >= window[..., :1]) & (positions <= window[..., -1:])  # bsz x tgtlen x srclen
        outside = ~inside | memory.padding_mask.unsqueeze(1)  # padding: outside the sentence
        scores = self.score(query, memory.score_keys(), positions.clamp(min=0) if self.score.uses_positions else None)
        align = self.reweight(masked_softmax(scores, outside), positions, p_t)  # bsz x tgtlen x srclen
        # bsz x tgtlen x srclen @ bsz x srclen x C -> bsz x tgtlen x C
        context = torch.bmm(align, memory.values)
        return context, (align if need_weights else None)

    def _attend_window(self, query, p_t, values, keys, padding_mask, start, length):
        """Context c_t over the window around p_t; also the window's alignment
        (bsz x tgtlen x W) and its padded source indices."""
        bsz, srclen, C = values.size()
        tgtlen = query.size(1)
        positions, valid = self.window_positions(p_t, length)  # bsz x tgtlen x W (sentence positions)
        # invalid slots read a valid one (their weight is exactly 0): bsz x tgtlen x W
        inside = torch.minimum(positions.clamp(min=0), (length - 1).view(bsz, 1, 1))
        padded = start.view(bsz, 1, 1) + inside  # padded source index
        # rows of the flattened memory: bsz*srclen x C
        flat = (torch.arange(bsz, device=query.device) * srclen).view(bsz, 1, 1) + padded
        flat = flat.view(-1)  # bsz*tgtlen*W
        W = positions.size(-1)
        win_values = values.reshape(bsz * srclen, C).index_select(0, flat)
        win_values = win_values.view(bsz, tgtlen, W, C)  # bsz x tgtlen x W x C
        if keys is None:  # the score's keys are the values
            win_keys = win_values
        else:
            K = keys.size(-1)
            win_keys = keys.reshape(bsz * srclen, K).index_select(0, flat)
            win_keys = win_keys.view(bsz, tgtlen, W, K)  # bsz x tgtlen x W x K
        scores = self.score(query, win_keys, positions if self.score.uses_positions else None)
        align = self.reweight(masked_softmax(scores, ~valid), positions, p_t)  # bsz x tgtlen x W
        # bsz x tgtlen x 1 x W @ bsz x tgtlen x W x C -> bsz x tgtlen x C
        context = torch.matmul(align.unsqueeze(2), win_values).squeeze(2)
        return context, align, padded


class LocalMAttention(LocalAttention):
    """local-m, monotonic alignment (Luong et al. 2015, section 3.2): p_t = t, clipped
    to the sentence; the alignment is eq. 7 restricted to the window."""

    def aligned_position(self, query, memory, step0):
        last = (memory.length - 1).unsqueeze(1)  # bsz x 1
        t = torch.arange(step0, step0 + query.size(1), device=query.device).unsqueeze(0)
        return torch.minimum(t, last).to(at_least_float32(query.dtype))  # bsz x tgtlen


class LocalPAttention(LocalAttention):
    """local-p, predictive alignment (Luong et al. 2015, section 3.2, eq. 9-10).

    p_t by eq. 9 with each sentence's own S; the window's softmax is multiplied
    by the Gaussian of eq. 10 (sigma = D/2) and NOT renormalised; gradients reach
    W_p, v_p through it (footnote 10).
    """

    def __init__(self, score: AttentionScore, window: int, query_dim: int):
        super().__init__(score, window)
        if window == 0:
            raise ConfigError(
                "--local-window 0 with local-p: eq. 10's Gaussian has sigma = D/2 = 0; give D >= 1 "
                "(the paper uses 10), or local-m (--attention-type local_m), where D = 0 attends "
                "to position t alone"
            )
        self.sigma = window / 2.0
        self.W_p = Linear(query_dim, query_dim, bias=False)
        self.v_p = Linear(query_dim, 1, bias=False)

    def aligned_position(self, query, memory, step0):
        # eq. 9 over bsz x tgtlen queries, each sentence's S broadcast over its steps: bsz x 1
        return predictive_alignment(query, self.W_p.weight, self.v_p.weight, memory.length.unsqueeze(1))[0]

    def reweight(self, align, positions, p_t):
        return align * gaussian_window(positions, p_t, self.sigma).to(align.dtype)


class AttentionalHidden(nn.Module):
    """h~_t = tanh(W_c [c_t; h_t]) (Luong et al. 2015, eq. 5)."""

    def __init__(self, context_dim: int, hidden_dim: int):
        super().__init__()
        self.W_c = Linear(context_dim + hidden_dim, hidden_dim, bias=False)

    def forward(self, context: Tensor, h: Tensor) -> Tensor:
        # bsz x tgtlen x (C + H) -> bsz x tgtlen x H
        return torch.tanh(self.W_c(torch.cat((context, h), dim=-1)))


def build_attention(attention_type: str, score: AttentionScore, window: int, query_dim: int) -> Attention:
    if attention_type == "global":
        return GlobalAttention(score)
    if attention_type == "local_m":
        return LocalMAttention(score, window)
    if attention_type == "local_p":
        return LocalPAttention(score, window, query_dim)
    raise ConfigError(f"unknown --attention-type {attention_type!r}")
