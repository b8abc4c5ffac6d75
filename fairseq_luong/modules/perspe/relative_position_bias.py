"""The RPE baseline: T5's relative position bias in fairseq's Transformer layers.

The "simplified relative position" (RPE) of Oka, Tanaka & Nagata (NLP2022,
Table 1) after Raffel et al. (2020, JMLR, "Exploring the Limits of Transfer
Learning ...", section 2.1): the logit of query i for key j gets
b[head, bucket(j - i)] added; values are untouched. As in T5, one table is
shared by all self-attention layers of the encoder and another by those of
the decoder ("shared across all layers", section 2.1); ``--rpe-per-layer``
gives each layer its own table instead (which is what this code did before
the option existed, so older checkpoints load that way).

Here: the table (:class:`RelativePositionBias`), fairseq's self-attention with
the bias added to its logits (:class:`RelativePositionMultiheadAttention`),
and fairseq's encoder and decoder layers built with that attention.
"""
import math

import torch
import torch.nn as nn
from fairseq.modules import MultiheadAttention
from fairseq.modules.transformer_layer import (
    TransformerDecoderLayerBase,
    TransformerEncoderLayerBase,
)
from torch import Tensor

from ...errors import ConfigError


class RelativePositionBias(nn.Module):
    """bias[h, i, j] = b[h, bucket(j - i)]  (Raffel et al. 2020, section 2.1).

    Buckets (T5's scheme, ``relative_position_bucket``): with ``bidirectional``
    (encoder), half of the buckets are for keys before the query and half for
    keys after it; with ``bidirectional=False`` (decoder self-attention, which
    never sees later keys) all buckets are for keys at or before the query,
    and later keys share bucket 0. Within a direction, distances below half
    the buckets get a bucket each; larger distances share logarithmically
    wider buckets up to ``max_distance``, beyond which they all share the last.
    """

    def __init__(self, num_heads, num_buckets=32, max_distance=128, bidirectional=True):
        super().__init__()
        min_buckets = 4 if bidirectional else 2
        if num_buckets < min_buckets or max_distance <= num_buckets // min_buckets:
            raise ConfigError(
                f"relative position buckets: need num_buckets >= {min_buckets} and "
                f"max_distance > num_buckets / {min_buckets} "
                f"(got {num_buckets}, {max_distance})"
            )
        self.num_heads = num_heads
        self.num_buckets = num_buckets
        self.max_distance = max_distance
        self.bidirectional = bidirectional
        self.relative_attention_bias = nn.Embedding(num_buckets, num_heads)
        nn.init.normal_(self.relative_attention_bias.weight, mean=0.0, std=0.02)

    def bucket(self, relative_position: Tensor) -> Tensor:
        """T5's ``relative_position_bucket``; relative_position = key pos - query pos."""
        num_buckets = self.num_buckets
        buckets = torch.zeros_like(relative_position)
        if self.bidirectional:
            num_buckets //= 2
            buckets += relative_position.gt(0).long() * num_buckets
            distance = relative_position.abs()
        else:
            distance = (-relative_position).clamp(min=0)
        max_exact = num_buckets // 2
        log_ratio = torch.log(distance.float().clamp(min=1) / max_exact) / math.log(
            self.max_distance / max_exact
        )
        far = (max_exact + log_ratio * (num_buckets - max_exact)).long()
        far = far.clamp(max=num_buckets - 1)
        return buckets + torch.where(distance < max_exact, distance, far)

    def forward(self, query_len: int, key_len: int) -> Tensor:
        """The bias for the last ``query_len`` of ``key_len`` positions.

        A full forward has query_len == key_len; an incremental decoding step
        has one query, the newest position. Returns heads x query_len x key_len.
        """
        device = self.relative_attention_bias.weight.device
        key_pos = torch.arange(key_len, device=device)  # key_len
        query_pos = key_pos[key_len - query_len:]  # query_len
        relative = key_pos.unsqueeze(0) - query_pos.unsqueeze(1)  # query_len x key_len
        bias = self.relative_attention_bias(self.bucket(relative))  # query_len x key_len x heads
        return bias.permute(2, 0, 1)  # heads x query_len x key_len


class RelativePositionMultiheadAttention(MultiheadAttention):
    """fairseq's self-attention, its logits plus a :class:`RelativePositionBias`.

    The bias enters through ``apply_sparse_mask``, fairseq's hook on the raw
    (scaled) logits right before the attention mask, key padding and softmax:
    logits[b, h, i, j] + bias[h, i, j]. Values are untouched (Raffel et al.
    2020, section 2.1). The hook sees only shapes, so a step's query position
    comes from the keys (the query is the newest of ``src_len`` positions) and
    incremental decoding needs no extra state.

    The table is given after construction by :meth:`use_table`: a table of
    its own (registered here, saved with this layer) or the table its encoder
    or decoder shares between layers (registered there, only referenced here).
    """

    def __init__(self, embed_dim, num_heads, **kwargs):
        super().__init__(embed_dim, num_heads, self_attention=True, **kwargs)
        # fairseq sends full-sequence calls to torch's fused attention, which
        # never calls apply_sparse_mask; this switch (its only side effect is
        # skipping an embed_dim assertion) keeps them on fairseq's own path,
        # the one incremental decoding always takes.
        self._set_skip_embed_dim_check()

    def use_table(self, table: RelativePositionBias, own: bool):
        if own:
            self.relative_position_bias = table
        else:  # a plain reference: not a submodule, not in this layer's state dict
            self.__dict__["relative_position_bias"] = table

    def apply_sparse_mask(self, attn_weights, tgt_len: int, src_len: int, bsz: int):
        # attn_weights: (bsz * heads) x tgt_len x src_len
        bias = self.relative_position_bias(tgt_len, src_len)  # heads x tgt_len x src_len
        attn_weights = attn_weights.view(bsz, self.num_heads, tgt_len, src_len)
        attn_weights = attn_weights + bias.unsqueeze(0).to(attn_weights)
        return attn_weights.view(bsz * self.num_heads, tgt_len, src_len)


def relative_attention(embed_dim, num_heads, cfg, quant_noise, quant_noise_block_size):
    return RelativePositionMultiheadAttention(
        embed_dim, num_heads, dropout=cfg.attention_dropout,
        q_noise=quant_noise, qn_block_size=quant_noise_block_size,
    )


class RelativePositionEncoderLayer(TransformerEncoderLayerBase):
    """fairseq's encoder layer; self-attention logits get a bidirectional T5 bias.

    Give it its table with ``layer.self_attn.use_table(table, own)``.
    """

    def build_self_attention(self, embed_dim, cfg):
        return relative_attention(embed_dim, cfg.encoder.attention_heads, cfg,
                                  self.quant_noise, self.quant_noise_block_size)


class RelativePositionDecoderLayer(TransformerDecoderLayerBase):
    """fairseq's decoder layer; self-attention logits get a causal T5 bias.

    Only the self-attention changes; encoder-decoder attention is fairseq's.
    Give it its table with ``layer.self_attn.use_table(table, own)``.
    """

    def build_self_attention(self, embed_dim, cfg, add_bias_kv=False, add_zero_attn=False):
        if cfg.cross_self_attention or add_bias_kv or add_zero_attn:
            # each adds keys that are not target positions
            raise ConfigError(
                "--decoder-pos rpe supports neither --cross-self-attention nor "
                "extra bias/zero keys in self-attention"
            )
        return relative_attention(embed_dim, cfg.decoder.attention_heads, cfg,
                                  self.quant_noise, self.quant_noise_block_size)
