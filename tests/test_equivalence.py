"""Equivalence: incremental == full forward, padded batch == one sentence at a time,
source reversal maps alignments back, every arch sets what it claims, gradients, bf16."""
import pytest
import torch
import torch.nn.functional as F

from fairseq_luong.modules.luong import input_feeding
from fairseq_luong.modules.luong.encoder import source_order
from fairseq_luong.modules.steps import ops as step_ops
from fairseq_luong.modules.steps.active_rows import ActiveRows, right_padded_lengths
from tests.helpers import (
    LUONG_ARCHS,
    build_model,
    collate,
    fused_lstm_cell_backward_on_the_cpu,
    fused_lstm_cell_on_the_cpu,
    random_batch,
)
from tests.reference_decoders import luong_context

SIZES = ["--encoder-embed-dim", "8", "--encoder-hidden-size", "8",
         "--decoder-embed-dim", "8", "--decoder-hidden-size", "8", "--location-max-len", "9",
         "--local-window", "2"]
VARIANTS = [(arch, []) for arch in LUONG_ARCHS] + [
    ("luong_global_general", ["--no-input-feed"]),
    ("luong_localp", ["--no-input-feed"]),
    ("luong_localm", ["--attention-score", "concat", "--reverse-source"]),
    ("luong_localp", ["--attention-score", "dot", "--reverse-source"]),
    ("luong_global_concat", ["--encoder-bidirectional", "--encoder-hidden-size", "4"]),
    ("luong_global_general", ["--reverse-source", "--encoder-layers", "3", "--decoder-layers", "3"]),
    ("rnnsearch_tiny", ["--init-uniform", "0.3"]),
    ("rnnsearch_tiny", ["--init-uniform", "0.3", "--deep-output-state", "current", "--maxout-pieces", "3"]),
]
RNNSEARCH_SIZES = ["--encoder-embed-dim", "8", "--encoder-hidden-size", "7", "--decoder-embed-dim", "6",
                   "--decoder-hidden-size", "5", "--attention-dim", "4", "--maxout-dim", "3"]
IDS = [arch + "".join(extra).replace("--", "+") for arch, extra in VARIANTS]


def tiny(arch, *extra, seed=0):
    torch.manual_seed(seed)
    model, task, _ = build_model(arch, *(RNNSEARCH_SIZES if arch.startswith("rnnsearch") else SIZES), *extra)
    return model.eval(), task


@torch.no_grad()
def full_forward(model, batch):
    logits, extra = model(batch["src_tokens"], batch["src_lengths"], batch["prev_output_tokens"])
    return logits, extra["attn"][0]


@pytest.mark.parametrize("arch,extra", VARIANTS, ids=IDS)
@pytest.mark.parametrize("left_pad", [True, False])
def test_incremental_equals_full_forward_with_beam_reordering(arch, extra, left_pad):
    model, task = tiny(arch, *extra)
    batch = random_batch(task, srclens=(9, 5, 2), tgtlens=(7, 7, 7), left_pad_source=left_pad)
    # halfway through, shuffle the batch as beam search does; the reference is the
    # full forward of the same shuffled sentences
    order = torch.tensor([2, 0, 0])
    shuffled = {k: v.index_select(0, order) for k, v in batch.items()}
    ref_logits, ref_attn = full_forward(model, shuffled)
    with torch.no_grad():
        enc = model.encoder(batch["src_tokens"], batch["src_lengths"])
        state = {}
        prev = batch["prev_output_tokens"]
        for t in range(prev.size(1)):
            if t == 3:
                enc = model.encoder.reorder_encoder_out(enc, order)
                model.decoder.reorder_incremental_state_scripting(state, order)
                prev = prev.index_select(0, order)
            logits, extra_out = model.decoder(prev[:, : t + 1], encoder_out=enc, incremental_state=state)
            want_logits = ref_logits if t >= 3 else full_forward(model, batch)[0]
            assert (logits[:, 0] - want_logits[:, t]).abs().max() < 1e-5, f"step {t}"
            attn = extra_out["attn"][0]
            if ref_attn is None:
                assert attn is None
            else:
                want_attn = ref_attn if t >= 3 else full_forward(model, batch)[1]
                assert (attn[:, 0] - want_attn[:, t]).abs().max() < 1e-5


@pytest.mark.parametrize("arch,extra", VARIANTS, ids=IDS)
def test_padded_batch_equals_each_sentence_alone(arch, extra):
    model, task = tiny(arch, *extra)
    src_d, tgt_d = task.source_dictionary, task.target_dictionary
    g = torch.Generator().manual_seed(3)
    srcs = [torch.cat([torch.randint(4, len(src_d), (n,), generator=g), torch.tensor([2])]) for n in (8, 3, 5)]
    tgts = [torch.cat([torch.randint(4, len(tgt_d), (n,), generator=g), torch.tensor([2])]) for n in (4, 6, 2)]
    for left_pad in (True, False):
        logits, attn = full_forward(model, collate(srcs, tgts, src_d, tgt_d, left_pad))
        srclen = logits.new_zeros(0).new_tensor([len(s) for s in srcs]).long()
        for i, (s, t) in enumerate(zip(srcs, tgts)):
            one_logits, one_attn = full_forward(model, collate([s], [t], src_d, tgt_d, left_pad))
            n = len(t)
            assert (logits[i, :n] - one_logits[0]).abs().max() < 1e-5
            if attn is not None:
                m = int(srclen[i])
                real = attn[i, :n, -m:] if left_pad else attn[i, :n, :m]
                assert (real - one_attn[0]).abs().max() < 1e-5
                assert real.sum().item() == pytest.approx(attn[i, :n].sum().item(), abs=1e-6)  # padding: 0


@pytest.mark.parametrize("arch,extra", VARIANTS, ids=IDS)
def test_training_batch_skipping_padded_steps_equals_each_sentence_alone(arch, extra, monkeypatch):
    """In training the input-feeding decoder runs only the sentences still going at each
    step (rows sorted by target length); outputs and gradients must equal running each
    sentence alone (no padding, nothing skipped)."""
    skipped = []
    unpack = ActiveRows.unpack
    monkeypatch.setattr(ActiveRows, "unpack",
                        lambda self, packed: skipped.append(self.skips_padding) or unpack(self, packed))
    model, task = tiny(arch, *extra, "--dropout", "0")
    model.train()  # no alignments wanted: the packed path
    src_d, tgt_d = task.source_dictionary, task.target_dictionary
    g = torch.Generator().manual_seed(5)
    srcs = [torch.cat([torch.randint(4, len(src_d), (n,), generator=g), torch.tensor([2])]) for n in (3, 8, 5, 6)]
    tgts = [torch.cat([torch.randint(4, len(tgt_d), (n,), generator=g), torch.tensor([2])]) for n in (2, 6, 0, 6)]
    batch = collate(srcs, tgts, src_d, tgt_d)
    if getattr(model.decoder, "input_feed", True):
        assert right_padded_lengths(batch["prev_output_tokens"], tgt_d.pad()).tolist() == [3, 7, 1, 7]

    def loss_and_grads(b):
        model.zero_grad(set_to_none=True)
        logits, _ = model(b["src_tokens"], b["src_lengths"], b["prev_output_tokens"])
        loss = F.cross_entropy(logits.transpose(1, 2), b["target"], ignore_index=tgt_d.pad(),
                               reduction="sum")
        loss.backward()
        return logits.detach(), {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}

    logits, grads = loss_and_grads(batch)
    # the step-by-step loops (Luong with input feeding; RNNsearch's encoder and decoder)
    if arch.startswith("rnnsearch"):
        assert skipped == [True, True]
    else:
        assert skipped == ([True] if model.decoder.input_feed else [])
    summed = {}
    for i, (s, t) in enumerate(zip(srcs, tgts)):
        one_logits, one_grads = loss_and_grads(collate([s], [t], src_d, tgt_d))
        assert (logits[i, : len(t)] - one_logits[0]).abs().max() < 1e-5
        for name, grad in one_grads.items():
            summed[name] = summed.get(name, 0) + grad
    assert grads.keys() == summed.keys()
    for name in grads:
        assert (grads[name] - summed[name]).abs().max() < 1e-5, name


def test_padded_steps_are_skipped_only_for_right_padded_ragged_targets():
    def lengths(tokens):
        return right_padded_lengths(tokens, pad=1)

    assert lengths(torch.tensor([[2, 5, 6], [2, 7, 1]])).tolist() == [3, 2]
    assert lengths(torch.tensor([[2, 5, 6], [2, 7, 8]])) is None  # nothing to skip
    assert lengths(torch.tensor([[2, 5, 6], [1, 2, 7]])) is None  # left padded
    assert lengths(torch.tensor([[2], [2]])) is None  # one step (incremental decoding)


def test_source_order_by_hand():
    pad, eos = 1, 2
    left = torch.tensor([[1, 1, 10, 11, 12, 2], [20, 21, 22, 23, 24, 2]])
    order, length, start = source_order(left, pad, eos, reverse=True)
    assert order.tolist() == [[4, 3, 2, 5, 0, 1], [4, 3, 2, 1, 0, 5]]
    assert left.gather(1, order).tolist() == [[12, 11, 10, 2, 1, 1], [24, 23, 22, 21, 20, 2]]
    assert length.tolist() == [4, 6] and start.tolist() == [2, 0]
    right = torch.tensor([[10, 11, 12, 2, 1, 1]])
    order, _, start = source_order(right, pad, eos, reverse=True)
    assert order.tolist() == [[2, 1, 0, 3, 4, 5]] and start.tolist() == [0]
    no_eos = torch.tensor([[1, 10, 11, 12]])
    assert no_eos.gather(1, source_order(no_eos, pad, eos, True)[0]).tolist() == [[12, 11, 10, 1]]
    with pytest.raises(ValueError, match="no tokens"):
        source_order(torch.tensor([[1, 1]]), pad, eos, True)


@pytest.mark.parametrize("arch", ["luong_global_general", "luong_global_dot", "luong_localm", "luong_localp"])
@pytest.mark.parametrize("left_pad", [True, False])
def test_reverse_source_alignments_refer_to_original_positions(arch, left_pad, monkeypatch):
    """With --reverse-source the attention at every step is the reference's (eq. 7-10,
    ``luong_context``) over a memory built independently, in the ORIGINAL word order: the
    same weights without reversal run on the words reversed by hand, their outputs mirrored
    back (EOS stays last). Local windows and local-p's p_t (eq. 9) thus count original
    positions: a p_t counted in the reversed order gives other weights (local-p's v_p is
    scaled up so that p_t lies far from the middle, where a mirrored p_t would coincide).
    Global attention also gives the plain model's logits on the hand-reversed words."""
    rev, task = tiny(arch, "--reverse-source")
    if arch == "luong_localp":
        with torch.no_grad():
            rev.decoder.attention.v_p.weight.mul_(40.0)
    plain, _ = tiny(arch)
    plain.load_state_dict(rev.state_dict())
    src_d, tgt_d = task.source_dictionary, task.target_dictionary
    words = [torch.tensor([5, 6, 7, 8, 9, 10, 11]), torch.tensor([10, 11, 12])]
    eos = torch.tensor([src_d.eos()])
    tgts = [torch.tensor([7, 8, 9, 10, 11, 2]), torch.tensor([5, 6, 7, 8, 2])]
    queries = []  # (query: bsz x 1 x H, step) of every step, in the batch's row order
    attention = rev.decoder.attention
    make_steps = input_feeding.attention_steps

    def spy(*args, **kwargs):
        steps = make_steps(*args, **kwargs)
        forward = steps.forward

        def step(query):
            queries.append((query.unsqueeze(1), len(queries)))
            return forward(query)

        steps.forward = step
        return steps

    monkeypatch.setattr(input_feeding, "attention_steps", spy)
    batch = collate([torch.cat([w, eos]) for w in words], tgts, src_d, tgt_d, left_pad)
    logits_r, attn_r = full_forward(rev, batch)
    by_hand = collate([torch.cat([w.flip(0), eos]) for w in words], tgts, src_d, tgt_d, left_pad)
    with torch.no_grad():
        memory_by_hand = plain.encoder(by_hand["src_tokens"], by_hand["src_lengths"])["encoder_out"]
    S = attn_r.size(2)
    assert len(queries) == attn_r.size(1)  # input feeding: one attention step per target step
    for b, w in enumerate(words):
        n = len(w) + 1
        off = S - n if left_pad else 0
        mirror = [off + (n - 2 - j if j < n - 1 else j) for j in range(n)]
        memory = memory_by_hand[b, mirror]  # n x C, original order
        for query, t in queries:
            _, want = luong_context(attention, query[b, 0], t, memory)
            assert torch.allclose(attn_r[b, t, off:off + n], want, atol=1e-6), (b, t)
        assert (attn_r[b, :, :off] == 0).all() and (attn_r[b, :, off + n:] == 0).all()
    if arch.startswith("luong_global"):
        logits_p, _ = full_forward(plain, by_hand)
        assert torch.allclose(logits_r, logits_p, atol=1e-5)


ARCH_CLAIMS = {
    "luong_base": dict(no_attention=True, no_input_feed=True, dropout=0.0, reverse_source=False,
                       init_uniform=0.1),
    "luong_lstm": dict(dropout=0.2, encoder_memory_dropout=0.0, init_uniform=0.1, reverse_source=False,
                       no_output_bias=False),
    "luong_global_dot": dict(attention_type="global", attention_score="dot"),
    "luong_global_general": dict(attention_type="global", attention_score="general"),
    "luong_global_concat": dict(attention_type="global", attention_score="concat"),
    "luong_global_location": dict(attention_type="global", attention_score="location"),
    "luong_localm": dict(attention_type="local_m", attention_score="general"),
    "luong_localp": dict(attention_type="local_p", attention_score="general", local_window=10),
    "luong_global_general_wmt_en_de": dict(
        encoder_layers=4, decoder_layers=4, encoder_hidden_size=1000, decoder_hidden_size=1000,
        encoder_embed_dim=1000, decoder_embed_dim=1000, dropout=0.2, reverse_source=True,
        init_uniform=0.1, attention_type="global", attention_score="general", no_output_bias=True),
    "luong_localp_wmt_en_de": dict(
        encoder_layers=4, decoder_layers=4, decoder_hidden_size=1000, dropout=0.2,
        reverse_source=True, no_input_feed=False, attention_type="local_p",
        attention_score="general", local_window=10, init_uniform=0.1, no_output_bias=True),
}


@pytest.mark.parametrize("arch", sorted(ARCH_CLAIMS))
def test_each_named_arch_sets_what_it_claims(arch):
    from fairseq import options

    from fairseq_luong.models.luong_lstm import LuongLSTMConfig
    from tests.helpers import USER_DIR, dict_dir

    args = options.parse_args_and_arch(
        options.get_training_parser(),
        [dict_dir(), "--user-dir", USER_DIR, "--task", "translation", "--arch", arch],
    )
    cfg = LuongLSTMConfig.from_namespace(args)
    for key, value in ARCH_CLAIMS[arch].items():
        assert str(getattr(cfg, key)) == str(value), key
    # and a command-line value still wins over the arch's
    args = options.parse_args_and_arch(
        options.get_training_parser(),
        [dict_dir(), "--user-dir", USER_DIR, "--task", "translation", "--arch", arch, "--dropout", "0.3"],
    )
    assert args.dropout == 0.3


@pytest.mark.parametrize("arch,model", [("luong_global_general_wmt_en_de", "global_general_feed"),
                                        ("luong_localp_wmt_en_de", "localp_general_feed")])
def test_paper_size_archs_are_the_protocols_models(arch, model):
    """--arch X_wmt_en_de alone gives the model that fairseq_luong/paper_settings/luong2015.py's
    options give (size, initialisation, no output bias, reversal, dropout, attention)."""
    from fairseq import options

    from fairseq_luong.models.luong_lstm import LuongLSTMConfig
    from fairseq_luong.paper_settings import luong2015
    from tests.helpers import USER_DIR, dict_dir

    def model_cfg(words):
        args = options.parse_args_and_arch(options.get_training_parser(),
                                           [dict_dir(), "--user-dir", USER_DIR, "--task", "translation", *words])
        return LuongLSTMConfig.from_namespace(args)

    by_arch, by_protocol = model_cfg(["--arch", arch]), model_cfg(luong2015.paper_model(model))
    fields = [f for f in LuongLSTMConfig.__dataclass_fields__ if f != "_name"]
    assert {f: getattr(by_arch, f) for f in fields} == {f: getattr(by_protocol, f) for f in fields}
    assert by_arch.no_output_bias and by_arch.encoder_layers == luong2015.LAYERS


@pytest.mark.parametrize("memory_dropout", [None, "0.5"])
def test_encoder_memory_is_dropped_out_only_when_asked(memory_dropout):
    """The paper drops out embeddings, the outputs between layers and h~_t (section 4.1),
    not the attention memory h̄_s: in training mode with --dropout 0.5 the encoder's top
    outputs keep every value; --encoder-memory-dropout 0.5 zeroes about half of them."""
    extra = [] if memory_dropout is None else ["--encoder-memory-dropout", memory_dropout]
    model, task = tiny("luong_global_general", "--dropout", "0.5", *extra)
    model.train()
    batch = random_batch(task, srclens=(9, 5, 2))
    out = model.encoder(batch["src_tokens"], batch["src_lengths"])
    real = out["encoder_out"].masked_select(~out["encoder_padding_mask"].unsqueeze(-1))
    zeros = (real == 0).float().mean().item()
    if memory_dropout is None:
        assert zeros == 0.0
    else:
        assert 0.3 < zeros < 0.7


@pytest.mark.parametrize("arch", LUONG_ARCHS)
def test_every_luong_arch_initialises_uniformly_by_default(arch):
    """Section 4.1: every parameter ~ U[-0.1, 0.1] (padding rows of the embeddings zero);
    an LSTM gate's one bias too: PyTorch's two (b_ih + b_hh) sum to U[-0.1, 0.1], not to
    a triangular draw on [-0.2, 0.2]. --init-uniform 0 keeps PyTorch's (embeddings
    N(0, 1/d): values past 0.1)."""
    model, _ = tiny(arch)
    for name, p in model.named_parameters():
        if ".bias_hh_" in name:
            assert (p == 0).all(), name
            continue
        assert p.abs().max() <= 0.1, name
        if p.numel() >= 64:
            assert p.abs().max() > 0.08, name
    lstms = [m for m in model.modules() if isinstance(m, torch.nn.LSTM)]
    assert lstms
    for lstm in lstms:
        for layer in range(lstm.num_layers):
            for suffix in ("", "_reverse")[: 1 + lstm.bidirectional]:
                bias = getattr(lstm, f"bias_ih_l{layer}{suffix}") + getattr(lstm, f"bias_hh_l{layer}{suffix}")
                assert bias.abs().max() <= 0.1
    assert (model.encoder.embed_tokens.weight[model.encoder.padding_idx] == 0).all()
    pytorch, _ = tiny(arch, "--init-uniform", "0")
    assert pytorch.encoder.embed_tokens.weight.abs().max() > 0.2


def test_no_output_bias_is_eq_6_exactly():
    """p(y_t | ...) = softmax(W_s h~_t) (eq. 6): with --no-output-bias the decoder's logits
    are h~_t W_s^T and nothing else; by default W_s has a bias b_s."""
    model, task = tiny("luong_global_general", "--no-output-bias")
    model.eval()
    assert model.decoder.W_s.bias is None
    batch = random_batch(task)
    with torch.no_grad():
        enc = model.encoder(batch["src_tokens"], batch["src_lengths"])
        htilde, _ = model.decoder(batch["prev_output_tokens"], enc, features_only=True)
        logits, _ = model.decoder(batch["prev_output_tokens"], enc)
    torch.testing.assert_close(logits, htilde @ model.decoder.W_s.weight.t(), rtol=0, atol=0)
    default, _ = tiny("luong_global_general")
    assert default.decoder.W_s.bias is not None


def test_paper_size_model_builds_with_paper_shapes():
    model, _, _ = build_model("luong_localp_wmt_en_de")
    dec = model.decoder
    assert len(dec.layers) == 4 and dec.hidden_size == 1000
    assert dec.layers[0].weight_ih_l0.shape == (4000, 2000)  # [emb; h~_{t-1}] input feeding
    assert model.encoder.reverse_source
    w = dec.layers[1].weight_hh_l0
    assert w.abs().max() <= 0.1 and w.abs().max() > 0.09  # U[-0.1, 0.1]


@pytest.mark.parametrize("arch,extra", VARIANTS, ids=IDS)
def test_gradients_reach_every_parameter(arch, extra):
    model, task = tiny(arch, *extra)
    model.train()
    batch = random_batch(task, srclens=(9, 5, 2), tgtlens=(7, 7, 7))
    logits, _ = model(batch["src_tokens"], batch["src_lengths"], batch["prev_output_tokens"])
    F.cross_entropy(logits.transpose(1, 2), batch["target"]).backward()
    for name, p in model.named_parameters():
        assert p.grad is not None and p.grad.abs().sum() > 0, name


@pytest.mark.parametrize("arch,extra", VARIANTS, ids=IDS)
def test_bf16_autocast_forward_backward_is_finite(arch, extra):
    model, task = tiny(arch, *extra)
    model.train()
    batch = random_batch(task, srclens=(9, 5, 2), tgtlens=(7, 7, 7))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        logits, _ = model(batch["src_tokens"], batch["src_lengths"], batch["prev_output_tokens"])
        loss = F.cross_entropy(logits.float().transpose(1, 2), batch["target"], ignore_index=1)
    loss.backward()
    assert torch.isfinite(loss)
    assert all(torch.isfinite(p.grad).all() for p in model.parameters() if p.grad is not None)


@pytest.mark.parametrize("has_kernel", [False, True])
def test_lstm_under_autocast_avoids_onednn_without_its_kernel(monkeypatch, has_kernel):
    # CPUs without AVX512-BF16 have no oneDNN bf16 LSTM, and PyTorch hands oneDNN every batch
    # of equal lengths (unpacked, or one packed sentence), where nn.LSTM raises. Every LSTM the
    # models build then runs PyTorch's own kernel, still under autocast: one sentence gives the
    # numbers it gets inside a ragged batch (that kernel's, bf16), not float32's. With a kernel,
    # oneDNN is left on. Both branches are forced here, whatever this machine has.
    from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

    from fairseq_luong.modules import autocast_safe_lstm
    from fairseq_luong.modules.layers import LSTM

    torch.manual_seed(0)
    layer = LSTM(8, 8, num_layers=2)
    x, h0, c0 = torch.randn(5, 3, 8), torch.randn(2, 3, 8), torch.randn(2, 3, 8)
    fp32, _ = layer(x[:, :1], (h0[:, :1], c0[:, :1]))
    calls = []
    real_forward = torch.nn.LSTM.forward

    def spy_forward(self, inp, hx=None):
        calls.append((type(inp).__name__, torch.is_autocast_enabled("cpu"), torch.backends.mkldnn.enabled))
        # with a kernel, do not run it: this machine may not have one
        return (inp, hx) if has_kernel else real_forward(self, inp, hx)

    monkeypatch.setattr(torch.nn.LSTM, "forward", spy_forward)
    monkeypatch.setattr(autocast_safe_lstm, "_onednn_has_kernel", lambda dtype: has_kernel)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        alone, (h, c) = layer(x[:, :1], (h0[:, :1], c0[:, :1]))
        one_packed = layer(pack_padded_sequence(x[:, :1], torch.tensor([5])), (h0[:, :1], c0[:, :1]))
        ragged = layer(pack_padded_sequence(x, torch.tensor([5, 4, 2])), (h0, c0))
    assert torch.backends.mkldnn.enabled  # restored
    kinds = ["Tensor", "PackedSequence", "PackedSequence"]
    assert calls == [(kind, True, has_kernel) for kind in kinds]
    if not has_kernel:
        in_batch = pad_packed_sequence(ragged[0])[0][:, :1]
        assert torch.equal(alone, in_batch) and torch.equal(pad_packed_sequence(one_packed[0])[0], in_batch)
        assert torch.equal(h, ragged[1][0][:, :1]) and torch.equal(c, ragged[1][1][:, :1])
        assert 0 < (alone.float() - fp32).abs().max() < 0.05  # bf16, not float32


RNNSEARCH_CLAIMS = {
    "rnnsearch": dict(encoder_embed_dim=512, encoder_hidden_size=512, decoder_hidden_size=512,
                      attention_dim=512, maxout_dim=256, maxout_pieces=2, deep_output_state="previous",
                      dropout=0.0, init_uniform=0.0),
    "rnnsearch_wmt": dict(encoder_embed_dim=620, decoder_embed_dim=620, encoder_hidden_size=1000,
                          decoder_hidden_size=1000, attention_dim=1000, maxout_dim=500, maxout_pieces=2,
                          deep_output_state="previous", dropout=0.0),
    "rnnsearch_tiny": dict(encoder_hidden_size=16, maxout_dim=8, dropout=0.1),
}


@pytest.mark.parametrize("arch", sorted(RNNSEARCH_CLAIMS))
def test_each_rnnsearch_arch_sets_what_it_claims(arch):
    from fairseq import options

    from fairseq_luong.models.rnnsearch import RNNsearchConfig
    from tests.helpers import USER_DIR, dict_dir

    argv = [dict_dir(), "--user-dir", USER_DIR, "--task", "translation", "--arch", arch]
    cfg = RNNsearchConfig.from_namespace(options.parse_args_and_arch(options.get_training_parser(), argv))
    for key, value in RNNSEARCH_CLAIMS[arch].items():
        assert str(getattr(cfg, key)) == str(value), key
    args = options.parse_args_and_arch(options.get_training_parser(), argv + ["--maxout-dim", "7"])
    assert args.maxout_dim == 7


def test_rnnsearch_paper_size_and_initialisation():
    """Appendix A.2 shapes and B.1 initialisation: orthogonal U, U_z, U_r; W_a, U_a ~
    N(0, 0.001^2); v_a and biases zero; other weights ~ N(0, 0.01^2)."""
    torch.manual_seed(0)
    model, _, _ = build_model("rnnsearch_wmt")
    enc, dec = model.encoder, model.decoder
    assert enc.forward_gru.W.weight.shape == (3000, 620) and enc.output_units == 2000
    assert dec.gru.W.weight.shape == (3000, 620 + 2000)  # [E y_{i-1}; c_i]
    assert dec.U_o.weight.shape == (1000, 1000) and dec.C_o.weight.shape == (1000, 2000)
    assert dec.W_o.weight.shape == (len(dec.dictionary), 500)
    eye = torch.eye(1000)
    for gru in (enc.forward_gru, enc.backward_gru, dec.gru):
        for U in (gru.U_zr.weight[:1000], gru.U_zr.weight[1000:], gru.U.weight):
            assert torch.allclose(U @ U.t(), eye, atol=1e-4)
        assert (gru.W.bias == 0).all()
        assert gru.W.weight.std().item() == pytest.approx(0.01, rel=0.02)
    score = dec.attention.score
    assert score.W_q.weight.std().item() == pytest.approx(0.001, rel=0.02)  # W_a
    assert score.W_k.weight.std().item() == pytest.approx(0.001, rel=0.02)  # U_a
    assert (score.v_a.weight == 0).all() and (dec.U_o.bias == 0).all()
    assert dec.embed_tokens.weight[1:].std().item() == pytest.approx(0.01, rel=0.1)


def trained_and_decoded(model, net_input):
    """A training forward and backward (dropout masks from seed 1, on the CPU and CUDA), then
    incremental decoding of the same batch: [logits, every gradient, the decoded steps], float32."""
    model.train()
    model.zero_grad()
    torch.manual_seed(1)  # the same dropout masks (torch.manual_seed seeds CUDA too)
    logits, _ = model(*net_input)
    logits.float().log_softmax(-1)[..., 5].sum().backward()
    grads = [p.grad.float().clone() for p in model.parameters() if p.grad is not None]
    model.eval()
    with torch.no_grad():
        enc, state, steps = model.encoder(*net_input[:2]), {}, []
        for t in range(net_input[2].size(1)):
            steps.append(model.decoder(net_input[2][:, : t + 1], encoder_out=enc, incremental_state=state)[0])
    return [logits.float(), *grads, torch.cat(steps, 1).float()]


@pytest.mark.parametrize("arch,extra", [
    ("luong_global_general", []),
    ("luong_localp", ["--decoder-layers", "3", "--encoder-layers", "3"]),
    ("luong_global_location", ["--reverse-source"]),
])
def test_the_fused_cuda_cell_path_computes_the_eager_cells_numbers(arch, extra, monkeypatch):
    """On CUDA the input-feeding loop runs the cell and its backward in PyTorch's fused kernels
    (``step_ops.lstm_cell``); here CPU stand-ins for the kernels take their place (their
    arguments, arithmetic and outputs: the workspace of activated gates the backward reads):
    training gives the eager cell's outputs and every gradient, and incremental decoding its
    outputs, with dropout."""
    model, task = tiny(arch, "--dropout", "0.3", *extra)
    batch = random_batch(task, srclens=(9, 5, 2), tgtlens=(7, 3, 6))
    net_input = (batch["src_tokens"], batch["src_lengths"], batch["prev_output_tokens"])
    runs = []
    for fused in (False, True):
        with monkeypatch.context() as patches:
            if fused:
                calls = []
                patches.setattr(step_ops, "fused_cell_here", lambda gates: True)
                patches.setattr(input_feeding, "fused_cell_here", lambda gates: True)
                patches.setattr(torch.ops.aten, "_thnn_fused_lstm_cell",
                                lambda *a: calls.append("cell") or fused_lstm_cell_on_the_cpu(*a))
                patches.setattr(torch.ops.aten, "_thnn_fused_lstm_cell_backward_impl",
                                lambda *a: calls.append("backward") or fused_lstm_cell_backward_on_the_cpu(*a))
            runs.append(trained_and_decoded(model, net_input))
            if fused:  # the kernels ran at every layer and step (rows that are going), in training and decoding
                steps = net_input[2].size(1) * model.decoder.num_layers
                assert calls.count("cell") == 2 * steps and calls.count("backward") == steps, calls
    assert len(runs[0]) == len(runs[1])
    for eager, fused in zip(*runs):
        torch.testing.assert_close(fused, eager, rtol=1e-5, atol=1e-6)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="PyTorch's fused LSTM cell is CUDA only")
@pytest.mark.parametrize("dtype,tol", [(torch.float32, 1e-5), (torch.bfloat16, 2e-2)])
def test_on_a_gpu_the_fused_cell_computes_the_eager_cells_numbers(dtype, tol, monkeypatch):
    """The real kernels (aten::_thnn_fused_lstm_cell and its backward) against the eager cell on
    the same GPU: training's logits and every gradient, and incremental decoding's outputs, 3
    layers, dropout."""
    model, task = tiny("luong_global_general", "--dropout", "0.3", "--decoder-layers", "3",
                       "--encoder-layers", "3")
    model = model.to("cuda", dtype)
    batch = random_batch(task, srclens=(9, 5, 2), tgtlens=(7, 3, 6))
    net_input = [batch[k].cuda() for k in ("src_tokens", "src_lengths", "prev_output_tokens")]
    runs = []
    for fused in (True, False):
        with monkeypatch.context() as patches:
            calls = []
            kernel = torch.ops.aten._thnn_fused_lstm_cell
            patches.setattr(torch.ops.aten, "_thnn_fused_lstm_cell", lambda *a: calls.append(1) or kernel(*a))
            if not fused:
                patches.setattr(step_ops, "fused_cell_here", lambda gates: False)
                patches.setattr(input_feeding, "fused_cell_here", lambda gates: False)
            runs.append(trained_and_decoded(model, net_input))
            assert len(calls) == (2 * net_input[2].size(1) * 3 if fused else 0)
    for fused, eager in zip(*runs):
        torch.testing.assert_close(fused, eager, rtol=tol, atol=tol)
