"""T5-style relative position bias: one learned scalar per head and bucket.

The "simplified relative position" (RPE) of Oka, Tanaka & Nagata (NLP2022,
Table 1) after Raffel et al. (2020, JMLR, "Exploring the Limits of Transfer
Learning ...", section 2.1): the logit of query i for key j gets
b[head, bucket(j - i)] added; values are untouched.
"""
import math

import torch
import torch.nn as nn
from torch import Tensor


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
            raise ValueError(
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
