"""``nn.LSTM`` that still runs under CPU autocast where oneDNN has no kernel for its dtype."""
from contextlib import contextmanager, nullcontext
from typing import Optional, Tuple

import torch
import torch.nn as nn
from torch import Tensor
from torch.nn.utils.rnn import PackedSequence


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
            return super().forward(input, hx)
