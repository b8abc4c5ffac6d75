"""The models' dropout (``modules/dropout.py``): masks of 16-bit draws on the CPU, between the
encoders' LSTM layers too (``autocast_safe_lstm.py``).

Each element is kept with probability K / 2^16, K = round((1 - p) 2^16), independently of the
others (four elements share a 64-bit draw: each quarter of it is checked on its own, and
neighbours together), and the kept values are scaled by 2^16 / K, so E[dropout(x)] = x.
"""
import math

import pytest
import torch
import torch.nn as nn
from torch.nn.utils.rnn import PackedSequence, pack_padded_sequence

from fairseq_luong.modules import autocast_safe_lstm
from fairseq_luong.modules.autocast_safe_lstm import AutocastSafeLSTM
from fairseq_luong.modules.dropout import Dropout, dropout, dropout_noise, keep_threshold

N = 1 << 22  # elements a mask: a kept share is checked within 6 standard deviations of its probability


def within(share: float, prob: float, n: int, sigmas: float = 6.0) -> bool:
    return abs(share - prob) <= sigmas * math.sqrt(prob * (1 - prob) / n)


@pytest.mark.parametrize("p", [0.1, 0.3, 0.5, 0.9])
def test_each_element_is_kept_with_the_rounded_probability_independently(p):
    torch.manual_seed(0)
    kept = dropout_noise(torch.ones(N), p) != 0
    q = keep_threshold(p) / 65536
    assert abs(q - (1 - p)) <= 2 ** -17
    assert within(kept.float().mean().item(), q, N)
    # the four 16-bit quarters of each 64-bit draw, each on its own
    quarters = kept.view(-1, 4).float()
    for i in range(4):
        assert within(quarters[:, i].mean().item(), q, N // 4), f"quarter {i}"
    # neighbours (in one draw and across draws) kept together as often as independent draws are
    both = (kept[:-1] & kept[1:]).float().mean().item()
    assert within(both, q * q, N - 1)


def test_kept_values_are_scaled_so_that_the_expectation_is_x():
    x = torch.randn(1000, 64)
    p = 0.3
    torch.manual_seed(1)
    noise = dropout_noise(x, p)
    scale = 65536 / keep_threshold(p)
    assert set(noise.unique().tolist()) == {0.0, torch.tensor(scale).item()}  # in float32
    torch.manual_seed(1)
    assert torch.equal(dropout(x, p), x * noise)
    # the mean of many masks is 1 (keep probability times scale, exactly)
    torch.manual_seed(2)
    mean = dropout_noise(torch.ones(N), p).double().mean().item()
    assert abs(mean - 1.0) <= 6 * math.sqrt((scale - 1) / N)


def test_the_masks_come_from_torchs_generator():
    x = torch.ones(3, 1001)  # not a multiple of 4 elements
    torch.manual_seed(5)
    a = dropout_noise(x, 0.3)
    torch.manual_seed(5)
    b = dropout_noise(x, 0.3)
    c = dropout_noise(x, 0.3)
    assert torch.equal(a, b) and not torch.equal(b, c)
    assert a.shape == x.shape and a.dtype == x.dtype


def test_masks_in_the_inputs_dtype():
    torch.manual_seed(0)
    x = torch.randn(16, 32, dtype=torch.bfloat16)
    y = dropout(x, 0.3)
    assert y.dtype == torch.bfloat16
    kept = y != 0
    assert torch.equal(y[kept], (x * torch.tensor(65536 / keep_threshold(0.3), dtype=torch.bfloat16))[kept])


def test_the_module_drops_in_training_and_with_retain_dropout_only():
    x = torch.randn(50, 40)
    module = Dropout(0.5, module_name="LuongDecoder")
    assert torch.equal(module.eval()(x), x)
    assert (module.train()(x) == 0).any()
    assert torch.equal(Dropout(0.0).train()(x), x)
    module.eval()
    module.make_generation_fast_("dropout_out", retain_dropout=True)  # --retain-dropout
    assert (module(x) == 0).any()


def test_the_gradient_is_the_mask():
    torch.manual_seed(4)
    x = torch.randn(9, 7, requires_grad=True)
    torch.manual_seed(4)
    noise = dropout_noise(x.detach(), 0.3)
    torch.manual_seed(4)
    y = Dropout(0.3).train()(x)
    grad = torch.randn(9, 7)
    (d,) = torch.autograd.grad(y, x, grad)
    assert torch.equal(d, grad * noise)


def test_the_ends_of_the_range_keep_nothing_or_everything():
    x = torch.randn(4, 4)
    assert torch.equal(dropout(x, 1.0), torch.zeros_like(x))
    assert torch.equal(dropout_noise(x, 1 - 2 ** -18), torch.zeros_like(x))
    assert torch.equal(dropout(x, 2 ** -18), x)  # K = 2^16: every draw is below it
    with pytest.raises(ValueError, match="between 0 and 1"):  # as F.dropout refuses it
        dropout(x, 1.5)


def packed_batch(bidirectional, layers=3):
    torch.manual_seed(0)
    lstm = AutocastSafeLSTM(5, 4, num_layers=layers, dropout=0.5, bidirectional=bidirectional,
                            batch_first=True).train()
    x = torch.randn(3, 6, 5)
    packed = pack_padded_sequence(x, torch.tensor([6, 2, 4]), batch_first=True, enforce_sorted=False)
    dirs = 2 if bidirectional else 1
    hx = (torch.randn(layers * dirs, 3, 4), torch.randn(layers * dirs, 3, 4))
    return lstm, packed, hx


@pytest.mark.parametrize("bidirectional", [False, True])
@pytest.mark.parametrize("with_state", [False, True])
def test_the_encoders_lstm_runs_layer_by_layer_with_these_masks_between(bidirectional, with_state, monkeypatch):
    """In training on the CPU a stacked LSTM's layers run one at a time with ``dropout`` between
    them: with a fixed mask in its place, the output and final states are those of one-layer
    LSTMs with the same weights and that mask between them."""
    lstm, packed, hx = packed_batch(bidirectional)
    hx = hx if with_state else None

    def fixed(data, p):  # every third element dropped
        return data * (torch.arange(data.numel()).view_as(data) % 3 != 0).to(data.dtype) / (1 - p)

    monkeypatch.setattr(autocast_safe_lstm, "dropout", fixed)
    out, (h_n, c_n) = lstm(packed, hx)
    dirs = 2 if bidirectional else 1
    data, want_h, want_c = packed.data, [], []
    for layer in range(lstm.num_layers):
        one = nn.LSTM(lstm.input_size if layer == 0 else 4 * dirs, 4, bidirectional=bidirectional)
        for name, _ in one.named_parameters():  # weight_ih_l0 (_reverse) <- weight_ih_l{layer}
            getattr(one, name).data.copy_(getattr(lstm, name.replace("_l0", f"_l{layer}")))
        if layer:
            data = fixed(data, 0.5)
        states = None
        if hx is not None:
            rows = slice(layer * dirs, (layer + 1) * dirs)
            states = (hx[0][rows], hx[1][rows])
        layer_input = PackedSequence(data, packed.batch_sizes, packed.sorted_indices, packed.unsorted_indices)
        y, (h, c) = one(layer_input, states)
        data = y.data
        want_h.append(h)
        want_c.append(c)
    assert torch.allclose(out.data, data, atol=1e-6)
    assert torch.allclose(h_n, torch.cat(want_h), atol=1e-6) and torch.allclose(c_n, torch.cat(want_c), atol=1e-6)


@pytest.mark.parametrize("bidirectional", [False, True])
def test_with_nothing_dropped_the_layers_give_pytorchs_kernels_numbers(bidirectional):
    lstm, packed, hx = packed_batch(bidirectional)
    lstm.dropout = 2 ** -18  # every element kept: the layer-by-layer path, identity masks
    got = lstm(packed, hx)
    lstm.dropout = 0.0
    want = nn.LSTM.forward(lstm, packed, hx)
    assert torch.equal(got[0].data, want[0].data)
    assert torch.equal(got[1][0], want[1][0]) and torch.equal(got[1][1], want[1][1])
    lstm.eval()  # evaluation: PyTorch's kernel as it is
    lstm.dropout = 0.5
    assert torch.equal(lstm(packed, hx)[0].data, nn.LSTM.forward(lstm, packed, hx)[0].data)
