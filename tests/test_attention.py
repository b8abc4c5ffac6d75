"""Unit tests: each score equals its equation, masking, local windows by hand, gradients."""
import math

import pytest
import torch

from fairseq_luong.errors import ConfigError
from fairseq_luong.modules.luong.attention import (
    AttentionalHidden,
    GlobalAttention,
    LocalMAttention,
    LocalPAttention,
    SourceMemory,
    build_attention,
    masked_softmax,
    predictive_alignment,
)
from fairseq_luong.modules.luong.scores import (
    ConcatScore,
    DotScore,
    GeneralScore,
    LocationScore,
    build_score,
)

torch.manual_seed(0)
B, T, S, H, C = 3, 5, 7, 6, 4


def memory_from(values, lengths, left_pad, keys=None):
    """SourceMemory for sentences whose tokens are ``values[b, :lengths[b]]`` (bsz x S x C),
    laid out left- or right-padded (the same content either way)."""
    bsz, srclen, _ = values.size()
    if left_pad:
        values = torch.stack([v.roll(srclen - n, 0) for v, n in zip(values, lengths)])
    lengths = torch.tensor(lengths)
    start = srclen - lengths if left_pad else torch.zeros_like(lengths)
    pos = torch.arange(srclen).unsqueeze(0)
    mask = (pos < start.unsqueeze(1)) | (pos >= (start + lengths).unsqueeze(1))
    values = values.masked_fill(mask.unsqueeze(-1), 0.0)
    return SourceMemory(values, keys, mask, start, lengths)


def with_keys(att, mem):
    """``mem`` with the keys ``att``'s score precomputes (as the decoder builds it)."""
    return att.precompute(mem.values, mem.padding_mask, mem.start, mem.length)


# ----------------------------------------------------------------- eq. 8


def test_dot_score_equation():
    q, k = torch.randn(B, T, H), torch.randn(B, S, H)
    got = DotScore(H, H)(q, k, None)
    want = torch.einsum("bth,bsh->bts", q, k)
    assert torch.allclose(got, want, atol=1e-6)


def test_general_score_equation():
    score = GeneralScore(H, C)
    q, v = torch.randn(B, T, H), torch.randn(B, S, C)
    got = score(q, score.precompute(v), None)
    W_a = score.W_a.weight  # H x C
    want = torch.stack(
        [torch.stack([torch.stack([q[b, t] @ W_a @ v[b, s] for s in range(S)]) for t in range(T)])
         for b in range(B)]
    )
    assert torch.allclose(got, want, atol=1e-5)


def test_concat_score_equation():
    score = ConcatScore(H, C, 5)
    q, v = torch.randn(B, T, H), torch.randn(B, S, C)
    got = score(q, score.precompute(v), None)
    W_a = torch.cat([score.W_q.weight, score.W_k.weight], dim=1)  # A x (H + C)
    v_a = score.v_a.weight[0]
    want = torch.empty(B, T, S)
    for b in range(B):
        for t in range(T):
            for s in range(S):
                want[b, t, s] = v_a @ torch.tanh(W_a @ torch.cat([q[b, t], v[b, s]]))
    assert torch.allclose(got, want, atol=1e-5)


def test_location_score_equation_and_truncation():
    score = LocationScore(H, max_len=4)
    q = torch.randn(B, T, H)
    positions = torch.tensor([[0, 1, 2, 3, 4, 5], [0, 0, 0, 1, 2, 3], [0, 1, 2, 0, 0, 0]]).unsqueeze(1)
    got = score(q, None, positions)
    assert score.W_a.bias is None  # eq. 8: a_t = softmax(W_a h_t), no bias
    full = q @ score.W_a.weight.t()  # W_a h_t: B x T x 4
    for b in range(B):
        for j in range(6):
            p = positions[b, 0, j].item()
            if p < 4:
                assert torch.allclose(got[b, :, j], full[b, :, p])
            else:  # past --location-max-len: no score, zero weight
                assert torch.isinf(got[b, :, j]).all()


def test_location_attention_truncates_to_sentence_and_past_max_gets_zero():
    att = GlobalAttention(LocationScore(H, max_len=4))
    mem = memory_from(torch.randn(2, 6, C), [6, 3], left_pad=True)
    _, w = att(torch.randn(2, T, H), mem, 0, True)
    assert torch.allclose(w.sum(-1), torch.ones(2, T), atol=1e-6)
    assert (w[0, :, 4:] == 0).all()  # positions 4, 5 >= max_len
    assert (w[1, :, :3] == 0).all()  # left padding


# ----------------------------------------------------------- masking, eq. 7


@pytest.mark.parametrize("name", ["dot", "general", "concat", "location"])
def test_global_padding_gets_zero_weight_either_side(name):
    score = build_score(name, H, H, location_max_len=S)
    att = GlobalAttention(score)
    values = torch.randn(B, S, H)
    lengths = [7, 4, 1]
    q = torch.randn(B, T, H)
    results = []
    for left in (True, False):
        mem = memory_from(values, lengths, left)
        mem = with_keys(att, mem)
        ctx, w = att(q, mem, 0, True)
        assert (w.masked_select(mem.padding_mask.unsqueeze(1).expand_as(w)) == 0).all()
        assert torch.allclose(w.sum(-1), torch.ones(B, T), atol=1e-6)
        results.append((ctx, w, mem))
    # the real positions' weights do not depend on the padding side
    (ctx_l, w_l, mem_l), (ctx_r, w_r, mem_r) = results
    for b, n in enumerate(lengths):
        assert torch.allclose(w_l[b, :, S - n:], w_r[b, :, :n], atol=1e-6)
        assert torch.allclose(ctx_l[b], ctx_r[b], atol=1e-6)


def test_masked_softmax_in_float16_is_computed_in_float32():
    """masked_softmax upcasts to float32, as fairseq's AttentionLayer. Under fp16 training
    with loss scaling the gradients reaching the scores are of order 1e4, and here
    g_0 - sum_s g_s p_s = 60000 + 59960 is past float16's range (65504): torch's float16
    softmax backward returns (40.25, -49.41) where the true gradient is (40.22, -40.22).
    Through float32 the output and the gradient are the float32 values rounded once to
    float16. (On the CPU the float16 forward kernel accumulates in float32 itself, so
    no forward value overflows; the backward is where the upcast shows.)"""
    scores = torch.tensor([[0.0, 8.0, 3.0]], dtype=torch.float16, requires_grad=True)
    mask = torch.tensor([[False, False, True]])
    upstream = torch.tensor([[60000.0, -60000.0, 0.0]], dtype=torch.float16)
    probs = masked_softmax(scores, mask)
    (grad,) = torch.autograd.grad(probs, scores, upstream)
    wide = scores.detach().float().requires_grad_(True)
    want = wide.masked_fill(mask, float("-inf")).softmax(-1)
    (want_grad,) = torch.autograd.grad(want, wide, upstream.float())
    assert probs.dtype == grad.dtype == torch.float16
    assert torch.equal(probs, want.half()) and probs[0, 2] == 0
    assert torch.equal(grad, want_grad.half()), (grad, want_grad)
    assert torch.isfinite(grad).all()


def test_attentional_hidden_equation():
    m = AttentionalHidden(C, H)
    c, h = torch.randn(B, T, C), torch.randn(B, T, H)
    want = torch.tanh(torch.cat([c, h], -1) @ m.W_c.weight.t())
    assert torch.allclose(m(c, h), want, atol=1e-6)


# ------------------------------------------------ local attention by hand

SCORES = [0.5, -1.0, 2.0, 0.25, 1.5]  # dot scores of the 5 memory slots (4 words + EOS)
LONG_SCORES = [0.5, -1.0, 2.0, 0.25, 1.5, -0.5, 1.0, 0.75, -2.0]  # 8 words + EOS


def hand_memory(left_pad, extra=0, scores=SCORES):
    """One sentence whose dot score with q = e_0 is scores[s]; ``extra`` padding."""
    n = len(scores)
    values = torch.zeros(1, n + extra, 2, dtype=torch.double)
    for s, sc in enumerate(scores):
        values[0, s] = torch.tensor([sc, 1.0])
    return memory_from(values, [n], left_pad)


def softmax_over(slots, scores=SCORES):
    z = sum(math.exp(scores[s]) for s in slots)
    return {s: math.exp(scores[s]) / z for s in slots}


def local(mode, window=1):
    if mode == "m":
        return LocalMAttention(DotScore(2, 2), window).double()
    return LocalPAttention(DotScore(2, 2), window, 2).double()


@pytest.mark.parametrize("left_pad,extra", [(True, 0), (True, 3), (False, 3)])
def test_local_m_window_by_hand(left_pad, extra):
    att = local("m")
    mem = hand_memory(left_pad, extra)
    q = torch.tensor([[[1.0, 0.0]] * 7], dtype=torch.double)  # steps t = 0..6
    _, w = att(q, mem, 0, True)
    off = extra if left_pad else 0
    for t in range(7):
        p = min(t, 4)  # p_t = t clipped to the sentence
        slots = [s for s in (p - 1, p, p + 1) if 0 <= s <= 4]  # window clipped at both edges
        want = softmax_over(slots)
        row = w[0, t]
        for s in range(5):
            assert row[off + s].item() == pytest.approx(want.get(s, 0.0), abs=1e-12)
        assert (row[:off] == 0).all() and (row[off + 5:] == 0).all()


def test_local_m_step_offset_matches_incremental_index():
    att = local("m")
    mem = hand_memory(True)
    q = torch.tensor([[[1.0, 0.0]] * 3], dtype=torch.double)
    _, w_all = att(q, mem, 0, True)
    _, w_last = att(q[:, 2:], mem, 2, True)
    assert torch.equal(w_all[:, 2:], w_last)


def _localp_with_position(p_target, S, window):
    """LocalPAttention whose eq. 9 gives p_t = p_target for q = e_0 (W_p = I)."""
    att = local("p", window)
    with torch.no_grad():
        att.W_p.weight.copy_(torch.eye(2, dtype=torch.double))
        a = math.log((p_target / S) / (1 - p_target / S)) / math.tanh(1.0)
        att.v_p.weight.copy_(torch.tensor([[a, 0.0]], dtype=torch.double))
    return att


@pytest.mark.parametrize("window", [1, 2, 3])
@pytest.mark.parametrize("p_target", [4.5, 0.2, 8.7, 6.3])
@pytest.mark.parametrize("left_pad,extra", [(True, 2), (False, 2)])
def test_local_p_weights_equal_eq10_by_hand(window, p_target, left_pad, extra):
    """Several D, so that sigma = D / 2 is told apart from 1 / (2D) (equal at D = 1)."""
    S = len(LONG_SCORES)
    att = _localp_with_position(p_target, S, window)
    mem = hand_memory(left_pad, extra, LONG_SCORES)
    q = torch.tensor([[[1.0, 0.0]]], dtype=torch.double)
    p_t, _ = predictive_alignment(q, att.W_p.weight, att.v_p.weight, mem.length.unsqueeze(1))
    assert p_t.item() == pytest.approx(p_target, abs=1e-9)
    _, w = att(q, mem, 0, True)
    centre = math.floor(p_target)
    slots = [s for s in range(centre - window, centre + window + 1) if 0 <= s < S]
    soft = softmax_over(slots, LONG_SCORES)
    sigma = window / 2
    want = {s: soft[s] * math.exp(-((s - p_target) ** 2) / (2 * sigma**2)) for s in slots}
    off = extra if left_pad else 0
    for s in range(S):
        assert w[0, 0, off + s].item() == pytest.approx(want.get(s, 0.0), abs=1e-9)
    assert w[0, 0].sum().item() == pytest.approx(sum(want.values()), abs=1e-9)
    assert w[0, 0].sum().item() < 1.0  # eq. 10 is not renormalised
    assert (w.masked_select(mem.padding_mask.unsqueeze(1)) == 0).all()


def test_local_p_uses_each_sentences_own_length():
    att = local("p")
    with torch.no_grad():
        att.W_p.weight.zero_()  # sigmoid(0) = 1/2: p_t = S / 2
    values = torch.randn(2, 9, 2, dtype=torch.double)
    mem = memory_from(values, [9, 4], left_pad=True)
    p, _ = predictive_alignment(torch.randn(2, 1, 2, dtype=torch.double), att.W_p.weight, att.v_p.weight,
                                mem.length.unsqueeze(1))
    assert p[:, 0].tolist() == [4.5, 2.0]


@pytest.mark.parametrize("name", ["dot", "general", "concat"])
@pytest.mark.parametrize("mode", ["m", "p"])
def test_local_scores_only_the_window(name, mode):
    """O(D): the score sees 2D+1 slots per step, never the whole source."""
    score = build_score(name, H, H, 10)
    seen = []
    original = score.forward

    def spy(q, keys, positions):
        seen.append(keys.shape)
        return original(q, keys, positions)

    score.forward = spy
    att = build_attention("local_" + mode, score, 2, H)
    mem = memory_from(torch.randn(B, 40, H), [40, 30, 3], True)
    mem = with_keys(att, mem)
    _, w = att(torch.randn(B, 1, H), mem, 0, True)
    assert seen == [torch.Size([B, 1, 5, seen[0][-1]])]
    assert ((w > 0).sum(-1) <= 5).all()
    assert (w.masked_select(mem.padding_mask.unsqueeze(1)) == 0).all()


def test_local_p_gradcheck_through_p_t():
    torch.manual_seed(1)
    att = LocalPAttention(GeneralScore(3, 3), 2, 3).double()
    mem = memory_from(torch.randn(2, 8, 3, dtype=torch.double), [8, 5], True)
    mem = mem._replace(keys=att.score.precompute(mem.values).detach())
    q = torch.randn(2, 2, 3, dtype=torch.double)
    W_p = att.W_p.weight.detach().clone().requires_grad_(True)
    v_p = att.v_p.weight.detach().clone().requires_grad_(True)
    assert torch.autograd.gradcheck(lambda a, b: _functional(att, a, b, q, mem), (W_p, v_p))


def _functional(att, W_p, v_p, q, mem):
    """att.forward with W_p, v_p as explicit inputs (for gradcheck)."""
    saved = att.W_p.weight, att.v_p.weight
    del att.W_p.weight, att.v_p.weight
    att.W_p.weight, att.v_p.weight = W_p, v_p
    try:
        ctx, w = att(q, mem, 0, True)
    finally:
        del att.W_p.weight, att.v_p.weight
        att.W_p.weight, att.v_p.weight = saved
    return ctx, w


def test_local_p_gradient_reaches_W_p_and_v_p():
    att = LocalPAttention(DotScore(H, H), 3, H)
    mem = memory_from(torch.randn(B, S, H), [7, 4, 2], True)
    ctx, _ = att(torch.randn(B, T, H), mem, 0, False)
    ctx.sum().backward()
    assert att.W_p.weight.grad.abs().sum() > 0 and att.v_p.weight.grad.abs().sum() > 0


@pytest.mark.parametrize("attention_type", ["local_m", "local_p"])
def test_location_score_is_global_only(attention_type):
    with pytest.raises(ValueError, match="global-only"):
        build_attention(attention_type, LocationScore(H, 10), 10, H)


@pytest.mark.parametrize("left_pad,extra", [(True, 3), (False, 3)])
def test_window_zero_attends_to_p_t_alone_in_local_m_and_is_refused_in_local_p(left_pad, extra):
    """D = 0: local-m's window is position t alone (weight 1). local-p is refused: eq. 10's
    sigma = D / 2 would be 0 (it ran with sigma = 0.5 instead, silently)."""
    _, w = local("m", 0)(torch.tensor([[[1.0, 0.0]] * 7], dtype=torch.double), hand_memory(left_pad, extra), 0, True)
    off = extra if left_pad else 0
    for t in range(7):
        want = torch.zeros(5 + extra, dtype=torch.double)
        want[off + min(t, 4)] = 1.0
        assert torch.equal(w[0, t], want)
    with pytest.raises(ConfigError, match=r"^--local-window 0 with local-p: eq. 10's Gaussian has sigma = D/2 = 0"):
        local("p", 0)
    local("p", 1)  # D = 1: sigma = 0.5


@pytest.mark.parametrize("name", ["dot", "general", "concat"])
@pytest.mark.parametrize("mode", ["local_m", "local_p"])
@pytest.mark.parametrize("left_pad", [True, False])
def test_local_dense_path_equals_window_gather(name, mode, left_pad, monkeypatch):
    """Short sources are scored whole with all but the window masked; long ones gather the
    window. Both give the same context, alignment and gradients."""
    from fairseq_luong.modules import cpu_sizes

    torch.manual_seed(3)
    value_dim = H if name == "dot" else C
    score = build_score(name, H, value_dim, 10)
    att = build_attention(mode, score, 2, H).double()
    mem = memory_from(torch.randn(B, 9, value_dim, dtype=torch.double), [9, 6, 2], left_pad)
    mem = with_keys(att, mem)
    mem = mem._replace(keys=None if mem.keys is None else mem.keys.detach())
    q = torch.randn(B, T, H, dtype=torch.double, requires_grad=True)
    results = []
    for dense_up_to in (0, 100):  # never / always dense
        monkeypatch.setattr(cpu_sizes, "LOCAL_DENSE_UP_TO", dense_up_to)
        att.zero_grad()
        q.grad = None
        ctx, w = att(q, mem, 1, True)
        (ctx.sum() + (w * torch.arange(9.0, dtype=torch.double)).sum()).backward()
        grads = [q.grad.clone()] + [p.grad.clone() for p in att.parameters() if p.grad is not None]
        results.append((ctx.detach(), w.detach(), grads))
    (c0, w0, g0), (c1, w1, g1) = results
    assert torch.allclose(c0, c1, atol=1e-12) and torch.allclose(w0, w1, atol=1e-12)
    assert (w1.masked_select(mem.padding_mask.unsqueeze(1)) == 0).all()
    assert ((w1 > 0).sum(-1) <= 5).all()
    assert len(g0) == len(g1) == 1 + {"dot": 0, "general": 0, "concat": 2}[name] + 2 * (mode == "local_p")
    for a, b in zip(g0, g1):
        assert torch.allclose(a, b, atol=1e-12)
