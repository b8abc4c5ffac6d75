"""RNNsearch's decoder loop for one call: forward, and backward through time.

The recurrence of ``rnnsearch/decoder.py``'s docstring (Bahdanau et al. 2014, appendix A):

  c_i = attention(s_{i-1}, h)                     concat score, eq. 5-6 (``luong/step_attention.py``)
  s_i = GRU(s_{i-1}, [E y_{i-1}; c_i])             A.2.1 (``rnnsearch/gru.py``)

run by :class:`RNNsearchSteps` without autograd, in the dtype of one call (``steps/loop.py``).
The embedding half of the GRU's input products comes in computed for every step at once
(``x_gates``: W [E y; .] + b) and its gradient goes out the same way; per step the context's
input product, the two recurrent products and the gates; in the backward their gradients, and
every weight's gradient after the loop from the packed inputs and output gradients of its
product (W's context columns, U_zr, U; the attention's). The deep output reads the states and
contexts this returns, after the loop, with autograd (``RNNsearchDecoder._run``).
"""
from typing import List, Optional

import torch
from torch import Tensor

from ..luong.step_attention import attention_steps
from ..steps.active_rows import ActiveRows
from ..steps.ops import aten, padded_rows


class RNNsearchSteps:
    """One call's RNNsearch loop; the engine of ``steps.loop.run_steps``.

    x_gates: (sum of rows) x 3H, packed; s0: bsz x H; memory: the attention's, rows in active_rows
    order. ``forward`` returns, packed, the state the deep output reads at each step (s_{i-1},
    or s_i with ``readout_current``) and the contexts c_i ((sum of rows) x H and x C), and,
    unless the active rows skip padded steps, the last state (bsz x H).
    """

    def __init__(self, decoder, x_gates: Tensor, s0: Tensor, memory, active_rows: ActiveRows,
                 step0: int, need_weights: bool):
        self.save = torch.is_grad_enabled()
        dtype = x_gates.dtype
        self.active_rows = active_rows
        self.x_gates, self.s0 = x_gates, s0.to(dtype)
        self.readout_current = decoder.deep_output_from_current
        E = decoder.embed_tokens.embedding_dim
        gru = decoder.gru
        self.H = gru.hidden_size
        self.W_ctx_t = gru.W.weight[:, E:].to(dtype).t()  # C x 3H: the context's input product
        U_zr_t, U_t = gru.recurrent_weights()  # H x 2H, H x H
        self.U_zr_t, self.U_t = U_zr_t.to(dtype), U_t.to(dtype)
        self.attention = attention_steps(decoder.attention, memory, dtype, self.save, need_weights, step0)
        self.return_final = active_rows.full

    def inputs(self) -> List[Tensor]:
        return [self.x_gates, self.s0, self.W_ctx_t, self.U_zr_t, self.U_t, *self.attention.inputs()]

    def forward(self):
        H, save, x_gates = self.H, self.save, self.x_gates
        W_ctx_t, U_zr_t, U_t = self.W_ctx_t, self.U_zr_t, self.U_t
        attention, readout_current = self.attention, self.readout_current
        s = self.s0
        # what the backward reads, per step: the gates, and the inputs of each product (read again
        # after the loop): s_{i-1}, r * s_{i-1}, c_i
        self.saved = saved = []
        self.states, self.rs, self.contexts = states, rs_all, contexts = [], [], []
        readouts: List[Tensor] = []
        offset, rows = 0, s.size(0)
        for n in self.active_rows.active:
            if n != rows:  # sentences ended: their rows are the last ones
                s = s[:n]
                rows = n
            c = attention.forward(s)  # c_i from s_{i-1}: rows x C
            gates = torch.addmm(x_gates[offset:offset + n], c, W_ctx_t)  # rows x 3H: W [E y; c] + b
            zr = torch.addmm(gates[:, :2 * H], s, U_zr_t).sigmoid_()  # rows x 2H: z, r
            z, r = zr[:, :H], zr[:, H:]
            rs = r * s
            candidate = torch.addmm(gates[:, 2 * H:], rs, U_t).tanh_()  # h~_i
            step = candidate - s
            s_new = torch.addcmul(s, z, step)  # (1 - z) s_{i-1} + z h~_i
            if save:
                saved.append((zr, candidate, step))
                states.append(s)
                rs_all.append(rs)
            readouts.append(s_new if readout_current else s)
            contexts.append(c)
            s = s_new
            offset += n
        outputs = (torch.cat(readouts), torch.cat(contexts))  # (sum of rows) x H, x C
        return outputs + (s,) if self.return_final else outputs

    def backward(self, grads):
        if all(g is None for g in grads):
            return [None] * len(self.inputs())
        d_readouts, d_contexts = grads[:2]
        H, saved, attention = self.H, self.saved, self.attention
        ds: Optional[Tensor] = grads[2] if self.return_final else None  # of s_i, the state after step i
        W_ctx, U_zr, U = self.W_ctx_t.t(), self.U_zr_t.t(), self.U_t.t()
        d_gates: List[Tensor] = []  # per step, last first: rows x 3H
        attention.begin_backward()
        active = self.active_rows.active
        offset, rows = self.active_rows.total_rows, active[-1]
        for t in range(len(active) - 1, -1, -1):
            n = active[t]
            offset -= n
            if n != rows:
                ds = padded_rows(ds, n)
                rows = n
            zr, candidate, step = saved[t]
            s = self.states[t]
            d_readout = None if d_readouts is None else d_readouts[offset:offset + n]
            if self.readout_current and d_readout is not None:
                ds = d_readout if ds is None else ds + d_readout
            if ds is None:
                ds = torch.zeros_like(s)
            z, r = zr[:, :H], zr[:, H:]
            d_gate = zr.new_empty(n, 3 * H)
            d_zr, d_cand = d_gate[:, :2 * H], d_gate[:, 2 * H:]
            # s_i = s_{i-1} + z (h~_i - s_{i-1})
            torch.mul(ds, step, out=d_zr[:, :H])  # d z
            d_candidate = ds * z
            ds_prev = ds - d_candidate
            _tanh_backward_(d_candidate, candidate, d_cand)
            d_rs = d_cand.mm(U)  # rows x H
            torch.mul(d_rs, s, out=d_zr[:, H:])  # d r
            ds_prev.addcmul_(d_rs, r)
            aten.sigmoid_backward.grad_input(d_zr, zr, grad_input=d_zr)
            ds_prev.addmm_(d_zr, U_zr)
            d_c = d_gate.mm(W_ctx)  # rows x C
            if d_contexts is not None:
                d_c += d_contexts[offset:offset + n]
            ds_prev += attention.backward(d_c, s, t)
            if not self.readout_current and d_readout is not None:
                ds_prev += d_readout
            d_gates.append(d_gate)
            ds = ds_prev
        # every weight's gradient from all steps at once (step order: they were collected last first)
        d_gates_all = torch.cat(d_gates[::-1])  # (sum of rows) x 3H
        states = torch.cat(self.states)  # s_{i-1} of every step
        return [d_gates_all, ds,
                torch.cat(self.contexts).t().mm(d_gates_all),  # W's context columns, transposed: C x 3H
                states.t().mm(d_gates_all[:, :2 * H]),  # U_zr^T: H x 2H
                torch.cat(self.rs).t().mm(d_gates_all[:, 2 * H:]),  # U^T: H x H
                *attention.finish(states, self.active_rows.unpack_sorted)]


def _tanh_backward_(grad, output, out):
    return aten.tanh_backward.grad_input(grad, output, grad_input=out)
