"""Beam search's reorder keeps the per-sentence tensors where rows keep their sentence
(fairseq_luong/modules/steps/beam_rows.py): unit, equivalence and through fairseq's beam search."""
import pytest
import torch
from fairseq.sequence_generator import SequenceGenerator

from fairseq_luong.modules.steps import beam_rows
from fairseq_luong.modules.steps.beam_rows import SENTENCE, reorder_rows
from tests.helpers import build_model, random_batch

SIZES = ["--encoder-embed-dim", "8", "--encoder-hidden-size", "8", "--decoder-embed-dim", "8",
         "--decoder-hidden-size", "8", "--local-window", "2", "--init-uniform", "0.5"]
RNNSEARCH_SIZES = ["--encoder-embed-dim", "8", "--encoder-hidden-size", "7", "--decoder-embed-dim", "6",
                   "--decoder-hidden-size", "5", "--attention-dim", "4", "--maxout-dim", "3",
                   "--init-uniform", "0.5"]
VARIANTS = [
    ("luong_global_general", SIZES),
    ("luong_global_general", SIZES + ["--no-input-feed"]),
    ("luong_global_dot", SIZES),  # no keys: the memory alone
    ("luong_localp", SIZES + ["--encoder-bidirectional"]),
    ("luong_localm", SIZES + ["--reverse-source"]),
    ("rnnsearch_tiny", RNNSEARCH_SIZES),
]
IDS = [arch + "".join(extra[len(SIZES):] if arch.startswith("luong") else []).replace("--", "+")
       for arch, extra in VARIANTS]


def state_of(sentence):
    rows = len(sentence)
    return {
        "memory": torch.arange(rows * 2.0).view(rows, 2),
        "layers": torch.arange(rows * 3.0).view(3, rows),  # batch dimension 1
        "row": torch.arange(rows * 1.0),
        "nothing": None,
        SENTENCE: torch.tensor(sentence),
    }


def test_per_sentence_tensors_are_kept_only_while_every_row_keeps_its_sentence():
    state = state_of([0, 0, 1, 1])
    dims = {"layers": 1}
    within = torch.tensor([1, 1, 3, 2])
    kept = reorder_rows(state, within, per_sentence=("memory",), batch_dims=dims)
    assert kept["memory"] is state["memory"] and kept[SENTENCE] is state[SENTENCE]
    assert kept["row"].tolist() == [1.0, 1.0, 3.0, 2.0]
    assert torch.equal(kept["layers"], state["layers"][:, within])
    assert kept["nothing"] is None
    # across sentences, a shrinking batch (a sentence finished), or on a GPU: every tensor selected
    for order in (torch.tensor([2, 0, 3, 2]), torch.tensor([2, 3])):
        moved = reorder_rows(state, order, per_sentence=("memory",), batch_dims=dims)
        for key in ("memory", "row", SENTENCE):
            assert torch.equal(moved[key], state[key].index_select(0, order)), (order, key)
        assert torch.equal(moved["layers"], state["layers"][:, order])
    without = reorder_rows({k: v for k, v in state.items() if k != SENTENCE}, within, per_sentence=("memory",),
                           batch_dims=dims)
    assert torch.equal(without["memory"], state["memory"][within])


def test_without_a_host_read_every_tensor_is_selected(monkeypatch):
    monkeypatch.setattr(beam_rows, "reads_order_on_host", lambda new_order: False)
    state = state_of([0, 0, 1, 1])
    kept = reorder_rows(state, torch.tensor([1, 1, 3, 2]), per_sentence=("memory",), batch_dims={"layers": 1})
    assert kept["memory"] is not state["memory"]
    assert torch.equal(kept["memory"], state["memory"][[1, 1, 3, 2]])


def tiny(arch, extra):
    torch.manual_seed(0)
    model, task, _ = build_model(arch, *extra)
    return model.eval(), task


@pytest.mark.parametrize("arch,extra", VARIANTS, ids=IDS)
def test_incremental_decoding_through_reorders_within_each_sentence_equals_full_forward(arch, extra):
    """Beam search's shape: each sentence twice (rows of a sentence differ only in their
    target prefixes), then a reorder among each sentence's rows halfway: the per-row state
    moves, the source memory stays, and every step's scores are the full forward's."""
    model, task = tiny(arch, extra)
    batch = random_batch(task, srclens=(9, 5, 2), tgtlens=(7, 7, 7))
    expand = torch.tensor([0, 0, 1, 1, 2, 2])
    g = torch.Generator().manual_seed(1)
    prev = batch["prev_output_tokens"].index_select(0, expand)
    prev[:, 1:] = torch.randint(4, len(task.target_dictionary), (6, prev.size(1) - 1), generator=g)
    within = torch.tensor([1, 1, 2, 3, 5, 4])
    src = batch["src_tokens"].index_select(0, expand)
    lengths = batch["src_lengths"].index_select(0, expand)
    with torch.no_grad():
        ref_before = model(src, lengths, prev)[0]
        ref_after = model(src.index_select(0, within), lengths.index_select(0, within), prev.index_select(0, within))[0]
        enc = model.encoder.reorder_encoder_out(model.encoder(batch["src_tokens"], batch["src_lengths"]), expand)
        state = {}
        for t in range(prev.size(1)):
            if t == 3:
                memory = enc["encoder_out"]
                enc = model.encoder.reorder_encoder_out(enc, within)
                assert enc["encoder_out"] is memory  # kept: the same sentence's rows
                keys = model.decoder.get_cached_state(state).get("keys")
                model.decoder.reorder_incremental_state_scripting(state, within)
                assert model.decoder.get_cached_state(state).get("keys") is keys  # None for dot
                prev = prev.index_select(0, within)
            logits = model.decoder(prev[:, : t + 1], encoder_out=enc, incremental_state=state)[0]
            want = ref_after if t >= 3 else ref_before
            assert (logits[:, 0] - want[:, t]).abs().max() < 1e-5, f"step {t}"


@pytest.mark.parametrize("arch,extra", VARIANTS, ids=IDS)
def test_beam_search_translates_as_with_every_tensor_reordered(arch, extra, monkeypatch):
    """fairseq's beam search, sentences ending at different steps (the batch shrinks): the
    same hypotheses and scores, to the bit, as when every reorder selects every tensor."""
    model, task = tiny(arch, extra)
    batch = random_batch(task, bsz=6, srclens=(9, 5, 2, 7, 4, 8), tgtlens=(3,) * 6)
    sample = {"net_input": {"src_tokens": batch["src_tokens"], "src_lengths": batch["src_lengths"]}}
    end_at_different_steps(model, task, sample)
    decisions = []
    check = beam_rows.rows_keep_their_sentence
    monkeypatch.setattr(beam_rows, "rows_keep_their_sentence",
                        lambda state, order: decisions.append(check(state, order)) or decisions[-1])

    kept = translate(model, task, sample)
    assert True in decisions and False in decisions[1:], decisions  # kept, and a batch that shrank
    monkeypatch.setattr(beam_rows, "reads_order_on_host", lambda new_order: False)
    decisions.clear()
    selected = translate(model, task, sample)
    assert True not in decisions
    for a, b in zip(kept, selected):
        assert [h["tokens"].tolist() for h in a] == [h["tokens"].tolist() for h in b]
        assert all(torch.equal(x["positional_scores"], y["positional_scores"]) for x, y in zip(a, b))


@torch.no_grad()
def translate(model, task, sample):
    return SequenceGenerator([model], task.target_dictionary, beam_size=3, max_len_b=12).generate([model], sample)


@torch.no_grad()
def end_at_different_steps(model, task, sample):
    """Raises the untrained model's EOS score (its output bias) until some sentence of the
    batch finishes before the others, so that the batch shrinks during the search."""
    bias = model.decoder.output_projection_params()[1]
    eos = task.target_dictionary.eos()
    reorder = model.encoder.reorder_encoder_out
    rows = []
    model.encoder.reorder_encoder_out = lambda out, order: rows.append(order.numel()) or reorder(out, order)
    try:
        for _ in range(100):
            rows.clear()
            translate(model, task, sample)
            if min(rows) < max(rows):
                return
            bias[eos] += 0.02
    finally:
        del model.encoder.reorder_encoder_out
    raise AssertionError("no EOS bias up to +2 makes a sentence finish before the others")
