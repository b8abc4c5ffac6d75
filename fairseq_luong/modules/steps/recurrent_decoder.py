"""What fairseq and the fused criterion see of a step-by-step decoder (Luong's, RNNsearch's).

The contract, stated once for both families:

* ``forward(prev_output_tokens, encoder_out, incremental_state, features_only)``:
  ``features_only`` returns the features the output layer reads (h~_t, t_i), so that
  ``fused_label_smoothed_cross_entropy`` applies the output projection itself;
* ``output_projection_params()``: that projection's (weight, bias), V x features and V (the
  target embedding matrix and no bias when they are tied); ``output_layer`` applies it;
  the softmax is the criterion's or the generator's (fairseq's ``get_normalized_probs``);
* one cached-state dict per incremental state (``get_cached_state``), every tensor of which
  ``reorder_incremental_state`` index-selects along its batch dimension, as beam search
  reorders hypotheses (fairseq's ``lstm`` idiom), except those of ``cached_per_sentence``
  while every row keeps its sentence (``steps/beam_rows.py``: the state then carries the
  encoder's ``sentence``);
* ``make_generation_fast_(need_attn)``: whether the forward returns attention weights.

Subclasses build their own layers (in their paper's order: parameter order decides
``init_uniform_``'s draws) and implement ``extract_features`` and ``output_projection``.
"""
from typing import Dict, Optional, Tuple

import torch.nn as nn
import torch.nn.functional as F
from fairseq.models import FairseqIncrementalDecoder
from torch import Tensor

from .beam_rows import reorder_rows


class RecurrentDecoder(FairseqIncrementalDecoder):
    # the batch dimension of each cached tensor, where it is not 0
    cached_batch_dims: Dict[str, int] = {}
    # the cached tensors that are functions of the row's source sentence alone
    cached_per_sentence: Tuple[str, ...] = ()

    def __init__(self, dictionary, embed_tokens: nn.Embedding, max_target_positions: int):
        super().__init__(dictionary)
        self.embed_tokens = embed_tokens
        self.max_target_positions = max_target_positions
        self.need_attn = True

    # ---------------------------------------------------------------- forward
    def forward(self, prev_output_tokens, encoder_out=None, incremental_state=None,
                features_only: bool = False, **kwargs):
        x, extra = self.extract_features(prev_output_tokens, encoder_out, incremental_state)
        if features_only:  # for a criterion that applies the output projection itself
            return x, extra
        return self.output_layer(x), extra

    def output_projection(self) -> Optional[nn.Linear]:
        """The output layer's projection; None when it is the target embedding matrix."""
        raise NotImplementedError

    def output_projection_params(self) -> Tuple[Tensor, Optional[Tensor]]:
        """(weight, bias) of the output projection: V x features and V (or None)."""
        projection = self.output_projection()
        if projection is None:
            return self.embed_tokens.weight, None
        return projection.weight, projection.bias

    def output_layer(self, features):
        """The scores over the vocabulary; the softmax is the criterion's / generator's."""
        weight, bias = self.output_projection_params()
        return F.linear(features, weight, bias)

    def max_positions(self):
        return self.max_target_positions

    def make_generation_fast_(self, need_attn=False, **kwargs):
        self.need_attn = bool(need_attn)

    # ------------------------------------------------------------------ state
    def steps_to_compute(self, prev_output_tokens: Tensor, encoder_out, incremental_state):
        """What this call computes, as fairseq's ``lstm`` does it: (the input tokens of its
        steps, bsz x tgtlen; the cached state, None without one; the target index of its
        first step). In incremental decoding only the last token's step, from the cache."""
        if encoder_out is None:
            raise ValueError(f"{type(self).__name__} needs an encoder")
        cached = self.get_cached_state(incremental_state)
        if cached is None:
            return prev_output_tokens, None, 0
        return prev_output_tokens[:, -1:], cached, prev_output_tokens.size(1) - 1

    def get_cached_state(self, incremental_state) -> Optional[Dict[str, Optional[Tensor]]]:
        if incremental_state is None:
            return None
        return self.get_incremental_state(incremental_state, "cached_state")

    def set_cached_state(self, incremental_state, state: Dict[str, Optional[Tensor]]):
        self.set_incremental_state(incremental_state, "cached_state", state)

    def reorder_incremental_state_scripting(self, incremental_state, new_order: Tensor):
        """What beam search calls at every step. fairseq's looks for ``reorder_incremental_state``
        on every submodule (``hasattr`` on each, a few microseconds a step); the decoder's cached
        state is the only incremental state here (no submodule keeps one), so it goes to it."""
        self.reorder_incremental_state(incremental_state, new_order)

    def reorder_incremental_state(self, incremental_state, new_order: Tensor):
        cached = self.get_cached_state(incremental_state)
        if cached is None:
            return
        self.set_cached_state(incremental_state, reorder_rows(
            cached, new_order, per_sentence=self.cached_per_sentence, batch_dims=self.cached_batch_dims))
