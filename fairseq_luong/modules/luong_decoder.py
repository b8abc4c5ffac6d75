"""Stacked LSTM decoder with attention and input feeding (Luong, Pham & Manning 2015).

One decoder step (section 3, Fig. 2 and 4):

  h_t = stacked LSTM([emb(y_{t-1}); h~_{t-1}], h_{t-1})    input feeding, 3.3
  c_t, a_t = attention(h_t, h̄)                            eq. 7-10
  h~_t = tanh(W_c [c_t; h_t])                             eq. 5
  p(y_t | y_<t, x) = softmax(W_s dropout(h~_t))           eq. 6

The same step code runs in training (looping over the target) and in
incremental decoding (one step per call), so the fast path is the normal
path. Work that does not depend on the previous step is hoisted out of the
loop: the embedding half of the first layer's gates for all steps in one
matrix product, in training the fused [input; h] gate weights once per call
(in inference two products on the parameters themselves: no weight copy), the score's
keys once per sentence. Without input feeding nothing couples the layers
across steps: each layer runs as one sequence LSTM (``nn.LSTM``) and the
attention is computed for all steps at once.

Every decoder layer's parameters live in a one-layer ``nn.LSTM`` (gate order
i, f, g, o), whichever path runs.

Specification: ``luong_reference`` in ``tests/reference_decoders.py`` runs the same
equations one step and one sentence at a time; ``tests/test_reference.py`` checks
that this decoder gives its outputs and gradients for every architecture (change the
reference first), and ``tests/test_op_counts.py`` that the hoisted products stay
out of the per-step loop.
"""
from typing import Dict, List, Optional, Tuple

import torch
import torch.nn as nn
import torch.nn.functional as F
from fairseq.modules import FairseqDropout
from torch import Tensor

from ..errors import ConfigError
from .luong_attention import AttentionalHidden, SourceMemory
from .luong_init import LSTM, Linear
from .recurrent_decoder import RecurrentDecoder
from .row_schedule import RowSchedule


def lstm_cell_update(gates: Tensor, c: Tensor) -> Tuple[Tensor, Tensor]:
    """The LSTM cell (Zaremba et al. 2015, as used by Luong et al. 2015, section 2).

    gates: bsz x 4H pre-activations in PyTorch's order i, f, g, o; c: bsz x H.
    c_t = sigmoid(f) * c_{t-1} + sigmoid(i) * tanh(g); h_t = sigmoid(o) * tanh(c_t).
    """
    i, f, g, o = gates.chunk(4, 1)
    c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
    h = torch.sigmoid(o) * torch.tanh(c)
    return h, c


def fused_cell_here(gates: Tensor) -> bool:
    """Whether ``fused_lstm_cell`` runs for these gates: PyTorch has the kernel for CUDA only, and
    torch.compile has no meta function for it that works without biases (it traces the eager cell)."""
    return gates.is_cuda and not torch.compiler.is_compiling()


def fused_lstm_cell(input_gates: Tensor, hidden_gates: Tensor, c: Tensor) -> Tuple[Tensor, Tensor]:
    """``lstm_cell_update`` of input_gates + hidden_gates in PyTorch's fused kernel (what
    ``nn.LSTMCell`` runs on CUDA): one launch for the sum and the cell, and one for its backward,
    where the eager cell launches nine. rows x 4H, rows x 4H, rows x H -> h, c. (The kernel takes
    a bias only as two, input and hidden, both given: the bias comes in the gates instead.)"""
    h, c, _ = torch.ops.aten._thnn_fused_lstm_cell(input_gates, hidden_gates, c)
    return h, c


def _fused_layer_step(gates: Tensor, below: Tensor, h: Tensor, c: Tensor,
                      weights: Tuple[Tensor, ...]) -> Tuple[Tensor, Tensor]:
    """``lstm_layer_step`` with the gate sum in the fused kernel: layer 0's hoisted gates
    (rows x 4H) are its input gates; a layer's bias (4H) is added by the GEMM on below, and the
    fused weight's two halves (views) multiply below and h without a cat."""
    if len(weights) == 2:  # inference: W_in^T, W_hh^T
        return fused_lstm_cell(torch.addmm(gates, below, weights[0]), h.mm(weights[1]), c)  # rows x 4H each
    W = weights[0]  # (in + H) x 4H
    if gates.dim() == 2:
        return fused_lstm_cell(gates, torch.cat((below, h), 1).mm(W), c)
    n = below.size(1)
    return fused_lstm_cell(torch.addmm(gates, below, W[:n]), h.mm(W[n:]), c)


def lstm_layer_step(gates: Tensor, below: Tensor, h: Tensor, c: Tensor,
                    weights: Tuple[Tensor, ...]) -> Tuple[Tensor, Tensor]:
    """One layer and step of the input-feeding loop: gates + [below; h_{t-1}] @ W, then the cell.

    gates: rows x 4H (what is already known: layer 0's embedding gates) or 4H (the bias);
    weights: ([W_in W_hh]^T,) fused, one GEMM, or (W_in^T, W_hh^T), two (``_gate_weights``).
    On CUDA, in one precision throughout, the sums and the cell run in PyTorch's fused kernel.
    """
    if fused_cell_here(gates) and gates.dtype == below.dtype == h.dtype == c.dtype == weights[0].dtype:
        return _fused_layer_step(gates, below, h, c, weights)
    return eager_layer_step(gates, below, h, c, weights)


def eager_layer_step(gates: Tensor, below: Tensor, h: Tensor, c: Tensor,
                     weights: Tuple[Tensor, ...]) -> Tuple[Tensor, Tensor]:
    """``lstm_layer_step`` with the cell in elementwise operations (``lstm_cell_update``): the
    CPU's path, and CUDA's under autocast or torch.compile."""
    if len(weights) == 1:
        gates = torch.addmm(gates, torch.cat((below, h), 1), weights[0])  # rows x 4H
    else:
        gates = torch.addmm(gates, below, weights[0])  # rows x 4H
        if torch.is_autocast_enabled(gates.device.type):
            gates = torch.addmm(gates, h, weights[1])  # autocast casts only out-of-place ops
        else:
            gates.addmm_(h, weights[1])  # in place: no second rows x 4H buffer per step
    return lstm_cell_update(gates, c)


class LuongDecoder(RecurrentDecoder):
    """The decoder of the module docstring; what fairseq and the fused criterion see of it
    (``forward``, the output projection W_s, the cached state) is ``RecurrentDecoder``'s."""

    cached_batch_dims = {"h": 1, "c": 1}  # layers x bsz x H; feed and keys are batch-first

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
        self.dropout_in = FairseqDropout(dropout, module_name=self.__class__.__name__)
        self.dropout_hidden = FairseqDropout(dropout, module_name=self.__class__.__name__)
        self.dropout_out = FairseqDropout(dropout, module_name=self.__class__.__name__)
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
            schedule = RowSchedule.for_targets(
                prev_output_tokens, self.dictionary.pad(),
                skip_padding=incremental_state is None and not need_weights)
            out, h_n, c_n, feed, attn = self._run_input_feeding(
                x, h0, c0, feed, memory, step0, need_weights, schedule)
        else:
            out, h_n, c_n, attn = self._run_layerwise(
                x.transpose(0, 1), h0, c0, memory, step0, need_weights)

        if incremental_state is not None:
            state: Dict[str, Optional[Tensor]] = {"h": h_n, "c": c_n, "feed": feed}
            if memory is not None and memory.keys is not None:
                state["keys"] = memory.keys
            self.set_cached_state(incremental_state, state)
        return out, {"attn": [attn]}  # out: h~_t, what W_s reads

    def _run_input_feeding(self, x, h0, c0, feed, memory, step0, need_weights, schedule: RowSchedule):
        """Step by step: h~_{t-1} joins the next step's input (section 3.3).

        The loop body is the step of the module docstring; ``schedule`` owns which rows
        run at each step (``row_schedule.py``). When it skips padded steps, the final
        states are not returned (they cover only the last step's rows; nothing continues
        them in training). x: bsz x tgtlen x E.
        """
        emb_weight, biases, rec_weights = self._gate_weights()
        hs, cs = list(h0.unbind(0)), list(c0.unbind(0))  # per layer: bsz x H
        x, hs, cs, feed, memory = schedule.sort((x, hs, cs, feed, memory))
        # embedding half of layer 0's gates for every step at once:
        # tgtlen x bsz x E -> tgtlen x bsz x 4H -> step t: rows(t) x 4H
        x_gates = schedule.per_step(F.linear(x.transpose(0, 1), emb_weight, biases[0]))
        outs: List[Tensor] = []
        attns: List[Tensor] = []
        for t in schedule.steps():
            hs, cs, feed, memory = schedule.at_step(t, (hs, cs, feed, memory))
            below, gates = feed, x_gates[t]
            for i in range(self.num_layers):
                if i > 0:
                    below, gates = self.dropout_hidden(hs[i - 1]), biases[i]
                hs[i], cs[i] = lstm_layer_step(gates, below, hs[i], cs[i], rec_weights[i])
            htilde, attn = self._attend(hs[-1].unsqueeze(1), memory, step0 + t, need_weights)
            feed = self.dropout_out(htilde.squeeze(1))  # rows x H
            outs.append(feed)
            if attn is not None:
                attns.append(attn)
        out = schedule.unpack(schedule.pack(outs))  # bsz x tgtlen x H
        attn = torch.cat(attns, dim=1) if attns else None  # bsz x tgtlen x srclen
        if schedule.skips_padding:
            return out, None, None, None, attn
        return out, torch.stack(hs), torch.stack(cs), feed, attn

    def _gate_weights(self) -> Tuple[Tensor, List[Tensor], List[Tuple[Tensor, ...]]]:
        """Layer 0's embedding weights (4H x E), each layer's b_ih + b_hh, and each layer's
        weights for the gate product of the input-feeding loop (W_in is W_feed for layer 0).

        With autograd on (training): ([W_in W_hh]^T,), fused ((in + H) x 4H, built per
        call; the gradient flows back into the ``nn.LSTM`` parameters), for one GEMM per
        layer and step. In inference: (W_in^T, W_hh^T), views of the parameters, for two
        GEMMs per layer and step and no copy of the weights (at 4 x 1000 a copy would be
        128 MB more than the model in beam search).
        """
        embed_dim = self.embed_tokens.embedding_dim
        fuse = torch.is_grad_enabled()
        emb_weight = self.layers[0].weight_ih_l0[:, :embed_dim]  # 4H x E
        biases: List[Tensor] = []
        rec_weights: List[Tuple[Tensor, ...]] = []
        for i, layer in enumerate(self.layers):
            w_in = layer.weight_ih_l0[:, embed_dim:] if i == 0 else layer.weight_ih_l0  # 4H x in
            biases.append(layer.bias_ih_l0 + layer.bias_hh_l0)
            if fuse:
                rec_weights.append((torch.cat((w_in, layer.weight_hh_l0), 1).t(),))
            else:
                rec_weights.append((w_in.t(), layer.weight_hh_l0.t()))
        return emb_weight, biases, rec_weights

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
