"""The optimised decoder equals a slow, straightforward reference (outputs and gradients).

The reference runs the paper's equations one step at a time with ``nn.LSTM`` called on
single steps, plain ``torch.cat`` inputs, and attention written out with einsum; the
model hoists products out of the loop, fuses gate weights, caches keys and (without
input feeding) runs whole sequences. Both must agree to 1e-5.
"""
import pytest
import torch
import torch.nn.functional as F

from tests.helpers import build_model, random_batch

SIZES = ["--encoder-embed-dim", "6", "--encoder-hidden-size", "5", "--decoder-embed-dim", "6",
         "--decoder-hidden-size", "5", "--encoder-layers", "3", "--decoder-layers", "3"]


def reference_decoder(model, batch):
    """Luong et al. eq. 5-8 (global, general score), one step at a time, no tricks."""
    dec = model.decoder
    enc = model.encoder(batch["src_tokens"], batch["src_lengths"])
    h = list(enc["final_hiddens"].unbind(0))
    c = list(enc["final_cells"].unbind(0))
    values, mask = enc["encoder_out"], enc["encoder_padding_mask"]
    W_a = dec.attention.score.W_a.weight
    emb = dec.embed_tokens(batch["prev_output_tokens"])  # bsz x tgtlen x E
    feed = emb.new_zeros(emb.size(0), dec.hidden_size) if dec.input_feed else None
    outs = []
    for t in range(emb.size(1)):
        inp = emb[:, t] if feed is None else torch.cat([emb[:, t], feed], 1)
        for i, layer in enumerate(dec.layers):
            out, (hh, cc) = layer(inp.unsqueeze(0), (h[i].unsqueeze(0), c[i].unsqueeze(0)))
            h[i], c[i] = hh[0], cc[0]
            inp = h[i]
        top = h[-1]
        scores = torch.einsum("bh,hc,bsc->bs", top, W_a, values)  # h_t^T W_a h̄_s
        a = torch.softmax(scores.masked_fill(mask, float("-inf")), dim=-1)
        ctx = torch.einsum("bs,bsc->bc", a, values)
        htilde = torch.tanh(dec.attentional_hidden.W_c(torch.cat([ctx, top], 1)))
        feed = htilde if feed is not None else None
        outs.append(htilde)
    return dec.output_layer(torch.stack(outs, 1))


@pytest.mark.parametrize("extra", [[], ["--no-input-feed"], ["--reverse-source"]])
def test_optimised_path_equals_reference_outputs_and_gradients(extra):
    torch.manual_seed(0)
    model, task, _ = build_model("luong_global_general", *SIZES, *extra)
    model.eval()  # no dropout: both paths are deterministic
    batch = random_batch(task, srclens=(9, 5, 2), tgtlens=(7, 7, 7))
    target = batch["target"]

    def grads(logits):
        model.zero_grad()
        F.cross_entropy(logits.transpose(1, 2), target).backward()
        return {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}

    with torch.enable_grad():
        fast = model(batch["src_tokens"], batch["src_lengths"], batch["prev_output_tokens"])[0]
        g_fast = grads(fast)
        slow = reference_decoder(model, batch)
        g_slow = grads(slow)
    assert (fast - slow).abs().max() < 1e-5
    assert g_fast.keys() == g_slow.keys()
    for name in g_fast:
        assert (g_fast[name] - g_slow[name]).abs().max() < 1e-5, name


def test_inference_follows_parameter_updates():
    """Inference reads the parameters themselves (no stale copy of fused weights)."""
    torch.manual_seed(0)
    model, task, _ = build_model("luong_localp", *SIZES)
    model.eval()
    batch = random_batch(task)
    with torch.no_grad():
        before = model(batch["src_tokens"], batch["src_lengths"], batch["prev_output_tokens"])[0]
        model.decoder.layers[1].weight_hh_l0.add_(0.5)  # as an optimizer step would
        after = model(batch["src_tokens"], batch["src_lengths"], batch["prev_output_tokens"])[0]
    with torch.enable_grad():
        fresh = model(batch["src_tokens"], batch["src_lengths"], batch["prev_output_tokens"])[0]
    assert (after - before).abs().max() > 1e-3
    assert torch.allclose(after, fresh.detach(), atol=1e-6)
