"""``nn.LSTM`` that still runs under CPU autocast where oneDNN has no kernel for its dtype."""
from typing import Optional, Tuple

import torch
import torch.nn as nn
from torch import Tensor


def _onednn_has_kernel(dtype: torch.dtype) -> bool:
    """Whether oneDNN (the CPU kernel of an unpacked ``nn.LSTM``) runs an LSTM in ``dtype``."""
    if dtype == torch.bfloat16:
        return torch.ops.mkldnn._is_mkldnn_bf16_supported()
    if dtype == torch.float16:
        return torch.ops.mkldnn._is_mkldnn_fp16_supported()
    return True


class AutocastSafeLSTM(nn.LSTM):
    """An ``nn.LSTM`` (same parameters, same state dict) whose unpacked CPU forward runs in
    float32 outside autocast when oneDNN has no kernel for the autocast dtype: bf16 on CPUs
    without AVX512-BF16 / AMX, where ``nn.LSTM`` fails with "could not create a primitive
    descriptor for the LSTM forward propagation primitive". Packed input takes PyTorch's
    own kernel, which has no such gap, and is left alone."""

    def forward(self, input, hx: Optional[Tuple[Tensor, Tensor]] = None):
        if (
            isinstance(input, Tensor)
            and input.device.type == "cpu"
            and torch.is_autocast_enabled("cpu")
            and not _onednn_has_kernel(torch.get_autocast_dtype("cpu"))
        ):
            with torch.autocast("cpu", enabled=False):
                hx = None if hx is None else (hx[0].float(), hx[1].float())
                return super().forward(input.float(), hx)
        return super().forward(input, hx)
