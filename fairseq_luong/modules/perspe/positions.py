"""Sinusoidal positions that can be perturbed: perSPE (Oka, Tanaka & Nagata, NLP2022).

perSPE adds, during training only, an integer offset ``per`` to each token's
position before taking the sinusoid (eq. 3-4), one offset per target phrase
drawn uniformly from [-k, k] (:func:`phrase_offsets`). The offsets are an argument
of the call; calls without them are exactly fairseq's
:class:`SinusoidalPositionalEmbedding` (same table, same incremental path), so a
perSPE model translates like an SPE one.
"""
import math
from typing import Any, Optional

import torch
from fairseq import utils
from fairseq.modules import SinusoidalPositionalEmbedding
from torch import Tensor


def perturbed_sinusoid(positions: Tensor, embedding_dim: int) -> Tensor:
    """perSPE(pos, 2i) = sin((pos + per) / 10000^(2i/d)), perSPE(pos, 2i+1) = cos(...).

    Oka, Tanaka & Nagata (NLP2022), eq. 3-4, laid out as fairseq's
    ``SinusoidalPositionalEmbedding.get_embedding`` lays out eq. 1-2 (the
    tensor2tensor variant: all sines, then all cosines, frequencies
    10000^(-i/(d/2-1))), so that integer positions give exactly fairseq's rows.

    ``positions`` holds pos + per (any shape, any integer or float values:
    a perturbed position may be 0 or negative, and is *not* looked up in the
    table, whose ``padding_idx`` row is all zeros). Returns
    ``positions.shape + (embedding_dim,)`` in float32.
    """
    half_dim = embedding_dim // 2
    step = math.log(10000) / (half_dim - 1)
    freqs = torch.exp(
        torch.arange(half_dim, dtype=torch.float, device=positions.device) * -step
    )  # half_dim
    angles = positions.float().unsqueeze(-1) * freqs  # *positions.shape x half_dim
    emb = torch.cat([torch.sin(angles), torch.cos(angles)], dim=-1)  # ... x 2*half_dim
    if embedding_dim % 2 == 1:
        emb = torch.cat([emb, emb.new_zeros(emb.shape[:-1] + (1,))], dim=-1)
    return emb


def phrase_offsets(phrase_ids: Tensor, k: int) -> Tensor:
    """perSPE's ``per`` of eq. 3-4: one integer per phrase, uniform in [-k, k].

    Oka, Tanaka & Nagata (NLP2022): each phrase of each sentence gets its own
    draw, shared by the phrase's tokens, fresh at every call (fairseq reseeds
    torch with the seed plus the update number, so a sentence gets new offsets
    each time it is seen). ``phrase_ids`` is bsz x len with ids 0, 1, ... within each row
    and -1 where positions stay plain (BOS, padding). Returns bsz x len
    offsets, 0 at the -1 entries.
    """
    n_phrases = int(phrase_ids.max()) + 1 if phrase_ids.numel() else 0
    per_phrase = torch.randint(
        -k, k + 1, (phrase_ids.size(0), max(n_phrases, 1)), device=phrase_ids.device
    )  # bsz x n_phrases
    offsets = per_phrase.gather(1, phrase_ids.clamp(min=0))  # bsz x len
    return offsets.masked_fill(phrase_ids.lt(0), 0)


def token_phrase_ids(tokens: Tensor, *plain: int) -> Tensor:
    """Phrase ids that make every token a phrase of its own; -1 at the ``plain`` symbols.

    With :func:`phrase_offsets` this is the token-level perturbation (Table 4)
    and the source-side one (no source phrases). bsz x len like ``tokens``.
    """
    ids = torch.arange(tokens.size(1), device=tokens.device).expand_as(tokens)  # bsz x len
    keep_plain = torch.zeros_like(tokens, dtype=torch.bool)
    for symbol in plain:
        keep_plain |= tokens.eq(symbol)
    return ids.masked_fill(keep_plain, -1)


class PerturbedSinusoidalPositionalEmbedding(SinusoidalPositionalEmbedding):
    """fairseq's sinusoidal positions, perturbed when ``forward`` is given offsets.

    ``forward(tokens, offsets=offsets)``: each real token's position
    ``padding_idx + 1 + t`` becomes ``padding_idx + 1 + t + offsets[b, t]`` and its
    embedding is computed by :func:`perturbed_sinusoid`; padding keeps a zero vector.
    ``offsets`` is ``bsz x seqlen``, aligned with the tokens (left or right padded alike),
    an input of the call: the module holds no offsets between calls (it has exactly the
    state of fairseq's class). Without offsets, ``forward`` is fairseq's own; incremental
    decoding cannot take offsets. Unlike fairseq's class, ``forward`` honours an explicit
    ``positions`` argument. Like fairseq's, it returns the dtype of its table (float16 after
    ``model.half()``), the dtype of the token embeddings it is added to.
    """

    def forward(
        self,
        input,
        incremental_state: Optional[Any] = None,
        timestep: Optional[Tensor] = None,
        positions: Optional[Any] = None,
        offsets: Optional[Tensor] = None,
    ):
        if offsets is None and positions is None:
            return super().forward(input, incremental_state, timestep)
        if incremental_state is not None:
            raise ValueError(
                "perturbed positions are a training-time, full-sequence input; "
                "incremental decoding uses plain positions"
            )
        if positions is None:
            positions = utils.make_positions(input, self.padding_idx)  # bsz x seqlen
        if offsets is not None:
            if offsets.shape != input.shape:
                raise ValueError(
                    f"position offsets of shape {tuple(offsets.shape)} do not match "
                    f"the tokens' shape {tuple(input.shape)}"
                )
            positions = positions + offsets  # bsz x seqlen
        emb = perturbed_sinusoid(positions, self.embedding_dim)  # bsz x seqlen x dim
        pad = input.eq(self.padding_idx).unsqueeze(-1)  # bsz x seqlen x 1
        return emb.masked_fill(pad, 0.0).to(self.weights.dtype).detach()
