"""perspe_label_smoothed_cross_entropy: how offsets are drawn and where they go."""
import pytest
import torch
from fairseq import options, tasks
from fairseq.data import data_utils

from tests.helpers import USER_DIR, save_dictionaries

# phrase ids of three target sentences (the last id is </s>'s own)
CHUNKS = [[0, 0, 1, 1, 1, 2, 3], [0, 1, 1, 2], [0, 0, 0, 0, 1]]


@pytest.fixture(autouse=True)
def _one_thread(one_thread):
    """Tiny models: one thread beats two contending ones (conftest's one_thread)."""


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    path = tmp_path_factory.mktemp("perspe_criterion_dicts")
    save_dictionaries(path, {"en": 30, "ja": 30})
    return str(path)


def build(data_dir, *extra, encoder_pos="spe", decoder_pos="perspe"):
    parser = options.get_training_parser()
    args = options.parse_args_and_arch(parser, [
        data_dir, "--user-dir", USER_DIR, "--task", "translation_chunks", "-s", "en", "-t", "ja",
        "--arch", "transformer_perspe_tiny", "--encoder-pos", encoder_pos,
        "--decoder-pos", decoder_pos, "--criterion", "perspe_label_smoothed_cross_entropy",
        "--label-smoothing", "0.1", *extra])
    torch.manual_seed(0)
    task = tasks.setup_task(args)
    return task.build_model(args), task.build_criterion(args), task


def shifted(chunks):
    """The ids of the decoder inputs </s> t_1 ... t_{n-1}: -1 for the BOS, no </s> id."""
    return [-1] + chunks[:-1]


def make_sample(task, chunks=CHUNKS, left_pad_target=False, seed=0):
    """A batch as TargetChunksDataset collates it: prev_output_chunks aligned with
    prev_output_tokens."""
    src_d, tgt_d = task.source_dictionary, task.target_dictionary
    g = torch.Generator().manual_seed(seed)
    tgts = [torch.cat([torch.randint(tgt_d.nspecial, len(tgt_d), (len(c) - 1,), generator=g),
                       torch.tensor([tgt_d.eos()])]) for c in chunks]
    srcs = [torch.cat([torch.randint(src_d.nspecial, len(src_d), (n,), generator=g),
                       torch.tensor([src_d.eos()])]) for n in (4, 6, 2)[:len(chunks)]]

    def pad(seqs, value, left, **kw):
        return data_utils.collate_tokens(seqs, value, tgt_d.eos(), left_pad=left, **kw)

    return {
        "id": torch.arange(len(chunks)),
        "nsentences": len(chunks),
        "ntokens": sum(len(c) for c in chunks),
        "net_input": {
            "src_tokens": pad(srcs, src_d.pad(), True),
            "src_lengths": torch.tensor([len(s) for s in srcs]),
            "prev_output_tokens": pad(tgts, tgt_d.pad(), left_pad_target, move_eos_to_beginning=True),
        },
        "target": pad(tgts, tgt_d.pad(), left_pad_target),
        "prev_output_chunks": pad([torch.tensor(shifted(c)) for c in chunks], -1, left_pad_target),
    }


def decoder_offsets(criterion, model, sample):
    return criterion.position_offsets(model, sample)["tgt_position_offsets"]


@pytest.mark.parametrize("left_pad_target", [False, True])
def test_one_offset_per_phrase_and_none_for_bos(data_dir, left_pad_target):
    model, criterion, task = build(data_dir, "--perturb-range", "2")
    sample = make_sample(task, left_pad_target=left_pad_target)
    prev = sample["net_input"]["prev_output_tokens"]
    eos, pad = task.target_dictionary.eos(), task.target_dictionary.pad()
    for _ in range(20):
        offsets = decoder_offsets(criterion, model, sample)
        assert offsets.shape == prev.shape
        assert offsets.abs().max() <= 2
        assert offsets[prev.eq(eos) | prev.eq(pad)].eq(0).all()  # BOS and padding
        for row, chunks in enumerate(CHUNKS):
            real = offsets[row][prev[row].ne(pad)]  # BOS, then target tokens 1..n-1
            assert real[0] == 0
            for t in range(1, len(chunks)):  # decoder input t holds target token t - 1
                for u in range(1, len(chunks)):
                    if chunks[t - 1] == chunks[u - 1]:
                        assert real[t] == real[u]


def test_offsets_are_uniform_over_the_range(data_dir):
    model, criterion, task = build(data_dir, "--perturb-range", "2")
    chunks = [list(range(40)) + [40]] * 3  # 40 one-token phrases a sentence
    sample = make_sample(task, chunks=chunks)
    torch.manual_seed(1)
    draws = torch.cat([decoder_offsets(criterion, model, sample)[:, 1:-1].reshape(-1)
                       for _ in range(100)])  # 11700 phrase offsets
    freqs = torch.bincount(draws + 2, minlength=5).float() / len(draws)
    assert len(freqs) == 5  # nothing outside [-2, 2]
    assert (freqs - 0.2).abs().max() < 0.02, freqs


def test_new_offsets_each_time_a_sentence_is_seen(data_dir):
    """fairseq reseeds torch with seed + update number, so each epoch draws anew."""
    model, criterion, task = build(data_dir)
    sample = make_sample(task, chunks=[list(range(30)) + [30]])
    torch.manual_seed(1 + 10)  # update 10, in epoch 1
    first = decoder_offsets(criterion, model, sample)
    torch.manual_seed(1 + 25)  # update 25, the same sentence in epoch 2
    second = decoder_offsets(criterion, model, sample)
    assert not torch.equal(first, second)


def spy_on_forward(model):
    seen = []
    forward = model.forward

    def spy(*args, **kwargs):
        seen.append({k: kwargs.get(k) for k in ("src_position_offsets", "tgt_position_offsets")})
        return forward(*args, **kwargs)

    model.forward = spy
    return seen


def test_offsets_in_training_only(data_dir):
    model, criterion, task = build(data_dir)
    seen = spy_on_forward(model)
    sample = make_sample(task)
    model.train()
    loss, _, _ = criterion(model, sample)
    assert torch.isfinite(loss)
    assert seen[-1]["tgt_position_offsets"] is not None and seen[-1]["src_position_offsets"] is None
    model.eval()
    with torch.no_grad():
        criterion(model, sample)  # validation
    assert seen[-1] == {"src_position_offsets": None, "tgt_position_offsets": None}


def test_validation_loss_is_unperturbed(data_dir):
    model, criterion, task = build(data_dir)
    sample = make_sample(task)
    model.eval()
    with torch.no_grad():
        losses = {criterion(model, sample)[0].item() for _ in range(3)}
    assert len(losses) == 1


def test_token_mode_draws_every_token_independently(data_dir):
    model, criterion, task = build(data_dir, "--perturb-unit", "token", "--perturb-range", "1")
    sample = make_sample(task, chunks=[[0] * 30 + [1]])  # one 30-token phrase
    del sample["prev_output_chunks"]  # token mode needs no chunk files
    offsets = decoder_offsets(criterion, model, sample)[0]
    assert offsets[0] == 0  # BOS
    assert len(set(offsets[1:].tolist())) == 3  # phrase mode would give one value


def test_phrase_mode_needs_chunk_ids(data_dir):
    model, criterion, task = build(data_dir)
    sample = make_sample(task)
    del sample["prev_output_chunks"]
    model.train()
    with pytest.raises(ValueError, match="translation_chunks"):
        criterion(model, sample)


def test_source_side_gets_token_offsets(data_dir):
    """--encoder-pos perspe: each real source token an offset of its own, uniform in
    [-k, k] (so non-zero 6 times in 7 for k = 3), padding none."""
    model, criterion, task = build(data_dir, "--perturb-range", "3", encoder_pos="perspe",
                                   decoder_pos="spe")
    sample = make_sample(task)
    src = sample["net_input"]["src_tokens"]  # 3 x 7, left-padded
    real = src.ne(task.source_dictionary.pad())
    torch.manual_seed(2)
    draws = []
    for _ in range(400):
        offsets = criterion.position_offsets(model, sample)
        assert set(offsets) == {"src_position_offsets"}
        assert offsets["src_position_offsets"][~real].eq(0).all()
        draws.append(offsets["src_position_offsets"])
    draws = torch.stack(draws)  # 400 x 3 x 7
    values = draws[:, real]  # 400 x real tokens
    freqs = torch.bincount(values.reshape(-1) + 3, minlength=7).float() / values.numel()
    assert len(freqs) == 7 and (freqs - 1 / 7).abs().max() < 0.02, freqs
    # neighbours are drawn independently: equal one time in 7
    same = (draws[:, 0, -2] == draws[:, 0, -1]).float().mean()
    assert abs(same - 1 / 7) < 0.06, same


def test_phrases_of_one_sentence_are_drawn_independently(data_dir):
    """perSPE draws per phrase, not per sentence: with k = 1 two phrases of one
    sentence (and the same phrase of two sentences) share an offset one time in
    three, and each pair of offsets is equally likely. A whole-sentence shift
    would give them the same offset every time."""
    model, criterion, task = build(data_dir, "--perturb-range", "1")
    chunks = [[0, 0, 1, 1, 1, 2, 3], [0, 1, 1, 2, 2, 3]]
    sample = make_sample(task, chunks=chunks)
    torch.manual_seed(3)
    draws = torch.stack([decoder_offsets(criterion, model, sample) for _ in range(3000)])
    # decoder inputs 1 and 3 hold target tokens 0 and 2: phrases 0 and 1 of
    # sentence 0; inputs 1 and 2 hold phrases 0 and 1 of sentence 1
    pairs = {
        "phrases 0, 1 of sentence 0": (draws[:, 0, 1], draws[:, 0, 3]),
        "phrases 1, 2 of sentence 0": (draws[:, 0, 3], draws[:, 0, 6]),
        "phrases 0, 1 of sentence 1": (draws[:, 1, 1], draws[:, 1, 2]),
        "phrase 0 of sentences 0, 1": (draws[:, 0, 1], draws[:, 1, 1]),
    }
    for name, (a, b) in pairs.items():
        same = (a == b).float().mean().item()
        assert abs(same - 1 / 3) < 0.04, f"{name}: equal in {same:.3f} of the draws"
        joint = torch.bincount((a + 1) * 3 + (b + 1), minlength=9).float() / len(a)
        assert (joint - 1 / 9).abs().max() < 0.03, f"{name}: {joint}"


def test_model_without_perturbable_positions_is_refused(data_dir):
    parser = options.get_training_parser()
    args = options.parse_args_and_arch(parser, [
        data_dir, "--user-dir", USER_DIR, "--task", "translation_chunks", "-s", "en", "-t", "ja",
        "--arch", "transformer_tiny", "--criterion", "perspe_label_smoothed_cross_entropy"])
    task = tasks.setup_task(args)
    model, criterion = task.build_model(args), task.build_criterion(args)
    model.train()
    with pytest.raises(ValueError, match="transformer_perspe"):
        criterion(model, make_sample(task))
