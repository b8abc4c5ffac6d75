"""Self-attention with a T5 relative position bias on the query-key logits."""
from fairseq.modules import MultiheadAttention

from .relative_position_bias import RelativePositionBias


class RelativePositionMultiheadAttention(MultiheadAttention):
    """fairseq's self-attention, its logits plus :class:`RelativePositionBias`.

    The bias enters through ``apply_sparse_mask``, fairseq's hook on the raw
    (scaled) logits right before the attention mask, key padding and softmax:
    logits[b, h, i, j] + bias[h, i, j]. Values are untouched (Raffel et al.
    2020, section 2.1). The hook sees only shapes, so a step's query position
    comes from the keys (the query is the newest of ``src_len`` positions) and
    incremental decoding needs no extra state.
    """

    def __init__(
        self,
        embed_dim,
        num_heads,
        num_buckets=32,
        max_distance=128,
        bidirectional=True,
        **kwargs,
    ):
        super().__init__(embed_dim, num_heads, self_attention=True, **kwargs)
        self.relative_position_bias = RelativePositionBias(
            num_heads, num_buckets, max_distance, bidirectional
        )
        # fairseq sends full-sequence calls to torch's fused attention, which
        # never calls apply_sparse_mask; this switch (its only side effect is
        # skipping an embed_dim assertion) keeps them on fairseq's own path,
        # the one incremental decoding always takes.
        self._set_skip_embed_dim_check()

    def apply_sparse_mask(self, attn_weights, tgt_len: int, src_len: int, bsz: int):
        # attn_weights: (bsz * heads) x tgt_len x src_len
        bias = self.relative_position_bias(tgt_len, src_len)  # heads x tgt_len x src_len
        attn_weights = attn_weights.view(bsz, self.num_heads, tgt_len, src_len)
        attn_weights = attn_weights + bias.unsqueeze(0).to(attn_weights)
        return attn_weights.view(bsz * self.num_heads, tgt_len, src_len)
