"""Stacked LSTM decoder with attention and input feeding (Luong, Pham & Manning 2015).

One decoder step (section 3, Fig. 2 and 4):

  h_t = stacked LSTM([emb(y_{t-1}); h~_{t-1}], h_{t-1})    input feeding, 3.3
  c_t, a_t = attention(h_t, h̄)                            eq. 7-10
  h~_t = tanh(W_c [c_t; h_t])                             eq. 5
  p(y_t | y_<t, x) = softmax(W_s dropout(h~_t))           eq. 6

With input feeding each step needs the last one's h~, so the steps run in a loop:
``luong/input_feeding.py`` runs it, in training and in incremental decoding (one step per
call) alike, without autograd, and gives its gradients itself (backward through time written
once for the loop, ``steps/loop.py``). Work that does not depend on the previous step stays
out of the loop: the embedding half of the first layer's gates for all steps in one matrix
product, the score's keys once per sentence, every weight's gradient once after the loop.
Without input feeding nothing couples the layers across steps: each layer runs as one
sequence LSTM (``nn.LSTM``) and the attention is computed for all steps at once, with autograd.

Every decoder layer's parameters live in a one-layer ``nn.LSTM`` (gate order i, f, g, o),
whichever path runs.

Specification: ``luong_reference`` in ``tests/reference_decoders.py`` runs the same
equations one step and one sentence at a time; ``tests/test_reference.py`` checks
that this decoder gives its outputs and gradients for every architecture (change the
reference first), ``tests/test_step_loops.py`` the loop's backward by ``gradcheck``, and
``tests/test_op_counts.py`` that the hoisted products stay out of the per-step loop.
"""
from typing import Dict, List, Optional

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch import Tensor

from ...errors import ConfigError
from ..dropout import Dropout
from ..layers import LSTM, Linear
from ..steps.active_rows import ActiveRows
from ..steps.beam_rows import SENTENCE
from ..steps.loop import compute_dtype, run_steps
from ..steps.recurrent_decoder import RecurrentDecoder
from .attention import AttentionalHidden, SourceMemory
from .input_feeding import InputFeedingSteps, LoopWeights


class LuongDecoder(RecurrentDecoder):
    """The decoder of the module docstring; what fairseq and the fused criterion see of it
    (``forward``, the output projection W_s, the cached state) is ``RecurrentDecoder``'s."""

    cached_batch_dims = {"h": 1, "c": 1}  # layers x bsz x H; feed and keys are batch-first
    cached_per_sentence = ("keys",)  # the score's keys of the source (bsz x srclen x K)

    def __init__(
        self,
        dictionary,
        embed_tokens: nn.Embedding,
        hidden_size: int,
        num_layers: int,
        dropout: float,
        encoder_output_units: int,
        attention: Optional[nn.Module],
        input_feed: bool,
        share_input_output_embed: bool,
        max_target_positions: int,
        output_bias: bool = True,
    ):
        super().__init__(dictionary, embed_tokens, max_target_positions)
        self.hidden_size = hidden_size
        self.num_layers = num_layers
        self.input_feed = input_feed
        self.dropout_in = Dropout(dropout, module_name=self.__class__.__name__)
        self.dropout_hidden = Dropout(dropout, module_name=self.__class__.__name__)
        self.dropout_out = Dropout(dropout, module_name=self.__class__.__name__)
        embed_dim = embed_tokens.embedding_dim
        feed_dim = hidden_size if input_feed else 0
        self.layers = nn.ModuleList(
            [
                LSTM(embed_dim + feed_dim if i == 0 else hidden_size, hidden_size)
                for i in range(num_layers)
            ]
        )
        # a bidirectional encoder's final states (2H) start an H-cell decoder
        if encoder_output_units != hidden_size:
            self.init_hidden_proj = Linear(encoder_output_units, hidden_size)
            self.init_cell_proj = Linear(encoder_output_units, hidden_size)
        else:
            self.init_hidden_proj = self.init_cell_proj = None
        self.attention = attention
        self.attentional_hidden = (
            AttentionalHidden(encoder_output_units, hidden_size) if attention is not None else None
        )
        if share_input_output_embed:
            if embed_dim != hidden_size:
                raise ConfigError(
                    "--share-decoder-input-output-embed needs --decoder-embed-dim "
                    f"({embed_dim}) == --decoder-hidden-size ({hidden_size})"
                )
            self.W_s = None
        else:
            self.W_s = Linear(hidden_size, len(dictionary), bias=output_bias)

    # ------------------------------------------------------------------ state
    def _initial_state(self, encoder_out: Dict[str, Tensor], bsz: int, x: Tensor):
        h0, c0 = encoder_out["final_hiddens"], encoder_out["final_cells"]  # layers x bsz x C
        if h0.size(0) != self.num_layers:
            raise ValueError(
                f"the decoder has {self.num_layers} layers but the encoder {h0.size(0)}; "
                "Luong et al. start each decoder layer from its encoder layer"
            )
        if self.init_hidden_proj is not None:
            h0, c0 = self.init_hidden_proj(h0), self.init_cell_proj(c0)
        feed = x.new_zeros(bsz, self.hidden_size) if self.input_feed else None
        return h0, c0, feed

    def _memory(self, encoder_out: Dict[str, Tensor], cached) -> Optional[SourceMemory]:
        """The attention's memory; its keys from the incremental state once computed."""
        if self.attention is None:
            return None
        return self.attention.precompute(
            encoder_out["encoder_out"],  # bsz x srclen x C
            encoder_out["encoder_padding_mask"],
            encoder_out["src_start"],
            encoder_out["src_length"],
            keys=cached.get("keys") if cached is not None else None,
        )

    # ---------------------------------------------------------------- forward
    def extract_features(self, prev_output_tokens, encoder_out=None, incremental_state=None, **kwargs):
        prev_output_tokens, cached, step0 = self.steps_to_compute(
            prev_output_tokens, encoder_out, incremental_state)
        bsz = prev_output_tokens.size(0)

        x = self.dropout_in(self.embed_tokens(prev_output_tokens))  # bsz x tgtlen x E
        if cached is not None:
            h0, c0, feed = cached["h"], cached["c"], cached.get("feed")
        else:
            h0, c0, feed = self._initial_state(encoder_out, bsz, x)
        memory = self._memory(encoder_out, cached)
        need_weights = self.need_attn and not self.training and self.attention is not None

        if self.input_feed:
            active_rows = ActiveRows.for_targets(
                prev_output_tokens, self.dictionary.pad(),
                skip_padding=incremental_state is None and not need_weights)
            out, h_n, c_n, feed, attn = self._run_input_feeding(
                x, h0, c0, feed, memory, step0, need_weights, active_rows, incremental_state)
        else:
            out, h_n, c_n, attn = self._run_layerwise(
                x.transpose(0, 1), h0, c0, memory, step0, need_weights)

        if incremental_state is not None:
            state: Dict[str, Optional[Tensor]] = {"h": h_n, "c": c_n, "feed": feed,
                                                  SENTENCE: encoder_out.get(SENTENCE)}
            if memory is not None and memory.keys is not None:
                state["keys"] = memory.keys
            self.set_cached_state(incremental_state, state)
        return out, {"attn": [attn]}  # out: h~_t, what W_s reads

    def _loop_weights(self, x: Tensor, incremental_state) -> LoopWeights:
        """The loop's view of the parameters (``LoopWeights``): made once per call, or once per
        batch of sentences in incremental decoding without autograd (kept with the state)."""
        dtype = compute_dtype(x.device, self.layers[0].weight_hh_l0.dtype)
        training = torch.is_grad_enabled()
        if incremental_state is None or training:
            return LoopWeights(self, dtype, training)
        kept = self.get_incremental_state(incremental_state, "loop_weights")
        if kept is None or kept["weights"].dtype != dtype:
            kept = {"weights": LoopWeights(self, dtype, training)}
            self.set_incremental_state(incremental_state, "loop_weights", kept)
        return kept["weights"]

    def _run_input_feeding(self, x, h0, c0, feed, memory, step0, need_weights, active_rows: ActiveRows,
                           incremental_state):
        """Step by step: h~_{t-1} joins the next step's input (section 3.3), in
        ``luong/input_feeding.py`` (forward and backward through time, autograd off inside).

        ``active_rows`` owns which rows run at each step (``steps/active_rows.py``). When it skips
        padded steps, the final states are not returned (they cover only the last step's rows;
        nothing continues them in training). x: bsz x tgtlen x E.
        """
        weights = self._loop_weights(x, incremental_state)
        x, feed, memory = active_rows.sort((x, feed, memory))
        h0, c0 = active_rows.sort_states(h0), active_rows.sort_states(c0)  # layers x bsz x H
        # the embedding half of layer 0's gates for every step at once, packed: (sum of rows) x 4H
        x_gates = F.linear(active_rows.pack_batch_major(x), weights.x_weight, weights.x_bias).to(weights.dtype)
        engine = InputFeedingSteps(self, weights, x_gates, h0, c0, feed, memory, active_rows, step0, need_weights)
        outputs = run_steps(engine)
        out = active_rows.unpack(outputs[0])  # bsz x tgtlen x H
        attn = None
        if need_weights and engine.attention is not None:
            attn = torch.stack(engine.attention.weights, 1)  # bsz x tgtlen x srclen
        if not engine.return_final:
            return out, None, None, None, attn
        return (out, *outputs[1:], attn)

    def _run_layerwise(self, x, h0, c0, memory, step0, need_weights):
        """Without input feeding each layer is one sequence LSTM; attention for all steps at once."""
        h_n: List[Tensor] = []
        c_n: List[Tensor] = []
        for i, layer in enumerate(self.layers):
            if i > 0:
                x = self.dropout_hidden(x)
            # x: tgtlen x bsz x H
            state = (h0[i : i + 1].contiguous(), c0[i : i + 1].contiguous())  # 1 x bsz x H
            x, (h, c) = layer(x, state)
            h_n.append(h[0])
            c_n.append(c[0])
        top = x.transpose(0, 1)  # bsz x tgtlen x H
        htilde, attn = self._attend(top, memory, step0, need_weights)
        return self.dropout_out(htilde), torch.stack(h_n), torch.stack(c_n), attn

    def _attend(self, top: Tensor, memory: SourceMemory, step0: int, need_weights: bool):
        """h~_t from the top layer's h_t (bsz x tgtlen x H); h~_t = h_t without attention."""
        if self.attention is None:
            return top, None
        context, attn = self.attention(top, memory, step0, need_weights)
        return self.attentional_hidden(context, top), attn

    def output_projection(self) -> Optional[nn.Linear]:
        """W_s of eq. 6 (V x H). Eq. 6 has no bias b_s (``--no-output-bias``, or shared
        embeddings: the embedding matrix and no bias); the default keeps one, as fairseq's lstm."""
        return self.W_s

    def make_generation_fast_(self, need_attn=False, **kwargs):
        if need_attn and self.attention is None:
            raise ConfigError(
                "this model has no attention (--no-attention / luong_base), so it has no "
                "alignments: drop --print-alignment and --replace-unk"
            )
        super().make_generation_fast_(need_attn=need_attn, **kwargs)
