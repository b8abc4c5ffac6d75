"""``nn.LSTM`` that still runs under CPU autocast where oneDNN has no kernel for its dtype, and
drops out between its layers with the models' CPU dropout (``dropout.py``)."""
from contextlib import contextmanager, nullcontext
from typing import Optional, Tuple

import torch
import torch.nn as nn
from torch import _VF, Tensor
from torch.nn.utils.rnn import PackedSequence

from .dropout import dropout


def _onednn_has_kernel(dtype: torch.dtype) -> bool:
    """Whether oneDNN (PyTorch's CPU kernel for an LSTM over equal-length sequences) runs an
    LSTM in ``dtype``."""
    if dtype == torch.bfloat16:
        return torch.ops.mkldnn._is_mkldnn_bf16_supported()
    if dtype == torch.float16:
        return torch.ops.mkldnn._is_mkldnn_fp16_supported()
    return True


@contextmanager
def _without_onednn():
    """PyTorch's own LSTM kernel instead of oneDNN's, for the ``with`` block only."""
    was = torch.backends.mkldnn.enabled
    torch.backends.mkldnn.enabled = False
    try:
        yield
    finally:
        torch.backends.mkldnn.enabled = was


class AutocastSafeLSTM(nn.LSTM):
    """An ``nn.LSTM`` (same parameters, same state dict) that runs under CPU autocast on CPUs
    whose oneDNN has no kernel for the autocast dtype (bf16 without AVX512-BF16 / AMX).

    PyTorch hands an LSTM to oneDNN whenever every sequence of the batch has the same length
    (an unpacked tensor, or a packed batch of equal lengths: one sentence in
    ``fairseq-interactive``), and there ``nn.LSTM`` fails with "could not create a primitive
    descriptor for the LSTM forward propagation primitive". A packed batch of unequal lengths
    takes PyTorch's own kernel, which autocasts its matrix products like any other. Without a
    oneDNN kernel every call takes that one: the same bf16 arithmetic for one sentence as for a
    padded batch, rather than an error."""

    def forward(self, input, hx: Optional[Tuple[Tensor, Tensor]] = None):
        data = input.data if isinstance(input, PackedSequence) else input
        no_kernel = (
            data.device.type == "cpu"
            and torch.is_autocast_enabled("cpu")
            and not _onednn_has_kernel(torch.get_autocast_dtype("cpu"))
        )
        with _without_onednn() if no_kernel else nullcontext():
            if self._drops_between_layers(input):
                return self._layer_by_layer(input, hx)
            return super().forward(input, hx)

    def _drops_between_layers(self, input) -> bool:
        """Whether this call drops out between layers on the CPU: then the layers run one by one
        with ``dropout.dropout`` between them (PyTorch's LSTM kernel draws F.dropout's masks
        inside, a ``bernoulli_`` per element). Packed batches only (the encoders'); the same
        equations, the same parameters."""
        return (self.training and self.dropout > 0 and self.num_layers > 1 and self.proj_size == 0
                and isinstance(input, PackedSequence) and input.data.device.type == "cpu")

    def _layer_by_layer(self, packed: PackedSequence, hx: Optional[Tuple[Tensor, Tensor]]):
        """``nn.LSTM.forward`` of a packed batch in training, one layer at a time, dropout(p) on
        every layer's output but the last's (as PyTorch's kernel places it)."""
        data, batch_sizes, sorted_indices, unsorted_indices = packed
        dirs = 2 if self.bidirectional else 1
        if hx is None:
            zeros = data.new_zeros(self.num_layers * dirs, int(batch_sizes[0]), self.hidden_size)
            hx = (zeros, zeros)
        else:
            hx = self.permute_hidden(hx, sorted_indices)
        per_layer = len(self._flat_weights) // self.num_layers  # w_ih, w_hh[, b_ih, b_hh] a direction
        h_n, c_n = [], []
        for layer in range(self.num_layers):
            if layer:
                data = dropout(data, self.dropout)  # tokens x dirs*H
            states = slice(layer * dirs, (layer + 1) * dirs)
            weights = self._flat_weights[layer * per_layer : (layer + 1) * per_layer]
            data, h, c = _VF.lstm(data, batch_sizes, (hx[0][states], hx[1][states]), weights, self.bias,
                                  1, 0.0, True, self.bidirectional)
            h_n.append(h)
            c_n.append(c)
        hidden = (torch.cat(h_n), torch.cat(c_n))  # (layers*dirs) x bsz x H each
        return (PackedSequence(data, batch_sizes, sorted_indices, unsorted_indices),
                self.permute_hidden(hidden, unsorted_indices))
