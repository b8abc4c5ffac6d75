"""The gated recurrent unit as Bahdanau, Cho & Bengio (2014) write it (appendix A.2.1).

  z_t  = sigmoid(W_z x_t + U_z h_{t-1})               update gate
  r_t  = sigmoid(W_r x_t + U_r h_{t-1})               reset gate
  h~_t = tanh(W x_t + U [r_t o h_{t-1}])
  h_t  = (1 - z_t) o h_{t-1} + z_t o h~_t

(biases, which the paper omits "to make the equations less cluttered", are on the
input products). The reset gate multiplies h_{t-1} BEFORE U, as in the paper and the
authors' Theano code; PyTorch's ``nn.GRU`` (cuDNN's formulation) multiplies after
(r o (U h)), a different unit, so it is not used.
"""
from typing import Tuple

import torch
import torch.nn as nn
from torch import Tensor

from ..layers import Linear


class GRU(nn.Module):
    """The parameters of one GRU: ``W`` = [W_z; W_r; W] (3H x in, with the biases),
    ``U_zr`` = [U_z; U_r] (2H x H) and ``U`` (H x H). The recurrence runs in the
    encoder's and decoder's own loops (:func:`gru_update`), whose input products are
    computed for all steps at once."""

    def __init__(self, input_size: int, hidden_size: int):
        super().__init__()
        self.hidden_size = hidden_size
        self.W = Linear(input_size, 3 * hidden_size, bias=True)
        self.U_zr = Linear(hidden_size, 2 * hidden_size, bias=False)
        self.U = Linear(hidden_size, hidden_size, bias=False)

    def recurrent_weights(self) -> Tuple[Tensor, Tensor]:
        """(U_zr^T, U^T): H x 2H and H x H, for ``h @ U^T`` products."""
        return self.U_zr.weight.t(), self.U.weight.t()


def gru_update(x_gates: Tensor, h: Tensor, U_zr_t: Tensor, U_t: Tensor) -> Tensor:
    """h_t from h_{t-1} (Bahdanau et al. 2014, appendix A.2.1).

    x_gates: ... x rows x 3H, the input products W_z x_t, W_r x_t, W x_t with their
    biases; h: ... x rows x H; U_zr_t: ... x H x 2H and U_t: ... x H x H (transposed
    weights; a leading dimension runs several GRUs at once, e.g. two directions).
    """
    H = h.size(-1)
    zr = torch.sigmoid(x_gates[..., : 2 * H] + torch.matmul(h, U_zr_t))  # ... x rows x 2H
    z, r = zr[..., :H], zr[..., H:]
    candidate = torch.tanh(x_gates[..., 2 * H :] + torch.matmul(r * h, U_t))  # h~_t
    return h + z * (candidate - h)  # (1 - z) o h_{t-1} + z o h~_t
