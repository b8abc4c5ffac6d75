"""fused_label_smoothed_cross_entropy == fairseq's label_smoothed_cross_entropy (values and
every gradient), for shared and separate output layers, several chunk sizes, with padding."""
import pytest
import torch
from fairseq.criterions.label_smoothed_cross_entropy import LabelSmoothedCrossEntropyCriterion

from fairseq_luong.criterions.fused_label_smoothed_cross_entropy import (
    FusedLabelSmoothedCrossEntropyCriterion,
    fused_output_loss,
)
from tests.helpers import build_model, random_batch


class DoublePrecisionReference(LabelSmoothedCrossEntropyCriterion):
    """fairseq's criterion with the log-softmax kept in the model's dtype (fairseq casts
    to float32), so that double-precision models compare at 1e-10."""

    def get_lprobs_and_target(self, model, net_output, sample):
        lprobs = torch.log_softmax(net_output[0], dim=-1)
        return lprobs.view(-1, lprobs.size(-1)), model.get_targets(sample, net_output).view(-1)


def sample_of(task, seed=0):
    batch = random_batch(task, bsz=3, srclens=(7, 5, 3), tgtlens=(6, 2, 5), seed=seed)
    target = batch.pop("target")
    return {"net_input": batch, "target": target,
            "ntokens": int(target.ne(task.target_dictionary.pad()).sum())}


def loss_and_grads(criterion, model, sample):
    model.zero_grad(set_to_none=True)
    loss, sample_size, log = criterion(model, sample)
    loss.backward()
    grads = {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}
    return loss.detach(), sample_size, log, grads


@pytest.mark.parametrize("eps", [0.0, 0.1])
@pytest.mark.parametrize("chunk", [1, 4, 512])
@pytest.mark.parametrize("share", [False, True])
def test_fused_equals_fairseq(eps, chunk, share):
    extra = ["--dropout", "0", "--init-uniform", "0.3"]
    if share:
        extra.append("--share-decoder-input-output-embed")
    model, task, _ = build_model("luong_tiny", *extra)
    model.double().train()
    sample = sample_of(task)
    pad = sample["target"].eq(task.target_dictionary.pad())
    assert pad.any(), "the test batch must contain padding"
    reference = DoublePrecisionReference(task, False, eps, report_accuracy=True)
    fused = FusedLabelSmoothedCrossEntropyCriterion(task, False, eps, report_accuracy=True,
                                                    loss_chunk_tokens=chunk)
    ref_loss, ref_size, ref_log, ref_grads = loss_and_grads(reference, model, sample)
    loss, size, log, grads = loss_and_grads(fused, model, sample)
    assert size == ref_size
    torch.testing.assert_close(loss, ref_loss, rtol=1e-10, atol=1e-10)
    torch.testing.assert_close(log["nll_loss"], ref_log["nll_loss"], rtol=1e-10, atol=1e-10)
    assert (log["n_correct"], log["total"]) == (ref_log["n_correct"], ref_log["total"])
    assert grads.keys() == ref_grads.keys()
    for name in ref_grads:
        torch.testing.assert_close(grads[name], ref_grads[name], rtol=1e-8, atol=1e-10, msg=name)


def test_float32_matches_to_1e5():
    model, task, _ = build_model("luong_tiny", "--dropout", "0")
    sample = sample_of(task, seed=3)
    ref = loss_and_grads(LabelSmoothedCrossEntropyCriterion(task, False, 0.1), model, sample)
    got = loss_and_grads(FusedLabelSmoothedCrossEntropyCriterion(task, False, 0.1, loss_chunk_tokens=3),
                         model, sample)
    torch.testing.assert_close(got[0], ref[0], rtol=1e-5, atol=1e-5)
    for name in ref[3]:
        torch.testing.assert_close(got[3][name], ref[3][name], rtol=1e-5, atol=1e-5, msg=name)


def test_validation_without_autograd():
    """In fairseq's valid step (no_grad) no gradients are computed, the loss is the same."""
    model, task, _ = build_model("luong_tiny", "--dropout", "0")
    model.eval()
    sample = sample_of(task, seed=1)
    with torch.no_grad():
        ref, _, _ = LabelSmoothedCrossEntropyCriterion(task, False, 0.1)(model, sample)
        got, _, _ = FusedLabelSmoothedCrossEntropyCriterion(task, False, 0.1)(model, sample)
    assert not got.requires_grad
    torch.testing.assert_close(got, ref, rtol=1e-5, atol=1e-5)


def test_gradcheck_of_the_fused_function():
    g = torch.Generator().manual_seed(0)
    features = torch.randn(7, 5, dtype=torch.double, generator=g, requires_grad=True)
    weight = torch.randn(11, 5, dtype=torch.double, generator=g, requires_grad=True)
    bias = torch.randn(11, dtype=torch.double, generator=g, requires_grad=True)
    target = torch.randint(0, 11, (7,), generator=g)
    torch.autograd.gradcheck(
        lambda f, w, b: fused_output_loss(f, w, b, target, 0.1, 3)[0], (features, weight, bias)
    )


def test_bf16_autocast_is_close_to_float32():
    model, task, _ = build_model("luong_tiny", "--dropout", "0")
    sample = sample_of(task, seed=2)
    criterion = FusedLabelSmoothedCrossEntropyCriterion(task, False, 0.1, loss_chunk_tokens=4)
    ref = loss_and_grads(criterion, model, sample)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        got = loss_and_grads(criterion, model, sample)
    assert got[0].dtype == torch.float32
    torch.testing.assert_close(got[0], ref[0], rtol=2e-2, atol=0)
    for name in ref[3]:
        assert got[3][name].dtype == torch.float32, name
        assert torch.isfinite(got[3][name]).all(), name


def test_bad_chunk_size_is_a_clear_error():
    _, task, _ = build_model("luong_tiny")
    with pytest.raises(ValueError, match="--loss-chunk-tokens"):
        FusedLabelSmoothedCrossEntropyCriterion(task, False, 0.1, loss_chunk_tokens=0)
