"""The pieces of the recurrent step loops, each as a forward and its backward, without autograd.

The input-feeding loop (``luong/input_feeding.py``) and RNNsearch's loop (``rnnsearch/steps.py``)
run their steps with autograd off and walk them back in their own ``torch.autograd.Function``
(``steps/loop.py``): every piece here computes one step's values and keeps only what its
backward reads; the backward turns the gradient of its outputs into the gradient of its inputs.
Weight gradients are not formed here: the loops collect the inputs and output gradients of each
product over the steps and form them after the loop, one matrix product a weight.

Each piece gives the numbers of the autograd operations it replaces (the reference decoders in
``tests/reference_decoders.py`` are the specification; ``tests/test_step_loops.py`` checks the
pieces against autograd and by ``gradcheck``). Where a step is small every operation's fixed cost
(several microseconds on a CPU, a launch on a GPU) is its price, so each piece is written in as
few operations as it can be.
"""
from typing import Optional, Tuple

import torch
import torch.nn.functional as F
from torch import Tensor

from .. import cpu_sizes
from ..dropout import dropout_noise

aten = torch.ops.aten
_tanh_backward = aten.tanh_backward.default
_tanh_backward_ = aten.tanh_backward.grad_input
_sigmoid_backward_ = aten.sigmoid_backward.grad_input

# ----------------------------------------------------------------- the alignment's softmax
def at_least_float32(dtype: torch.dtype) -> torch.dtype:
    return torch.promote_types(dtype, torch.float32)


def softmax_wide(scores: Tensor, dim: int) -> Tensor:
    """The alignment's softmax over ``dim``, in float32 or wider (fp16/bf16 stay finite, as in
    fairseq's ``AttentionLayer``); slots scored -inf get exactly 0. Its result stays wide."""
    return torch.softmax(scores, dim, dtype=at_least_float32(scores.dtype))



# ----------------------------------------------------------------- dropout


def dropout_forward(x: Tensor, p: float) -> Tuple[Tensor, Optional[Tensor]]:
    """``dropout.dropout(x, p)`` (the decoder's dropout modules) and what its backward reads
    (None when p = 0): the same draws from the same generator, so the same masks as the
    reference decoders' calls of those modules. On the CPU the scaled mask of
    ``dropout.dropout_noise``, on CUDA the fused kernel's mask (``native_dropout``, as F.dropout)."""
    if p <= 0:
        return x, None
    if x.is_cuda:
        return torch.native_dropout(x, p, True)
    noise = dropout_noise(x, p)
    return x * noise, noise


def dropout_backward(grad: Tensor, mask: Optional[Tensor], p: float) -> Tensor:
    if mask is None:
        return grad
    if mask.dtype == torch.bool:  # CUDA's fused kernel
        return aten.native_dropout_backward(grad, mask, 1.0 / (1.0 - p))
    return grad * mask


# ----------------------------------------------------------------- softmax and products with a memory


class MemoryPlan:
    """How the steps of one call read a memory of ``slots`` slots of ``width`` numbers a row,
    decided once per call (every operation is a call, and some CPU kernels are slow at sizes
    a step loop meets):

    * ``short_rows``: on the CPU, softmax over a last dimension shorter than a vector register
      takes a scalar path, several times slower than over the first dimension, so such scores
      are normalised transposed (``cpu_sizes.SOFTMAX_SHORT_ROW``, measured there);
    * ``small``: ATen multiplies batches of small matrices in a scalar loop on the CPU
      (``bmm_out_or_baddbmm_``), so a weighted sum over a small memory is a product and a sum
      (``cpu_sizes.BMM_SCALAR_BELOW``).

    ATen's CPU ``bmm`` also takes that scalar loop when its first operand is strided across the
    batch, as the probabilities of a transposed softmax are: 1,970 against 230 us at 320 rows,
    12 slots of 256 numbers. :meth:`weighted` makes them contiguous first (a copy of rows x N).
    """

    __slots__ = ("short_rows", "small", "wide", "dtype")

    def __init__(self, slots: int, width: int, dtype: torch.dtype, device: torch.device):
        cpu = device.type == "cpu"
        self.short_rows = cpu and slots < cpu_sizes.SOFTMAX_SHORT_ROW
        self.small = cpu and slots * width < cpu_sizes.BMM_SCALAR_BELOW
        self.dtype = dtype
        self.wide = torch.promote_types(dtype, torch.float32)  # the softmax's dtype

    def softmax(self, scores: Tensor) -> Tensor:
        """softmax over the slots (rows x N) in float32 or wider (``masked_softmax`` of
        ``luong/attention.py``; the mask is already in the scores as -inf): the probabilities,
        as :meth:`softmax_backward` reads them (N x rows when ``short_rows``)."""
        if self.short_rows:
            return softmax_wide(scores.t(), 0)  # N x rows
        return softmax_wide(scores, -1)

    def probabilities(self, probs: Tensor) -> Tensor:
        """:meth:`softmax`'s result as rows x N, in the memory's dtype."""
        rows_first = probs.t() if self.short_rows else probs
        return rows_first if self.wide == self.dtype else rows_first.to(self.dtype)

    def softmax_backward(self, grad: Tensor, probs: Tensor) -> Tensor:
        """The scores' gradient (rows x N, in the memory's dtype) from the probabilities'."""
        if self.wide != self.dtype:
            grad = grad.to(self.wide)
        if self.short_rows:
            d = torch._softmax_backward_data(grad.t(), probs, 0, self.wide).t()
        else:
            d = torch._softmax_backward_data(grad, probs, -1, self.wide)
        return d if self.wide == self.dtype else d.to(self.dtype)

    def weighted(self, weights: Tensor, rows: Tensor) -> Tensor:
        """For each batch row b, sum_s weights[b, s] rows[b, s]: weights bsz x N, rows
        bsz x N x C -> bsz x C (the context c_t = sum_s a_t(s) h̄_s; a query's gradient)."""
        if self.small:
            return (weights.unsqueeze(2) * rows).sum(1)
        # bsz x 1 x N @ bsz x N x C -> bsz x C (weights contiguous: the docstring of the class)
        return torch.bmm(weights.contiguous().unsqueeze(1), rows).squeeze(1)


def dot_rows(vectors: Tensor, rows_t: Tensor) -> Tensor:
    """For each batch row b, rows[b] @ vectors[b]: vectors bsz x C, rows_t bsz x C x N (the rows
    transposed) -> bsz x N."""
    # bsz x 1 x C @ bsz x C x N -> bsz x N
    return torch.bmm(vectors.unsqueeze(1), rows_t).squeeze(1)


# ----------------------------------------------------------------- the LSTM cell


def fused_cell_here(pre: Tensor) -> bool:
    """Whether the cell runs in PyTorch's fused LSTM kernels (``aten::_thnn_fused_lstm_cell``
    and its backward): on CUDA, where they exist; elsewhere :func:`eager_lstm_cell`."""
    return pre.is_cuda


def lstm_cell(pre: Tensor, c_prev: Tensor, zeros: Optional[Tensor] = None):
    """The LSTM cell (Zaremba et al. 2015, as used by Luong et al. 2015, section 2) on the gate
    pre-activations ``pre`` (rows x 4H, PyTorch's gate order i, f, g, o), c_prev rows x H:

      c_t = sigmoid(f) * c_{t-1} + sigmoid(i) * tanh(g);  h_t = sigmoid(o) * tanh(c_t)

    Returns h_t, c_t and what :func:`lstm_cell_backward` reads. On CUDA one fused kernel (it adds
    two gate tensors: ``zeros``, rows x 4H, is the second, made here if not given)."""
    if fused_cell_here(pre):
        h, c, workspace = aten._thnn_fused_lstm_cell(pre, torch.zeros_like(pre) if zeros is None else zeros, c_prev)
        return h, c, (workspace, c_prev, c)
    return eager_lstm_cell(pre, c_prev)


def eager_lstm_cell(pre: Tensor, c_prev: Tensor):
    """:func:`lstm_cell` in elementwise operations. The gates are first copied gate-major
    (4 x rows x H, one copy): every later operation reads contiguous memory; on the strided
    quarters of rows x 4H each would cost several times as much on the CPU (measured: 40 us
    against 7 us for a sigmoid at 256 x 16)."""
    rows, four_h = pre.shape
    gates = pre.view(rows, 4, four_h // 4).transpose(0, 1).contiguous()  # 4 x rows x H: i, f, g, o
    i, f, g, o = gates.unbind(0)
    i_f = gates[:2]
    i_f.sigmoid_()
    g.tanh_()
    o.sigmoid_()
    c = f * c_prev
    c.addcmul_(i, g)
    tanh_c = torch.tanh(c)
    return o * tanh_c, c, (gates, i_f, i, f, g, o, c_prev, tanh_c)


def lstm_cell_backward(dh: Tensor, dc: Optional[Tensor], saved, scratch=None):
    """The gradients of the gate pre-activations (rows x 4H, i f g o) and of c_{t-1} from those
    of h_t and c_t (``dc`` None: nothing but h_t read c_t). ``scratch``: what :func:`cell_scratch`
    made for these rows, for the eager backward (its contents are not kept)."""
    if len(saved) == 3:  # the fused kernel's
        workspace, c_prev, c = saved
        d_pre, dc_prev, _ = aten._thnn_fused_lstm_cell_backward_impl(dh, dc, c_prev, c, workspace, False)
        return d_pre, dc_prev
    return eager_lstm_cell_backward(dh, dc, saved, scratch or cell_scratch(saved[0]))


def cell_scratch(like: Tensor):
    """A 4 x rows x H buffer for the eager backward's gate gradients, with its views (made once
    per row count by a loop: each view is an operation call)."""
    d_gates = torch.empty_like(like)
    return (d_gates, d_gates[:2], *d_gates.unbind(0))


def eager_lstm_cell_backward(dh: Tensor, dc: Optional[Tensor], saved, scratch):
    """:func:`lstm_cell_backward` in elementwise operations on the gate-major saved gates."""
    gates, i_f, i, f, g, o, c_prev, tanh_c = saved
    d_gates, d_if, di, df, dg, do = scratch  # 4 x rows x H and its views
    d_c = _tanh_backward(dh * o, tanh_c)  # through h_t = o * tanh(c_t)
    if dc is not None:
        d_c += dc
    torch.mul(d_c, g, out=di)
    torch.mul(d_c, c_prev, out=df)
    torch.mul(d_c, i, out=dg)
    torch.mul(dh, tanh_c, out=do)
    # through the activations, in place: sigmoid for i, f (one block) and o, tanh for g
    _sigmoid_backward_(d_if, i_f, grad_input=d_if)
    _tanh_backward_(dg, g, grad_input=dg)
    _sigmoid_backward_(do, o, grad_input=do)
    rows, H = dh.shape
    d_pre = d_gates.transpose(0, 1).reshape(rows, 4 * H)  # 4 x rows x H -> rows x 4H, a copy of the
    if rows == 1:  # scratch (reused) unless one row makes the transposed buffer contiguous already
        d_pre = d_pre.clone()
    return d_pre, d_c.mul_(f)


# ----------------------------------------------------------------- a state's rows
def padded_rows(x, n: int):
    """Gradients of a state (a tensor, None, or a list of them) with ``n`` rows: the rows of
    sentences that ended at this step had no gradient from later steps (zeros)."""
    if isinstance(x, list):
        return [padded_rows(y, n) for y in x]
    if x is None or x.size(0) == n:
        return x
    return F.pad(x, (0, 0, 0, n - x.size(0)))
