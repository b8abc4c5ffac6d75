"""Dropout (Srivastava et al. 2014; between LSTM layers and before the softmax as in Zaremba et
al. 2015 and Luong et al. 2015, section 4.1) with its masks drawn sixteen bits an element on the
CPU.

``F.dropout`` on the CPU draws its mask with ``bernoulli_``: one double from the generator per
element, serially, about 19 ns an element on a Xeon (Sapphire Rapids) against 0.3 ns for the
multiply it masks. At the IWSLT recipe's shapes (2 x 512, 4,000 tokens a batch) the masks were
about 15 % of a training update (docs/speed.md). :func:`dropout_noise` draws the same kind of
mask from the same generator in fewer bits: 64-bit integers from ``torch.randint``, each cut into
four 16-bit uniform integers u, an element kept where u < K, K = round((1 - p) 2^16). The keep
probability is (1 - p) rounded to a multiple of 2^-16 (0.7 -> 45,875 / 65,536 = 0.6999969) and
the kept values are scaled by 2^16 / K, so that E[dropout(x)] = x exactly, as with F.dropout.
A 3,360 x 512 mask applied: 14-15 ms against F.dropout's 28-34 ms (2 threads; the integers
themselves 5 ms, the rest the compare, the scale and fresh memory).

The masks come from torch's default generator (``torch.manual_seed`` and fairseq's ``--seed``
fix them; the same draws in the same order give the same masks), so the reference decoders of
the tests, which call the model's own dropout modules, draw exactly the masks of the step loops.
Elsewhere than on the CPU the modules are fairseq's: ``F.dropout`` (CUDA's fused kernel).
"""
import torch
from fairseq.modules import FairseqDropout
from torch import Tensor

_LEVELS = 1 << 16  # 16-bit uniform integers: u in [-2^15, 2^15) as torch.int16


def keep_threshold(p: float) -> int:
    """K: an element is kept where its 16-bit draw (0 .. 2^16 - 1) is below K."""
    return round((1.0 - p) * _LEVELS)


def dropout_noise(x: Tensor, p: float) -> Tensor:
    """A CPU dropout mask for x (x's shape and dtype): 2^16 / K where kept, 0 elsewhere; x * it
    is dropout(x). 0 < p <= 1 (p = 1: zeros)."""
    if not 0 < p <= 1:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
    n = x.numel()
    # ceil(n / 4) 64-bit draws, as int16 -> n uniform integers in [-2^15, 2^15), x's shape
    bits = torch.randint(-(1 << 63), (1 << 63) - 1, ((n + 3) // 4,), dtype=torch.int64, device=x.device)
    u = bits.view(torch.int16)[:n].view(x.shape)
    k = keep_threshold(p)
    if k <= 0:  # p within 2^-17 of 1: nothing kept
        return torch.zeros_like(x)
    if k >= _LEVELS:  # p below 2^-17: everything (K - 2^15 would not fit in int16)
        return torch.ones_like(x)
    noise = (u < k - _LEVELS // 2).to(x.dtype)  # u + 2^15 < K
    return noise.mul_(_LEVELS / k)


def dropout(x: Tensor, p: float) -> Tensor:
    """``F.dropout(x, p, training=True)``, with :func:`dropout_noise`'s masks on the CPU."""
    if p <= 0:
        return x
    if x.device.type != "cpu":
        return torch.nn.functional.dropout(x, p, training=True)
    return x * dropout_noise(x, p)


class Dropout(FairseqDropout):
    """``FairseqDropout`` (its ``--retain-dropout`` handling included) with :func:`dropout`
    (out of place: our models never ask for ``inplace``)."""

    def forward(self, x: Tensor, inplace: bool = False):
        if self.training or self.apply_during_inference:
            return dropout(x, self.p)
        return x
