"""transformer_perspe: perturbed sinusoids, relative position bias, incremental decoding."""
import itertools

import pytest
import torch
from fairseq import options, tasks
from fairseq.data import data_utils
from fairseq.modules import SinusoidalPositionalEmbedding
from fairseq.sequence_generator import SequenceGenerator

from fairseq_luong.modules.perspe.positions import (
    PerturbedSinusoidalPositionalEmbedding,
    perturbed_sinusoid,
)
from fairseq_luong.modules.perspe.relative_position_bias import RelativePositionBias
from tests.helpers import USER_DIR, save_dictionaries

POSITIONS = ["spe", "none", "rpe", "perspe"]
COMBINATIONS = list(itertools.product(POSITIONS, POSITIONS))


@pytest.fixture(autouse=True)
def _one_thread(one_thread):
    """Tiny models: one thread beats two contending ones (conftest's one_thread)."""


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    """A data directory holding only dict.en.txt and dict.ja.txt."""
    path = tmp_path_factory.mktemp("perspe_dicts")
    save_dictionaries(path, {"en": 20, "ja": 23})
    return str(path)


def build(data_dir, *extra, arch="transformer_perspe_tiny", seed=1):
    """Model, task and args exactly as fairseq-train builds them from these words."""
    parser = options.get_training_parser()
    args = options.parse_args_and_arch(parser, [
        data_dir, "--user-dir", USER_DIR, "--task", "translation_chunks", "-s", "en", "-t", "ja",
        "--arch", arch, "--criterion", "perspe_label_smoothed_cross_entropy", *extra])
    torch.manual_seed(seed)
    task = tasks.setup_task(args)
    model = task.build_model(args)
    for module in model.modules():  # make relative biases big enough to matter
        if isinstance(module, RelativePositionBias):
            torch.nn.init.normal_(module.relative_attention_bias.weight, std=1.0)
    return model.eval(), task, args


def sentences(d, lengths, seed):
    g = torch.Generator().manual_seed(seed)
    return [torch.cat([torch.randint(d.nspecial, len(d), (n - 1,), generator=g),
                       torch.tensor([d.eos()])]) for n in lengths]


def batch(task, src_lengths=(7, 5, 3), tgt_lengths=(6, 6, 6), seed=0):
    """A left-padded source / right-padded target batch, as fairseq's collater makes it."""
    src_d, tgt_d = task.source_dictionary, task.target_dictionary
    srcs, tgts = sentences(src_d, src_lengths, seed), sentences(tgt_d, tgt_lengths, seed + 1)
    return {
        "id": torch.arange(len(srcs)),
        "nsentences": len(srcs),
        "ntokens": sum(tgt_lengths),
        "net_input": {
            "src_tokens": data_utils.collate_tokens(srcs, src_d.pad(), left_pad=True),
            "src_lengths": torch.tensor(src_lengths),
            "prev_output_tokens": data_utils.collate_tokens(
                tgts, tgt_d.pad(), tgt_d.eos(), left_pad=False, move_eos_to_beginning=True),
        },
        "target": data_utils.collate_tokens(tgts, tgt_d.pad(), left_pad=False),
        # two-token phrases, aligned with prev_output_tokens (BOS: -1), as the
        # translation_chunks collater makes them
        "prev_output_chunks": data_utils.collate_tokens(
            [torch.tensor([-1] + [i // 2 for i in range(n - 1)]) for n in tgt_lengths], -1),
    }


# perSPE positions (Oka et al. 2022, eq. 3-4)

@pytest.mark.parametrize("dim", [16, 15])
def test_sinusoid_of_integer_positions_is_fairseqs_table(dim):
    table = SinusoidalPositionalEmbedding.get_embedding(40, dim)  # no padding row
    torch.testing.assert_close(perturbed_sinusoid(torch.arange(40), dim), table, rtol=0, atol=1e-6)


def test_perturbed_positions_never_hit_the_padding_row():
    pad = 1
    module = PerturbedSinusoidalPositionalEmbedding(8, pad, init_size=20)
    tokens = torch.tensor([[5, 6, 7, 8], [pad, pad, 6, 7]])  # the second is left-padded
    offsets = torch.tensor([[-1, -3, 2, 0], [0, 0, -1, 1]])
    emb = module(tokens, offsets=offsets)  # 2 x 4 x 8
    # plain positions are pad + 1 + t: 2 3 4 5 and -, -, 2, 3
    want = perturbed_sinusoid(torch.tensor([[1, 0, 6, 5], [0, 0, 1, 4]]), 8)
    torch.testing.assert_close(emb[0], want[0])
    torch.testing.assert_close(emb[1, 2:], want[1, 2:])
    assert emb[0, 0].abs().sum() > 0  # position 1 == padding_idx, yet not the zero row
    assert emb[1, :2].abs().sum() == 0  # padding stays zero
    # the offsets were an input of the call: the module keeps nothing of them
    assert vars(module).keys() == vars(SinusoidalPositionalEmbedding(8, pad, init_size=20)).keys()
    assert torch.equal(module(tokens), SinusoidalPositionalEmbedding(8, pad, init_size=20)(tokens))


def test_plain_calls_are_fairseqs_sinusoids():
    module = PerturbedSinusoidalPositionalEmbedding(8, 1, init_size=20)
    reference = SinusoidalPositionalEmbedding(8, 1, init_size=20)
    tokens = torch.tensor([[1, 1, 6, 7], [5, 6, 7, 8]])
    assert torch.equal(module(tokens), reference(tokens))
    torch.testing.assert_close(module(tokens, offsets=torch.zeros_like(tokens)), reference(tokens),
                               rtol=0, atol=1e-6)
    state = {}
    assert torch.equal(module(tokens, incremental_state=state), reference(tokens, incremental_state=state))


# relative position bias (T5; the RPE of Oka et al. 2022, Table 1)

@pytest.mark.parametrize("bidirectional", [True, False])
def test_bias_depends_only_on_relative_position(bidirectional):
    torch.manual_seed(0)
    rpb = RelativePositionBias(3, num_buckets=8, max_distance=20, bidirectional=bidirectional)
    torch.nn.init.normal_(rpb.relative_attention_bias.weight)
    small, big = rpb(5, 5), rpb(7, 7)  # heads x q x k
    torch.testing.assert_close(small, big[:, 2:, 2:])
    torch.testing.assert_close(small, big[:, :5, :5])
    for i, j in itertools.product(range(5), range(5)):
        m = min(i, j)  # (i, j) and (i - m, j - m) are equally far apart
        torch.testing.assert_close(small[:, i, j], small[:, i - m, j - m])
    # one incremental step: the query is the newest position
    torch.testing.assert_close(rpb(1, 7)[:, 0], big[:, 6])


def test_buckets_are_t5s():
    def bucket(rel, bidirectional):
        rpb = RelativePositionBias(1, 32, 128, bidirectional=bidirectional)
        return rpb.bucket(torch.tensor(rel)).tolist()

    # bidirectional: 16 buckets a side, exact below 8, then log-spaced up to 128:
    # 8 + int(log(40 / 8) / log(128 / 8) * 8) = 8 + 4
    assert bucket([0, -1, -7, -8, -40, -200], True) == [0, 1, 7, 8, 12, 15]
    assert bucket([1, 7, 8, 40, 200], True) == [17, 23, 24, 28, 31]
    # causal: 32 buckets for keys at or before the query, exact below 16:
    # 16 + int(log(40 / 16) / log(128 / 16) * 16) = 16 + 7
    assert bucket([0, -15, -16, -40, -200, 3], False) == [0, 15, 16, 23, 31, 0]


@pytest.mark.parametrize("encoder_pos", POSITIONS)
def test_shifting_inside_padding_changes_nothing(data_dir, encoder_pos):
    model, task, _ = build(data_dir, "--encoder-pos", encoder_pos, "--decoder-pos", "rpe")
    d = task.source_dictionary
    sent = sentences(d, [4], seed=3)[0]
    long = sentences(d, [6], seed=4)[0]
    pad = torch.full((2,), d.pad())
    shifted = torch.stack([torch.cat([pad, sent]), long])  # 2 x 6, sent left-padded by 2
    alone = sent.unsqueeze(0)
    with torch.no_grad():
        out_shifted = model.encoder(shifted, torch.tensor([4, 6]))["encoder_out"][0]
        out_alone = model.encoder(alone, torch.tensor([4]))["encoder_out"][0]
    torch.testing.assert_close(out_shifted[2:, 0], out_alone[:, 0], rtol=1e-5, atol=1e-5)


# the model

def test_named_architectures_set_what_they_claim(data_dir):
    _, _, args = build(data_dir, arch="transformer_perspe")
    assert (args.encoder_embed_dim, args.encoder_ffn_embed_dim, args.encoder_layers,
            args.encoder_attention_heads, args.decoder_layers) == (512, 2048, 6, 8, 6)
    assert (args.encoder_pos, args.decoder_pos) == ("spe", "perspe")
    assert (args.rpe_num_buckets, args.rpe_max_distance) == (32, 128)
    model, _, args = build(data_dir)
    assert (args.encoder_embed_dim, args.encoder_ffn_embed_dim, args.encoder_layers,
            args.decoder_attention_heads) == (64, 64, 2, 2)
    assert isinstance(model.decoder.embed_positions, PerturbedSinusoidalPositionalEmbedding)
    assert type(model.encoder.embed_positions) is SinusoidalPositionalEmbedding
    _, _, args = build(data_dir, "--decoder-pos", "rpe", "--rpe-num-buckets", "8")
    assert (args.decoder_pos, args.rpe_num_buckets) == ("rpe", 8)


@pytest.mark.parametrize("encoder_pos,decoder_pos", COMBINATIONS)
def test_incremental_decoding_equals_full_forward(data_dir, encoder_pos, decoder_pos):
    model, task, _ = build(data_dir, "--encoder-pos", encoder_pos, "--decoder-pos", decoder_pos)
    net_input = batch(task)["net_input"]
    prev = net_input["prev_output_tokens"]  # 3 x 6, no padding
    with torch.no_grad():
        encoder_out = model.encoder(net_input["src_tokens"], net_input["src_lengths"])
        full, _ = model.decoder(prev, encoder_out)
        state = {}
        for t in range(prev.size(1)):
            step, _ = model.decoder(prev[:, :t + 1], encoder_out, incremental_state=state)
            torch.testing.assert_close(step[:, 0], full[:, t], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("encoder_pos,decoder_pos", COMBINATIONS)
def test_beam_search_scores_equal_full_forward_scores(data_dir, encoder_pos, decoder_pos):
    """Beam search reorders the incremental state; a missed reorder changes the scores."""
    model, task, _ = build(data_dir, "--encoder-pos", encoder_pos, "--decoder-pos", decoder_pos)
    sample = batch(task)
    tgt_d = task.target_dictionary
    generator = SequenceGenerator([model], tgt_d, beam_size=3, max_len_b=8)
    with torch.no_grad():
        hypos = generator.generate([model], sample)
        for i, sent_hypos in enumerate(hypos):
            src = sample["net_input"]["src_tokens"][i:i + 1]
            for hypo in sent_hypos:
                tokens = hypo["tokens"].unsqueeze(0)  # 1 x len, ends in </s>
                prev = torch.cat([torch.tensor([[tgt_d.eos()]]), tokens[:, :-1]], dim=1)
                out = model(src, sample["net_input"]["src_lengths"][i:i + 1], prev)
                lprobs = model.get_normalized_probs(out, log_probs=True)  # 1 x len x V
                scores = lprobs.gather(2, tokens.unsqueeze(2)).view(-1)
                torch.testing.assert_close(scores, hypo["positional_scores"], rtol=1e-4, atol=1e-4)


def test_offsets_are_for_perspe_sides_only(data_dir):
    model, task, _ = build(data_dir, "--encoder-pos", "spe", "--decoder-pos", "perspe")
    net_input = batch(task)["net_input"]
    zeros = torch.zeros_like(net_input["src_tokens"])
    with pytest.raises(ValueError, match="not perspe"):
        model(**net_input, src_position_offsets=zeros)


def test_offsets_move_the_perspe_side_and_zero_offsets_do_not(data_dir):
    model, task, _ = build(data_dir, "--encoder-pos", "perspe", "--decoder-pos", "perspe")
    net_input = batch(task)["net_input"]
    src, prev = net_input["src_tokens"], net_input["prev_output_tokens"]
    with torch.no_grad():
        plain, _ = model(**net_input)
        zero, _ = model(**net_input, src_position_offsets=torch.zeros_like(src),
                        tgt_position_offsets=torch.zeros_like(prev))
        moved, _ = model(**net_input, tgt_position_offsets=torch.ones_like(prev))
    torch.testing.assert_close(zero, plain, rtol=1e-5, atol=1e-5)
    assert (moved - plain).abs().max() > 1e-3


@pytest.mark.parametrize("encoder_pos,decoder_pos", [("spe", "perspe"), ("perspe", "perspe")])
def test_generation_is_unperturbed_by_construction(data_dir, encoder_pos, decoder_pos):
    """fairseq's beam search passes no offsets and incremental decoding refuses them, so a
    perSPE model translates from plain positions whatever the random state: two beam searches
    under different seeds give the same tokens and scores, those of an SPE model with the same
    weights. A draw of offsets while translating would make them differ."""
    model, task, _ = build(data_dir, "--encoder-pos", encoder_pos, "--decoder-pos", decoder_pos,
                           "--perturb-range", "3", "--dropout", "0")
    sample = batch(task)
    torch.manual_seed(1)
    first = translate(model, task, sample)
    torch.manual_seed(2)
    second = translate(model, task, sample)
    assert first[0] == second[0]
    torch.testing.assert_close(first[1], second[1], rtol=0, atol=0)
    spe, _, _ = build(data_dir, "--encoder-pos", "spe", "--decoder-pos", "spe", "--dropout", "0")
    spe.load_state_dict(model.state_dict(), strict=True)
    torch.manual_seed(3)
    plain = translate(spe, task, sample)
    assert plain[0] == first[0]
    torch.testing.assert_close(plain[1], first[1], rtol=0, atol=0)
    prev = sample["net_input"]["prev_output_tokens"]
    with pytest.raises(ValueError, match="incremental decoding uses plain positions"):
        model.decoder(prev[:, :1], model.encoder(sample["net_input"]["src_tokens"]), incremental_state={},
                      position_offsets=torch.ones_like(prev[:, :1]))


def translate(model, task, sample):
    """Beam search (2) as fairseq-generate runs it: best hypothesis and its scores."""
    generator = SequenceGenerator([model], task.target_dictionary, beam_size=2, max_len_b=6)
    model.eval()
    with torch.no_grad():
        hypos = generator.generate([model], sample)
    return [h[0]["tokens"].tolist() for h in hypos], torch.cat([h[0]["positional_scores"] for h in hypos])


def test_perspe_changes_translations_only_through_training(data_dir):
    """Same start, same batches, no dropout: perSPE training moves the weights away
    from SPE training (so it is not SPE), yet the perSPE model translates exactly
    like an SPE model with its weights (generation uses plain positions)."""
    no_dropout = ("--dropout", "0", "--criterion", "perspe_label_smoothed_cross_entropy",
                  "--label-smoothing", "0.1")
    spe, task, args = build(data_dir, "--encoder-pos", "spe", "--decoder-pos", "spe", *no_dropout)
    perspe, _, _ = build(data_dir, "--encoder-pos", "spe", "--decoder-pos", "perspe",
                         *no_dropout, seed=2)
    perspe.load_state_dict(spe.state_dict(), strict=True)  # perSPE adds no parameters
    criterion = task.build_criterion(args)
    sample = batch(task)
    for model in (spe, perspe):
        optimizer = torch.optim.SGD(model.parameters(), lr=0.5)
        model.train()
        for step in range(3):
            torch.manual_seed(step)  # as fairseq: seed + update number
            optimizer.zero_grad()
            criterion(model, sample)[0].backward()
            optimizer.step()
    moved = max((a - b).abs().max().item()
                for a, b in zip(spe.parameters(), perspe.parameters()))
    assert moved > 1e-3, "perSPE training gave the weights SPE training gives"

    spe_like, _, _ = build(data_dir, "--encoder-pos", "spe", "--decoder-pos", "spe", seed=3)
    spe_like.load_state_dict(perspe.state_dict(), strict=True)
    tokens, scores = translate(perspe, task, sample)
    tokens_spe_like, scores_spe_like = translate(spe_like, task, sample)
    assert tokens == tokens_spe_like
    torch.testing.assert_close(scores, scores_spe_like, rtol=0, atol=0)
    tokens_spe, scores_spe = translate(spe, task, sample)
    assert tokens_spe != tokens or not torch.allclose(scores, scores_spe, atol=1e-4)


# half precision

@pytest.mark.parametrize("encoder_pos,decoder_pos", COMBINATIONS)
def test_half_precision_training_forward(data_dir, encoder_pos, decoder_pos):
    """model.half() (what --fp16 does): a training forward with perturbed positions
    stays in float16 on every side (perSPE positions come in the table's dtype)."""
    model, task, args = build(data_dir, "--encoder-pos", encoder_pos, "--decoder-pos", decoder_pos,
                              "--perturb-range", "2")
    criterion = task.build_criterion(args)
    model.half().train()
    sample = batch(task)
    seen = []
    model.encoder.register_forward_hook(
        lambda module, args, out: seen.append(("encoder out", out["encoder_out"][0].dtype)))
    model.decoder.output_projection.register_forward_pre_hook(
        lambda module, args: seen.append(("decoder out", args[0].dtype)))
    with torch.no_grad():
        loss, _, _ = criterion(model, sample)
    assert seen == [("encoder out", torch.float16), ("decoder out", torch.float16)]
    assert torch.isfinite(loss)


@pytest.mark.parametrize("encoder_pos,decoder_pos", COMBINATIONS)
def test_bf16_autocast_training_step(data_dir, encoder_pos, decoder_pos):
    """bf16 autocast (--bf16 --amp's CPU equivalent): forward and backward are finite
    and every parameter gets a gradient."""
    model, task, args = build(data_dir, "--encoder-pos", encoder_pos, "--decoder-pos", decoder_pos,
                              "--perturb-range", "2")
    criterion = task.build_criterion(args)
    model.train()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        loss, _, _ = criterion(model, batch(task))
    loss.backward()
    assert torch.isfinite(loss)
    for name, p in model.named_parameters():
        assert p.grad is not None and torch.isfinite(p.grad).all(), name


# relative position bias tables

def rpe_table_keys(model):
    return [k for k in model.state_dict() if "relative_attention_bias" in k]


def test_rpe_table_is_shared_by_the_layers_of_each_side_as_in_t5(data_dir):
    model, task, _ = build(data_dir, "--encoder-pos", "rpe", "--decoder-pos", "rpe")
    assert rpe_table_keys(model) == ["encoder.relative_position_bias.relative_attention_bias.weight",
                                     "decoder.relative_position_bias.relative_attention_bias.weight"]
    for side in (model.encoder, model.decoder):
        for layer in side.layers:
            assert layer.self_attn.relative_position_bias is side.relative_position_bias
    # changing the one table changes every layer's logits
    net_input = batch(task)["net_input"]
    with torch.no_grad():
        before = model.encoder(net_input["src_tokens"], net_input["src_lengths"])["encoder_out"][0]
        model.encoder.relative_position_bias.relative_attention_bias.weight.normal_()
        after = model.encoder(net_input["src_tokens"], net_input["src_lengths"])["encoder_out"][0]
    assert (before - after).abs().max() > 1e-3
    half = model.half()
    assert half.encoder.layers[1].self_attn.relative_position_bias.relative_attention_bias.weight.dtype \
        == torch.float16


def test_rpe_per_layer_tables(data_dir):
    a, task, _ = build(data_dir, "--encoder-pos", "rpe", "--decoder-pos", "rpe", "--rpe-per-layer")
    b, _, _ = build(data_dir, "--encoder-pos", "rpe", "--decoder-pos", "rpe", "--rpe-per-layer",
                    seed=5)
    assert len(rpe_table_keys(a)) == 4  # one table per self-attention layer (2 + 2 tiny layers)
    b.load_state_dict(a.state_dict(), strict=True)
    net_input = batch(task)["net_input"]
    with torch.no_grad():
        torch.testing.assert_close(a(**net_input)[0], b(**net_input)[0])


def test_checkpoints_with_a_table_per_layer_load_into_the_default_model(data_dir):
    """Checkpoints saved before --rpe-per-layer existed have a table in every layer;
    fairseq builds their model shared (the arch default) and loads them into it."""
    old, task, _ = build(data_dir, "--encoder-pos", "rpe", "--decoder-pos", "rpe", "--rpe-per-layer")
    new, _, _ = build(data_dir, "--encoder-pos", "rpe", "--decoder-pos", "rpe", seed=4)
    new.load_state_dict(old.state_dict(), strict=True)  # fairseq's, with its upgrade step
    assert rpe_table_keys(new) == rpe_table_keys(old)
    net_input = batch(task)["net_input"]
    with torch.no_grad():
        torch.testing.assert_close(new(**net_input)[0], old(**net_input)[0])
