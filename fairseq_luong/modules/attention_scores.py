"""Alignment score functions of Luong, Pham & Manning (2015), eq. 8 and footnote 6.

Every score is a small subclass of :class:`AttentionScore`, so that global and
local attention (``luong_attention.py``) and Bahdanau et al.'s RNNsearch apply
on top of any of them. Masking, softmax and the context vector live in the
attention modules, not here.
"""
import torch
import torch.nn as nn
from torch import Tensor

from ..errors import ConfigError
from .luong_init import Linear


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
        if keys.dim() == 3:
            # bsz x 1 x srclen x A + bsz x tgtlen x 1 x A -> bsz x tgtlen x srclen x A
            hidden = torch.tanh(keys.unsqueeze(1) + q.unsqueeze(2))
        else:
            # bsz x tgtlen x W x A + bsz x tgtlen x 1 x A
            hidden = torch.tanh(keys + q.unsqueeze(2))
        return self.v_a(hidden).squeeze(-1)  # bsz x tgtlen x N


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
