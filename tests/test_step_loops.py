"""The step loops' backward through time (``steps/loop.py``) and their pieces (``step_ops.py``).

The decoders with a step loop (Luong et al.'s input feeding, RNNsearch) run it without autograd
and give its gradients themselves. ``test_reference.py`` checks them against the reference
decoders (autograd through the paper's equations); here ``torch.autograd.gradcheck`` checks
them against finite differences in float64, for every score, both ways local attention reads
its window, both ways rows are scheduled (padded steps skipped or not) and with dropout on,
and every piece of a step against the autograd operations it replaces.
"""
import gc
import weakref

import pytest
import torch
from torch.func import functional_call

from fairseq_luong.modules import cpu_sizes
from fairseq_luong.modules.dropout import Dropout
from fairseq_luong.modules.steps import loop as step_loop
from fairseq_luong.modules.steps import ops as step_ops
from tests.helpers import build_model, collate

LUONG = ["--encoder-embed-dim", "3", "--encoder-hidden-size", "3", "--decoder-embed-dim", "2",
         "--decoder-hidden-size", "3", "--encoder-layers", "2", "--decoder-layers", "2",
         "--location-max-len", "6", "--local-window", "1", "--init-uniform", "0.5"]  # weights large enough that
# every gradient term shows (at the default 0.1, local-p's p_t term is within gradcheck's tolerance)
RNNSEARCH = ["--encoder-embed-dim", "3", "--encoder-hidden-size", "2", "--decoder-embed-dim", "2",
             "--decoder-hidden-size", "3", "--attention-dim", "2", "--maxout-dim", "2", "--init-uniform", "0.5"]
FAMILIES = [
    ("luong_global_general", []),
    ("luong_global_dot", []),
    ("luong_global_concat", []),
    ("luong_global_location", []),
    ("luong_localm", []),
    ("luong_localp", []),
    ("luong_localp", ["--attention-score", "concat"]),
    ("luong_lstm", ["--no-attention"]),  # input feeding of h_t itself
    ("rnnsearch_tiny", []),
    ("rnnsearch_tiny", ["--deep-output-state", "current", "--maxout-pieces", "3"]),
]
IDS = [arch + "".join(extra).replace("--", "+") for arch, extra in FAMILIES]


def sentences(d, lengths, g):
    return [torch.cat([torch.randint(d.nspecial, len(d), (n - 1,), generator=g), torch.tensor([d.eos()])])
            for n in lengths]


def decoder_function(arch, extra, srclens, tgtlens, dropout):
    """The decoder's features as a function of its parameters and the encoder's outputs (float64,
    the dropout masks drawn again from one seed at every call), the parameters, and the
    encoder's outputs."""
    torch.manual_seed(0)
    sizes = RNNSEARCH if arch.startswith("rnnsearch") else LUONG
    model, task, _ = build_model(arch, *sizes, *extra, "--dropout", str(dropout))
    model = model.double().train()
    g = torch.Generator().manual_seed(1)
    src_d, tgt_d = task.source_dictionary, task.target_dictionary
    batch = collate(sentences(src_d, srclens, g), sentences(tgt_d, tgtlens, g), src_d, tgt_d)
    encoder_out = model.encoder(batch["src_tokens"], batch["src_lengths"])
    floats = {k: v.detach().requires_grad_() for k, v in encoder_out.items() if v.is_floating_point()}
    names = [n for n, p in model.decoder.named_parameters()]
    params = [p.detach().requires_grad_() for p in model.decoder.parameters()]

    real = batch["target"].ne(tgt_d.pad()).unsqueeze(-1)  # bsz x tgtlen x 1

    def features(*tensors):
        torch.manual_seed(7)  # the same dropout masks at every evaluation
        weights = dict(zip(names, tensors[:len(names)]))
        enc = dict(encoder_out, **dict(zip(floats, tensors[len(names):])))
        out, _ = functional_call(model.decoder, weights, (batch["prev_output_tokens"],),
                                 {"encoder_out": enc, "features_only": True})
        return out * real  # padded steps' features are nobody's (the padding embedding gets no gradient)

    return model, features, params, list(floats.values())


def gradcheck(features, params, memory):
    """Every input at once by random projections (gradcheck's fast mode), then the encoder's
    outputs element by element (a small term among many can hide in a projection)."""
    assert torch.autograd.gradcheck(features, params + memory, eps=1e-6, atol=1e-6, rtol=1e-4, fast_mode=True)
    assert torch.autograd.gradcheck(lambda *m: features(*params, *m), memory, eps=1e-6, atol=1e-6, rtol=1e-4)


@pytest.mark.parametrize("arch,extra", FAMILIES, ids=IDS)
@pytest.mark.parametrize("rows", ["ragged", "even"])
def test_the_loops_backward_passes_gradcheck(arch, extra, rows):
    """float64, dropout on; "ragged": targets of three lengths, padded steps skipped; "even": every
    row every step, the final states returned. Sources of 7 tokens against windows of 3 slots:
    local attention gathers its windows (the dense path: test_reference.py, 1 <= 2 windows)."""
    tgtlens = (4, 2, 3) if rows == "ragged" else (3, 3, 3)
    gradcheck(*decoder_function(arch, extra, (7, 4, 6), tgtlens, dropout=0.3)[1:])


@pytest.mark.parametrize("arch", ["luong_localm", "luong_localp"])
def test_local_attention_reads_short_sources_whole_and_passes_gradcheck(arch):
    """Sources of at most two windows are scored whole, all but the window masked."""
    gradcheck(*decoder_function(arch, ["--local-window", "2"], (4, 3, 5), (4, 2, 3), dropout=0.3)[1:])


def graph_nodes(out):
    nodes, stack = set(), [out.grad_fn]
    while stack:
        node = stack.pop()
        if node is not None and node not in nodes:
            nodes.add(node)
            stack += [n for n, _ in node.next_functions]
    return nodes


@pytest.mark.parametrize("arch", ["luong_global_general", "luong_localp", "rnnsearch_tiny"])
def test_the_loop_is_one_node_of_the_graph_whatever_the_length(arch):
    """Training records the loop as one node of autograd's graph: no record per step (the graph
    of targets of 8 steps has the nodes of one of 3); inference runs the same steps without it."""
    sizes = []
    for tgtlen in (3, 8):
        model, features, params, memory = decoder_function(arch, [], (7, 4, 6), (tgtlen, 2, 3), dropout=0.3)
        inputs = params + memory
        nodes = graph_nodes(features(*inputs))
        assert sum(type(n).__name__ == "StepLoopBackward" for n in nodes) == 1
        sizes.append(len(nodes))
        with torch.no_grad():
            assert features(*inputs).grad_fn is None
    assert sizes[0] == sizes[1]


# ------------------------------------------------------------------------------------- pieces


def lstm_cell_update(gates, c):
    """The LSTM cell with autograd (i, f, g, o)."""
    i, f, g, o = gates.chunk(4, 1)
    c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
    return torch.sigmoid(o) * torch.tanh(c), c


def test_the_eager_cell_and_its_backward_are_the_cells():
    torch.manual_seed(0)
    pre, c = torch.randn(5, 12, dtype=torch.float64, requires_grad=True), torch.randn(5, 3, dtype=torch.float64,
                                                                                       requires_grad=True)
    h_want, c_want = lstm_cell_update(pre, c)
    dh, dc = torch.randn(5, 3, dtype=torch.float64), torch.randn(5, 3, dtype=torch.float64)
    grads = torch.autograd.grad((h_want * dh + c_want * dc).sum(), (pre, c), retain_graph=True)
    h, c_t, saved = step_ops.eager_lstm_cell(pre.detach(), c.detach())
    assert torch.allclose(h, h_want) and torch.allclose(c_t, c_want)
    d_pre, dc_prev = step_ops.lstm_cell_backward(dh, dc, saved)
    assert torch.allclose(d_pre, grads[0]) and torch.allclose(dc_prev, grads[1])
    d_pre, _ = step_ops.lstm_cell_backward(dh, None, saved)  # c_t read by nothing else
    assert torch.allclose(d_pre, torch.autograd.grad((h_want * dh).sum(), pre)[0])


@pytest.mark.parametrize("p", [0.0, 0.3])
def test_the_step_loops_dropout_draws_the_dropout_modules_masks(p):
    """The loop's dropout (``dropout_forward``) and its backward give the numbers of the model's
    dropout modules (``dropout.Dropout``, which the reference decoders call) from one seed."""
    module = Dropout(p).train()
    x = torch.randn(7, 5)
    torch.manual_seed(3)
    want = module(x)
    torch.manual_seed(3)
    got, mask = step_ops.dropout_forward(x, p)
    assert torch.equal(got, want)
    grad = torch.randn(7, 5)
    x.requires_grad_()
    torch.manual_seed(3)
    d_want, = torch.autograd.grad(module(x), x, grad)
    assert torch.equal(step_ops.dropout_backward(grad, mask, p), d_want)


@pytest.mark.parametrize("slots", [5, 20])  # under and over the CPU's short rows (16)
@pytest.mark.parametrize("dtype", [torch.float64, torch.bfloat16])
def test_softmax_pieces_in_both_layouts(slots, dtype):
    """Probabilities in float32 or wider whatever the scores' dtype (as masked_softmax), and the
    scores' gradient in their dtype."""
    torch.manual_seed(0)
    scores = torch.randn(9, slots, dtype=torch.float64, requires_grad=True)
    masked = scores.masked_fill(torch.arange(slots) >= slots - 2, float("-inf"))
    want = torch.softmax(masked.to(dtype).double(), -1)
    grad = torch.randn(9, slots, dtype=torch.float64)
    d_want, = torch.autograd.grad((want * grad.to(dtype).double()).sum(), scores)
    plan = step_ops.MemoryPlan(slots, 3, dtype, torch.device("cpu"))
    probs = plan.softmax(masked.detach().to(dtype))
    assert plan.short_rows == (slots < cpu_sizes.SOFTMAX_SHORT_ROW)
    assert probs.dtype == torch.promote_types(dtype, torch.float32)
    align = plan.probabilities(probs)
    assert align.dtype == dtype and align.shape == (9, slots)
    tol = 1e-12 if dtype == torch.float64 else 1e-2
    assert torch.allclose(align.double(), want, atol=tol)
    d = plan.softmax_backward(grad.to(dtype), probs)
    assert d.dtype == dtype and torch.allclose(d.double(), d_want, atol=tol)


@pytest.mark.parametrize("slots,width", [(5, 3), (20, 30)])  # ATen's scalar loop, and BLAS
def test_row_products(slots, width):
    torch.manual_seed(0)
    weights, rows, vectors = torch.randn(4, slots), torch.randn(4, slots, width), torch.randn(4, width)
    plan = step_ops.MemoryPlan(slots, width, torch.float32, torch.device("cpu"))
    assert plan.small == (slots * width < cpu_sizes.BMM_SCALAR_BELOW)
    assert torch.allclose(plan.weighted(weights, rows), torch.einsum("bs,bsc->bc", weights, rows), atol=1e-6)
    assert torch.allclose(step_ops.dot_rows(vectors, rows.transpose(1, 2)),
                          torch.einsum("bc,bsc->bs", vectors, rows), atol=1e-6)


def test_weighted_sums_over_a_transposed_softmax_give_bmm_contiguous_weights(monkeypatch):
    """Short rows (under 16 slots) are normalised transposed; with a wide memory the weighted sum
    is a batched product, and ATen's CPU bmm runs a scalar loop over a first operand strided
    across the batch (about 9x slower at 320 rows, 12 slots of 256): the weights it gets, in the
    forward and as the scores' gradient in the backward, are contiguous."""
    plan = step_ops.MemoryPlan(12, 256, torch.float32, torch.device("cpu"))
    assert plan.short_rows and not plan.small
    seen = []
    bmm = torch.bmm
    monkeypatch.setattr(torch, "bmm", lambda a, b: seen.append(a.is_contiguous()) or bmm(a, b))
    torch.manual_seed(0)
    rows = torch.randn(6, 12, 256)
    probs = plan.softmax(torch.randn(6, 12))
    align = plan.probabilities(probs)
    assert not align.is_contiguous()  # the transposed layout this test is about
    d_scores = plan.softmax_backward(torch.randn(6, 12), probs)
    for weights in (align, d_scores):
        got = plan.weighted(weights, rows)
        assert torch.allclose(got, torch.einsum("bs,bsc->bc", weights, rows), atol=1e-5)
    assert seen == [True, True]


@pytest.mark.parametrize("arch,extra", [("luong_global_general", []), ("luong_lstm", ["--no-attention"]),
                                        ("rnnsearch_tiny", [])])
@pytest.mark.parametrize("dropout", [0.0, 0.3])
def test_a_training_step_keeps_nothing_after_its_backward(arch, extra, dropout):
    """The loop's engine (and all it saved) is freed with the graph, by reference counting alone:
    with the cyclic garbage collector off, nothing of a step survives its backward and ``del``.
    At dropout 0 the engine used to keep the very tensor it returned (h~_t is the feed itself),
    whose grad_fn held the engine: a cycle that only the collector could free."""
    # targets of one length: every row every step, the loop returns its final states and feed
    model, features, params, memory = decoder_function(arch, extra, (7, 4, 6), (3, 3, 3), dropout)
    engines = []
    was_enabled = gc.isenabled()
    gc.collect()
    gc.disable()
    try:
        real_forward = step_loop.StepLoop.forward

        def recording(ctx, engine, *inputs):
            engines.append(weakref.ref(engine))
            return real_forward(ctx, engine, *inputs)

        step_loop.StepLoop.forward = staticmethod(recording)
        try:
            out = features(*params, *memory)
        finally:
            step_loop.StepLoop.forward = staticmethod(real_forward)
        out.sum().backward()
        del out
        assert len(engines) == 1 and engines[0]() is None, "the step loop's engine outlived its graph"
    finally:
        if was_enabled:
            gc.enable()
