"""The optimised decoders equal their family's reference (``tests/reference_decoders.py``).

The reference is the specification: the paper's equations one step and one sentence at
a time. The models hoist products out of the loop, fuse gate weights, cache keys, gather
local windows in a batch and (without input feeding) run whole sequences. Outputs and
every gradient must agree (float64, 1e-9 of the largest value), in eval mode on ragged batches and in training mode
with dropout masks fixed by one seed.
"""
import pytest
import torch
import torch.nn.functional as F

from tests.helpers import build_model, random_batch
from tests.reference_decoders import luong_reference, rnnsearch_reference

SIZES = ["--encoder-embed-dim", "6", "--encoder-hidden-size", "5", "--decoder-embed-dim", "6",
         "--decoder-hidden-size", "5"]
RNNSEARCH_SIZES = ["--encoder-embed-dim", "6", "--encoder-hidden-size", "5", "--decoder-embed-dim",
                   "7", "--decoder-hidden-size", "4", "--attention-dim", "3", "--maxout-dim", "5"]
LUONG_SIZES = SIZES + ["--encoder-layers", "3", "--decoder-layers", "3", "--local-window", "2",
                       "--location-max-len", "7"]
VARIANTS = [
    ("luong_base", []),
    ("luong_base", ["--no-input-feed", "--no-attention"]),
    ("luong_global_dot", []),
    ("luong_global_general", []),
    ("luong_global_general", ["--no-input-feed"]),
    ("luong_global_general", ["--reverse-source"]),
    ("luong_global_concat", []),
    ("luong_global_location", []),
    ("luong_localm", []),
    ("luong_localm", ["--attention-score", "dot", "--no-input-feed"]),
    ("luong_localp", []),
    ("luong_localp", ["--attention-score", "concat", "--reverse-source"]),
    ("luong_localp", ["--no-input-feed", "--local-window", "1"]),
    ("luong_global_general", ["--encoder-bidirectional", "--encoder-hidden-size", "4"]),
    ("rnnsearch_tiny", RNNSEARCH_SIZES),  # the paper's initialisation
    ("rnnsearch_tiny", RNNSEARCH_SIZES + ["--init-uniform", "0.3"]),
    ("rnnsearch_tiny", RNNSEARCH_SIZES + ["--deep-output-state", "current", "--maxout-pieces", "3",
                                          "--init-uniform", "0.3"]),
]
IDS = [arch + "".join(extra).replace("--", "+") for arch, extra in VARIANTS]
REFERENCES = {"LuongLSTMModel": luong_reference, "RNNsearchModel": rnnsearch_reference}


def build(arch, *extra):
    """The model in float64, so that the comparison is not blurred by float32 rounding."""
    sizes = [] if arch.startswith("rnnsearch") else LUONG_SIZES
    model, task, args = build_model(arch, *sizes, *extra)
    return model.double(), task, args


def reference(model, batch):
    ref = REFERENCES[type(model).__name__]
    return ref(model, batch["src_tokens"], batch["src_lengths"], batch["prev_output_tokens"])


def outputs_and_grads(model, batch, run, seed):
    """Logits and every parameter's gradient of the summed CE over real target tokens."""
    model.zero_grad(set_to_none=True)
    torch.manual_seed(seed)  # the dropout masks
    logits = run(model, batch)
    target = batch["target"]
    F.cross_entropy(logits.transpose(1, 2), target, ignore_index=1, reduction="sum").backward()
    grads = {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}
    return logits.detach(), grads


def fast(model, batch):
    return model(batch["src_tokens"], batch["src_lengths"], batch["prev_output_tokens"])[0]


def max_error(got, want):
    """Largest difference relative to the largest value (RNNsearch's initialisation
    gives logits of order 1e-4, Luong's of order 1), in float64."""
    return ((got - want).abs().max() / want.abs().max().clamp(min=1e-30)).item()


def assert_same(model, batch, seed=0):
    real = batch["target"].ne(1).unsqueeze(-1)  # compare real target positions
    with torch.enable_grad():
        got, g_got = outputs_and_grads(model, batch, fast, seed)
        want, g_want = outputs_and_grads(model, batch, reference, seed)
    assert max_error(got.masked_select(real), want.masked_select(real)) < 1e-9
    assert g_got.keys() == g_want.keys()
    for name in g_got:
        assert max_error(g_got[name], g_want[name]) < 1e-9, name


@pytest.mark.parametrize("arch,extra", VARIANTS, ids=IDS)
def test_eval_mode_equals_reference_on_a_ragged_batch(arch, extra):
    torch.manual_seed(0)
    model, task, _ = build(arch, *extra)
    model.eval()
    assert_same(model, random_batch(task, srclens=(9, 5, 2), tgtlens=(7, 4, 6)))


@pytest.mark.parametrize("arch,extra", VARIANTS, ids=IDS)
def test_training_mode_with_seeded_dropout_equals_reference(arch, extra):
    torch.manual_seed(0)
    model, task, _ = build(arch, *extra, "--dropout", "0.3")
    model.train()
    batch = random_batch(task, srclens=(9, 5, 2), tgtlens=(7, 7, 7))
    assert_same(model, batch, seed=11)
    # the masks matter: another seed gives other outputs
    with torch.no_grad():
        torch.manual_seed(11)
        a = fast(model, batch)
        torch.manual_seed(12)
        b = fast(model, batch)
    assert max_error(a, b) > 1e-4  # far above the 1e-9 agreement


def test_inference_follows_parameter_updates():
    """Inference reads the parameters themselves (no stale copy of fused weights)."""
    torch.manual_seed(0)
    model, task, _ = build("luong_localp")
    model.eval()
    batch = random_batch(task)
    with torch.no_grad():
        before = fast(model, batch)
        model.decoder.layers[1].weight_hh_l0.add_(0.5)  # as an optimizer step would
        after = fast(model, batch)
    with torch.enable_grad():
        fresh = fast(model, batch)
    assert (after - before).abs().max() > 1e-5  # logits are of order 0.1 at U[-0.1, 0.1]
    assert torch.allclose(after, fresh.detach(), atol=1e-10)
