"""Transformer decoder layer whose self-attention carries a relative position bias."""
from fairseq.modules.transformer_layer import TransformerDecoderLayerBase

from .perspe_relative_multihead_attention import RelativePositionMultiheadAttention


class RelativePositionDecoderLayer(TransformerDecoderLayerBase):
    """fairseq's decoder layer; self-attention logits get a causal T5 bias.

    Only the self-attention changes; encoder-decoder attention is fairseq's.
    ``cfg`` is fairseq's TransformerConfig carrying our ``rpe_num_buckets``
    and ``rpe_max_distance`` (see models/transformer_perspe.py).
    """

    def build_self_attention(self, embed_dim, cfg, add_bias_kv=False, add_zero_attn=False):
        if cfg.cross_self_attention or add_bias_kv or add_zero_attn:
            # each adds keys that are not target positions
            raise ValueError(
                "--decoder-pos rpe supports neither --cross-self-attention nor "
                "extra bias/zero keys in self-attention"
            )
        return RelativePositionMultiheadAttention(
            embed_dim,
            cfg.decoder.attention_heads,
            num_buckets=cfg.rpe_num_buckets,
            max_distance=cfg.rpe_max_distance,
            bidirectional=False,
            dropout=cfg.attention_dropout,
            q_noise=self.quant_noise,
            qn_block_size=self.quant_noise_block_size,
        )
