"""Luong et al.'s input-feeding loop for one call: forward, and backward through time.

The step of ``luong/decoder.py``'s docstring (section 3.3, eq. 5-10):

  h^i_t = LSTM_i([below; h^i_{t-1}])     below = [emb(y_{t-1}); h~_{t-1}] for layer 0
  c_t = attention(h^L_t, h̄)              eq. 7-10 (``luong/step_attention.py``)
  h~_t = tanh(W_c [c_t; h^L_t])          eq. 5

run by :class:`InputFeedingSteps` without autograd, in the dtype of one call (``steps/loop.py``).
Per layer and step one gate product [below; h_{t-1}] @ [W_in W_hh]^T (in inference two, on
the parameters themselves: no copy of the weights) and the cell; in the backward the cell's
backward and one product for the gradients of below and h_{t-1}. Every weight's gradient is
formed after the loop from the inputs of its product and its output gradients, packed over
the steps: one matrix product a weight (the LSTM layers, W_c, the attention's).

Layer 0's embedding half of the gates comes in computed for every step at once (``x_gates``)
and its gradient goes out the same way. The rows are those of the call's ``ActiveRows``: at
step t the first rows(t) rows (sorted by length), so the state of an ended sentence is never
computed again, and per-step tensors are packed step after step ((sum of rows(t)) x ...).
"""
from typing import List, Optional

import torch
from torch import Tensor

from ..steps.active_rows import ActiveRows
from ..steps.ops import (
    _tanh_backward,
    cell_scratch,
    dropout_backward,
    dropout_forward,
    fused_cell_here,
    lstm_cell,
    lstm_cell_backward,
    padded_rows,
)
from .step_attention import attention_steps


def active_dropout(module) -> float:
    """The rate a ``FairseqDropout`` applies now: its p in training or with --retain-dropout."""
    return module.p if module.p > 0 and (module.training or module.apply_during_inference) else 0.0


class LoopWeights:
    """What the loop reads of the decoder's parameters, in one dtype: per layer the weights of
    its gate product (training: [W_in W_hh]^T, (in + H) x 4H, one product a step, its gradient
    after the loop; inference: W_in^T and W_hh^T, views of the parameters, no copy) and b_ih +
    b_hh, layer 0's embedding columns of W_ih, and W_c of eq. 5. Made once per call in training;
    in beam search once per batch of sentences (``LuongDecoder`` keeps it with the incremental
    state), since the parameters do not change while it translates."""

    def __init__(self, decoder, dtype: torch.dtype, training: bool):
        self.dtype, self.training = dtype, training
        E = decoder.embed_tokens.embedding_dim
        layers = list(decoder.layers)
        self.num_layers = len(layers)
        first = layers[0]
        self.x_weight = first.weight_ih_l0[:, :E]  # 4H x E: layer 0's embedding columns
        self.x_bias = first.bias_ih_l0 + first.bias_hh_l0  # 4H
        self.products: List[Tensor] = []  # training: one per layer; inference: two
        self.in_sizes: List[int] = []
        for i, layer in enumerate(layers):
            w_in = layer.weight_ih_l0[:, E:] if i == 0 else layer.weight_ih_l0  # 4H x in
            self.in_sizes.append(w_in.size(1))
            if training:
                self.products.append(torch.cat((w_in, layer.weight_hh_l0), 1).to(dtype).t())
            else:
                self.products += [w_in.t().to(dtype), layer.weight_hh_l0.t().to(dtype)]
        # each layer's b_ih + b_hh above layer 0 (layer 0's are in the embedding gates): 4H
        self.biases = [(layer.bias_ih_l0 + layer.bias_hh_l0).to(dtype) for layer in layers[1:]]
        self.products_t = [w.t() for w in self.products] if training else None  # the backward's
        self.W_c = self.W_c_t = None
        if decoder.attention is not None:
            self.W_c = decoder.attentional_hidden.W_c.weight.to(dtype)  # H x (C + H)
            self.W_c_t = self.W_c.t()
            self.context_size = self.W_c.size(1) - self.W_c.size(0)

    def inputs(self) -> List[Tensor]:
        return [*self.products, *self.biases] + ([] if self.W_c is None else [self.W_c])


class InputFeedingSteps:
    """One call's input-feeding loop (module docstring); the engine of ``steps.loop.run_steps``.

    x_gates: the embedding half of layer 0's gates with its bias, packed ((sum of rows) x 4H);
    h0, c0: layers x bsz x H; feed: bsz x H (h~_{t-1}, zeros before the first step); memory:
    the attention's, rows in active-row order; weights: :class:`LoopWeights` in x_gates' dtype,
    made with autograd on when it is on. ``forward`` returns the packed h~_t after dropout
    ((sum of rows) x H) and, unless the active rows skip padded steps, the final h, c
    (layers x bsz x H) and h~ (bsz x H).
    """

    def __init__(self, decoder, weights: LoopWeights, x_gates: Tensor, h0: Tensor, c0: Tensor, feed: Tensor,
                 memory, active_rows: ActiveRows, step0: int, need_weights: bool):
        self.save = weights.training
        dtype = weights.dtype
        self.active_rows = active_rows
        self.x_gates, self.h0, self.c0, self.feed0 = x_gates, h0.to(dtype), c0.to(dtype), feed.to(dtype)
        self.p_hidden = active_dropout(decoder.dropout_hidden)
        self.p_out = active_dropout(decoder.dropout_out)
        self.num_layers = weights.num_layers
        self.loop_weights = weights
        self.weights, self.weights_t, self.biases = weights.products, weights.products_t, weights.biases
        self.in_sizes = weights.in_sizes
        self.attention = None
        if decoder.attention is not None:
            self.attention = attention_steps(decoder.attention, memory, dtype, self.save, need_weights, step0)
            self.W_c, self.W_c_t, self.context_size = weights.W_c, weights.W_c_t, weights.context_size
        self.return_final = active_rows.full
        # the fused CUDA cell adds two gate tensors: the second is zeros
        self.zeros = x_gates.new_zeros(h0.size(1), x_gates.size(1)) if fused_cell_here(x_gates) else None

    def inputs(self) -> List[Tensor]:
        tensors = [self.x_gates, self.h0, self.c0, self.feed0, *self.loop_weights.inputs()]
        return tensors if self.attention is None else tensors + self.attention.inputs()

    # ------------------------------------------------------------------ forward
    def _gates(self, i: int, known: Tensor, below: Tensor, h: Tensor):
        """Layer i's gate pre-activations (rows x 4H) and the input of its product (training)."""
        if self.save:
            x = torch.cat((below, h), 1)  # rows x (in + H)
            return torch.addmm(known, x, self.weights[i]), x
        gates = torch.addmm(known, below, self.weights[2 * i])
        return gates.addmm_(h, self.weights[2 * i + 1]), None

    def forward(self):
        L, save, p_hidden = self.num_layers, self.save, self.p_hidden
        weights, biases, x_gates, zeros = self.weights, self.biases, self.x_gates, self.zeros
        hs, cs = list(self.h0.unbind(0)), list(self.c0.unbind(0))  # per layer: bsz x H
        feed = self.feed0
        # what the backward reads, per layer and step: the cell's and the dropout's, and the inputs
        # of each product (read again after the loop)
        self.saved_layers = saved_layers = [[] for _ in range(L)]
        self.products_in = products_in = [[] for _ in range(L)]  # [below; h_{t-1}], rows x (in + H)
        self.saved_out = []
        self.cq = []  # [c_t; h_t], rows x (C + H)
        outs = []
        offset, rows = 0, feed.size(0)
        for n in self.active_rows.active:
            if n != rows:  # sentences ended: their rows are the last ones
                hs, cs, feed = [h[:n] for h in hs], [c[:n] for c in cs], feed[:n]
                rows = n
            below = feed
            for i in range(L):
                mask = None
                if i:
                    below, mask = dropout_forward(hs[i - 1], p_hidden)
                known = x_gates[offset:offset + n] if i == 0 else biases[i - 1]
                if save:
                    x = torch.cat((below, hs[i]), 1)  # rows x (in + H)
                    gates = torch.addmm(known, x, weights[i])
                    products_in[i].append(x)
                else:  # two products on the parameters themselves
                    gates = torch.addmm(known, below, weights[2 * i]).addmm_(hs[i], weights[2 * i + 1])
                hs[i], cs[i], cell = lstm_cell(gates, cs[i], None if zeros is None else zeros[:n])
                if save:
                    saved_layers[i].append((cell, mask))
            feed = self._attentional_hidden(hs[-1])
            outs.append(feed)
            offset += n
        out = torch.cat(outs) if len(outs) > 1 else outs[0]  # (sum of rows) x H
        if not self.return_final:
            return (out,)
        return out, torch.stack(hs), torch.stack(cs), feed

    def _attentional_hidden(self, h: Tensor) -> Tensor:
        """h~_t = tanh(W_c [c_t; h_t]) (eq. 5; h~_t = h_t without attention) after dropout."""
        if self.attention is None:
            htilde = cq = h
        else:
            cq = torch.cat((self.attention.forward(h), h), 1)  # rows x (C + H)
            htilde = cq.mm(self.W_c_t).tanh_()  # rows x H
        feed, mask = dropout_forward(htilde, self.p_out)
        if self.save:
            self.saved_out.append((htilde, mask))
            self.cq.append(cq)
        return feed

    # ----------------------------------------------------------------- backward
    def backward(self, grads):
        if all(g is None for g in grads):
            return [None] * len(self.inputs())
        d_out = grads[0]
        if d_out is None:  # only the final states' gradients: the outputs' are zeros
            d_out = self.x_gates.new_zeros(self.active_rows.total_rows, self.h0.size(2))
        L = self.num_layers
        dh: List[Optional[Tensor]] = [None] * L
        dc: List[Optional[Tensor]] = [None] * L
        d_feed = None
        if self.return_final:
            d_hn, d_cn, d_feed = grads[1:4]
            dh = [None] * L if d_hn is None else list(d_hn.unbind(0))
            dc = [None] * L if d_cn is None else list(d_cn.unbind(0))
        d_gates: List[List[Tensor]] = [[] for _ in range(L)]  # per layer, per step (last first)
        d_htilde_pre: List[Tensor] = []
        weights_t, in_sizes, p_hidden = self.weights_t, self.in_sizes, self.p_hidden
        if self.attention is not None:
            self.attention.begin_backward()
        saved_layers, saved_out, cqs = self.saved_layers, self.saved_out, self.cq
        fused = self.zeros is not None
        scratches = {}  # the eager cell's backward buffer and its views, by row count
        active = self.active_rows.active
        offset, rows = self.active_rows.total_rows, active[-1]
        for t in range(len(active) - 1, -1, -1):
            n = active[t]
            offset -= n
            if n != rows:  # sentences that ended at this step: no gradient from later steps
                dh, dc, d_feed = padded_rows(dh, n), padded_rows(dc, n), padded_rows(d_feed, n)
                rows = n
            htilde, mask = saved_out[t]
            d = d_out[offset:offset + n] if d_feed is None else d_out[offset:offset + n] + d_feed
            d_h = self._attentional_hidden_backward(d, t, cqs[t], htilde, mask, d_htilde_pre)
            if dh[-1] is not None:
                d_h = dh[-1] if d_h is None else d_h + dh[-1]
            scratch = None if fused else scratches.get(n)
            if scratch is None and not fused:
                scratch = scratches[n] = cell_scratch(saved_layers[0][t][0][0])
            for i in range(L - 1, -1, -1):
                cell, mask = saved_layers[i][t]
                d_pre, dc[i] = lstm_cell_backward(d_h, dc[i], cell, scratch)
                d_gates[i].append(d_pre)
                d_x = d_pre.mm(weights_t[i])  # rows x (in + H)
                split = in_sizes[i]
                dh[i] = d_x[:, split:]
                if i:
                    d_h = dropout_backward(d_x[:, :split], mask, p_hidden)
                    if dh[i - 1] is not None:
                        d_h += dh[i - 1]
                else:
                    d_feed = d_x[:, :split]
        return self._input_grads(dh, dc, d_feed, d_gates, d_htilde_pre)

    def _attentional_hidden_backward(self, d_feed, t, cq, htilde, mask, recorded):
        """h_t's gradient from h~_t's (after dropout), through eq. 5 and the attention."""
        d_htilde = dropout_backward(d_feed, mask, self.p_out)
        if self.attention is None:
            return d_htilde
        d_pre = _tanh_backward(d_htilde, htilde)  # rows x H
        recorded.append(d_pre)
        d_cq = d_pre.mm(self.W_c)  # rows x (C + H)
        C = self.context_size
        return self.attention.backward(d_cq[:, :C], cq[:, C:], t).add_(d_cq[:, C:])

    def _input_grads(self, dh, dc, d_feed, d_gates, d_htilde_pre):
        """The gradients of ``inputs()``, every weight's from all steps at once."""
        # step order again: the backward collected them last step first
        d_gates = [torch.cat(d[::-1]) for d in d_gates]  # per layer: (sum of rows) x 4H
        grads = [d_gates[0], _stack(dh), _stack(dc), d_feed]
        for i in range(self.num_layers):  # [W_in W_hh]^T: (in + H) x 4H
            grads.append(torch.cat(self.products_in[i]).t().mm(d_gates[i]))
        grads += [d.sum(0) for d in d_gates[1:]]  # the biases above layer 0
        if self.attention is not None:
            cq = torch.cat(self.cq)  # (sum of rows) x (C + H)
            grads.append(torch.cat(d_htilde_pre[::-1]).t().mm(cq))  # W_c: H x (C + H)
            grads += self.attention.finish(cq[:, self.context_size:], self.active_rows.unpack_sorted)
        return grads


def _add(a: Optional[Tensor], b: Optional[Tensor]) -> Optional[Tensor]:
    if a is None:
        return b
    return a if b is None else a + b


def _stack(xs: List[Optional[Tensor]]) -> Optional[Tensor]:
    return None if any(x is None for x in xs) else torch.stack(xs)
