"""Transformer encoder layer whose self-attention carries a relative position bias."""
from fairseq.modules.transformer_layer import TransformerEncoderLayerBase

from .perspe_relative_multihead_attention import RelativePositionMultiheadAttention


class RelativePositionEncoderLayer(TransformerEncoderLayerBase):
    """fairseq's encoder layer; self-attention logits get a bidirectional T5 bias.

    ``cfg`` is fairseq's TransformerConfig carrying our ``rpe_num_buckets``
    and ``rpe_max_distance`` (see models/transformer_perspe.py).
    """

    def build_self_attention(self, embed_dim, cfg):
        return RelativePositionMultiheadAttention(
            embed_dim,
            cfg.encoder.attention_heads,
            num_buckets=cfg.rpe_num_buckets,
            max_distance=cfg.rpe_max_distance,
            bidirectional=True,
            dropout=cfg.attention_dropout,
            q_noise=self.quant_noise,
            qn_block_size=self.quant_noise_block_size,
        )
