"""The decoder of RNNsearch (Bahdanau, Cho & Bengio 2014, section 3.1 and appendix A.2.2).

One decoder step i, from the previous state s_{i-1} and target word y_{i-1}:

  e_ij  = v_a^T tanh(W_a s_{i-1} + U_a h_j)       alignment model (A.1.2)
  a_ij  = softmax_j e_ij;  c_i = sum_j a_ij h_j     eq. 5-6
  s_i   = GRU(s_{i-1}, [E y_{i-1}; c_i])            A.2.2 (``rnnsearch/gru.py``)
  t~_i  = U_o s_{i-1} + V_o E y_{i-1} + C_o c_i     deep output (A.2.2)
  t_i   = [max(t~_{i,2j-1}, t~_{i,2j})]_j           maxout, 2 pieces
  p(y_i | y_<i, x) = softmax(W_o t_i)

with s_0 = tanh(W_s backward h_1). The attention is Luong's *concat* score (which is
Bahdanau's alignment model) queried with the state BEFORE the recurrent update.
The deep output reads s_{i-1}, as appendix A.2.2 writes it; the main text (eq. 4,
p(y_i) = g(y_{i-1}, s_i, c_i)) writes s_i: ``--deep-output-state current``.

Only the recurrence runs step by step: the embedding half of the GRU's input products
for all steps in one product before the loop, the keys U_a h_j once per sentence
(cached and reordered in beam search), and the whole deep output after the loop on
the real rows only; ``steps/active_rows.py`` says which rows run at each step.

Specification: ``rnnsearch_reference`` in ``tests/reference_decoders.py`` runs the
same equations one step and one sentence at a time; ``tests/test_reference.py``
checks this decoder against it (outputs and gradients; change the reference first)
and ``tests/test_op_counts.py`` that the hoisted products stay out of the loop.
"""
from typing import Optional

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch import Tensor

from ...errors import ConfigError
from ..dropout import Dropout
from ..layers import Linear
from ..luong.attention import GlobalAttention
from ..luong.scores import ConcatScore
from ..steps.active_rows import ActiveRows
from ..steps.beam_rows import SENTENCE
from ..steps.loop import compute_dtype, run_steps
from ..steps.recurrent_decoder import RecurrentDecoder
from .gru import GRU
from .steps import RNNsearchSteps


def maxout(x: Tensor, pieces: int) -> Tensor:
    """t_i = [max over each group of ``pieces`` consecutive units of t~_i] (Bahdanau et al.
    2014, appendix A.2.2; Goodfellow et al. 2013). x: ... x (l * pieces) -> ... x l."""
    return x.view(x.shape[:-1] + (x.size(-1) // pieces, pieces)).amax(-1)


class RNNsearchDecoder(RecurrentDecoder):
    """The decoder of the module docstring; what fairseq and the fused criterion see of it
    (``forward``, the output projection W_o, the cached state) is ``RecurrentDecoder``'s."""

    cached_per_sentence = ("keys",)  # U_a h_j of the source (bsz x srclen x K)

    def __init__(self, dictionary, embed_tokens: nn.Embedding, hidden_size: int,
                 encoder_output_units: int, attention_dim: int, maxout_dim: int,
                 maxout_pieces: int, dropout: float, deep_output_state: str,
                 share_input_output_embed: bool, max_target_positions: int):
        super().__init__(dictionary, embed_tokens, max_target_positions)
        if deep_output_state not in ("previous", "current"):
            raise ConfigError(f"--deep-output-state must be previous or current, got {deep_output_state!r}")
        self.hidden_size = hidden_size
        self.maxout_pieces = maxout_pieces
        self.deep_output_from_current = deep_output_state == "current"
        self.dropout_in = Dropout(dropout, module_name=self.__class__.__name__)
        self.dropout_out = Dropout(dropout, module_name=self.__class__.__name__)
        E, C = embed_tokens.embedding_dim, encoder_output_units
        # s_0 = tanh(W_s backward h_1); the backward state is half an annotation
        self.W_s = Linear(C // 2, hidden_size, bias=True)
        self.attention = GlobalAttention(ConcatScore(hidden_size, C, attention_dim))
        self.gru = GRU(E + C, hidden_size)  # input [E y_{i-1}; c_i]
        # deep output t~_i = U_o s + V_o E y_{i-1} + C_o c_i (one bias)
        self.U_o = Linear(hidden_size, maxout_dim * maxout_pieces, bias=True)
        self.V_o = Linear(E, maxout_dim * maxout_pieces, bias=False)
        self.C_o = Linear(C, maxout_dim * maxout_pieces, bias=False)
        if share_input_output_embed:
            if maxout_dim != E:
                raise ConfigError(
                    "--share-decoder-input-output-embed needs --maxout-dim "
                    f"({maxout_dim}) == --decoder-embed-dim ({E}): W_o is V x maxout-dim")
            self.W_o = None
        else:
            self.W_o = Linear(maxout_dim, len(dictionary), bias=True)

    # ---------------------------------------------------------------- forward
    def extract_features(self, prev_output_tokens, encoder_out=None, incremental_state=None, **kwargs):
        prev_output_tokens, cached, step0 = self.steps_to_compute(
            prev_output_tokens, encoder_out, incremental_state)

        emb = self.dropout_in(self.embed_tokens(prev_output_tokens))  # bsz x tgtlen x E
        if cached is not None:
            s = cached["s"]  # bsz x H
        else:
            s = torch.tanh(self.W_s(encoder_out["backward_first"]))  # s_0: bsz x H
        memory = self.attention.precompute(
            encoder_out["encoder_out"], encoder_out["encoder_padding_mask"],
            encoder_out["src_start"], encoder_out["src_length"],
            keys=cached.get("keys") if cached is not None else None)
        need_weights = self.need_attn and not self.training
        active_rows = ActiveRows.for_targets(
            prev_output_tokens, self.dictionary.pad(),
            skip_padding=incremental_state is None and not need_weights)
        features, s, attn = self._run(emb, s, memory, step0, need_weights, active_rows)
        if incremental_state is not None:
            self.set_cached_state(incremental_state, {"s": s, "keys": memory.keys,
                                                      SENTENCE: encoder_out.get(SENTENCE)})
        return features, {"attn": [attn]}  # features: t_i, what W_o reads

    def _run(self, emb, s, memory, step0, need_weights, active_rows: ActiveRows):
        """The steps (module docstring) in ``rnnsearch/steps.py`` (forward and backward through
        time, autograd off inside), then the deep output on the rows that ran.

        Returns t_i (bsz x tgtlen x l), the last s_i (None when the active rows skipped padded
        steps: it covers only the last step's rows) and the alignments."""
        dtype = compute_dtype(emb.device, self.gru.U.weight.dtype)
        E = emb.size(-1)
        emb, s, memory = active_rows.sort((emb, s, memory))
        emb = active_rows.pack_batch_major(emb)  # (sum of rows) x E, step after step
        # the embedding half of the GRU's input products for every step at once: (sum of rows) x 3H
        x_gates = F.linear(emb, self.gru.W.weight[:, :E], self.gru.W.bias).to(dtype)
        engine = RNNsearchSteps(self, x_gates, s, memory, active_rows, step0, need_weights)
        outputs = run_steps(engine)
        readout_states, contexts = outputs[:2]
        # deep output with maxout on the packed rows: (sum of rows) x ...
        t_tilde = self.U_o(readout_states) + self.V_o(emb) + self.C_o(contexts)
        features = active_rows.unpack(self.dropout_out(maxout(t_tilde, self.maxout_pieces)))
        attn = torch.stack(engine.attention.weights, 1) if need_weights else None  # bsz x tgtlen x srclen
        return features, (outputs[2] if engine.return_final else None), attn

    def output_projection(self) -> Optional[nn.Linear]:
        """W_o (V x l) and its bias; None when tied to the target embeddings."""
        return self.W_o
