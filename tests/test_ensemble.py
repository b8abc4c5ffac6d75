"""LogitAveragingEnsemble: the paper's ensemble (scores averaged before the softmax) against
fairseq's (probabilities averaged), by hand and through beam search."""
import math

import torch
from fairseq.sequence_generator import EnsembleModel, SequenceGenerator

from fairseq_luong.modules.logit_averaging_ensemble import LogitAveragingEnsemble
from tests.helpers import build_model, random_batch

TINY = ["--encoder-embed-dim", "8", "--encoder-hidden-size", "8", "--decoder-embed-dim", "8",
        "--decoder-hidden-size", "8", "--init-uniform", "0.5"]


def models():
    torch.manual_seed(0)
    a, task, _ = build_model("luong_global_general", *TINY)
    b, _, _ = build_model("luong_localp", *TINY, "--local-window", "2")
    return a.eval(), b.eval(), task


@torch.no_grad()
def test_first_step_by_hand():
    a, b, task = models()
    batch = random_batch(task)
    net_input = {"src_tokens": batch["src_tokens"], "src_lengths": batch["src_lengths"]}
    tokens = batch["prev_output_tokens"][:, :1]  # BOS (= EOS) for every sentence
    z = [m.decoder(tokens, encoder_out=m.encoder(**net_input))[0][:, -1] for m in (a, b)]  # bsz x V
    for ensemble, want in (
        (LogitAveragingEnsemble([a, b]), torch.log_softmax((z[0] + z[1]) / 2, -1)),
        (EnsembleModel([a, b]), torch.logsumexp(torch.stack([torch.log_softmax(x, -1) for x in z]), 0) - math.log(2)),
    ):
        got, attn = ensemble.forward_decoder(tokens, ensemble.forward_encoder(net_input), [{}, {}])
        assert torch.allclose(got, want, atol=1e-6)
        assert attn.shape == batch["src_tokens"].shape
    encoded = EnsembleModel([a, b]).forward_encoder(net_input)
    paper, _ = LogitAveragingEnsemble([a, b]).forward_decoder(tokens, encoded, [{}, {}])
    fairseq, _ = EnsembleModel([a, b]).forward_decoder(tokens, encoded, [{}, {}])
    assert (paper - fairseq).abs().max() > 1e-3  # the two averages differ


@torch.no_grad()
def test_beam_search_with_a_model_twice_equals_the_model():
    """Each model keeps its own incremental state through beam search and its reordering."""
    a, b, task = models()
    batch = random_batch(task, srclens=(9, 5, 2))
    sample = {"net_input": {"src_tokens": batch["src_tokens"], "src_lengths": batch["src_lengths"]}}
    for model in (a, b):
        alone = SequenceGenerator([model], task.target_dictionary, beam_size=3, max_len_b=8).generate(None, sample)
        twice = SequenceGenerator(LogitAveragingEnsemble([model, model]), task.target_dictionary, beam_size=3,
                                  max_len_b=8).generate(None, sample)
        for x, y in zip(alone, twice):
            assert [h["tokens"].tolist() for h in x] == [h["tokens"].tolist() for h in y]
            assert torch.allclose(x[0]["positional_scores"], y[0]["positional_scores"], atol=1e-5)


def test_compare_ensembles_prints_each_member_and_both_ensembles(diagonal_model, tmp_path, capsys):
    """scripts/eval/compare_ensembles.py end to end on a checkpoint given twice: a row per
    member and per ensemble, every row the member's translation (an ensemble of one model
    twice is that model); a reference of another length is refused in one line."""
    import importlib.util
    import shutil

    import pytest

    from tests.helpers import REPO

    spec = importlib.util.spec_from_file_location("compare_ensembles",
                                                  REPO / "scripts" / "eval" / "compare_ensembles.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    paths = []
    for name in ("first", "second"):
        (tmp_path / name).mkdir()
        paths.append(str(shutil.copy(diagonal_model / "crafted.pt", tmp_path / name / "model.pt")))
    reference = diagonal_model / "raw" / "test.de"
    args = [str(diagonal_model / "bin"), "--dataset-impl", "raw", "--path", ":".join(paths), "--beam", "2",
            "--max-len-b", "8"]
    bench.main(args + ["--reference", str(reference)])
    rows = [line.split(" | ") for line in capsys.readouterr().out.splitlines() if line.startswith("| ")][1:]
    assert [r[0].lstrip("| ") for r in rows] == ["first", "second", "ensemble: mean of probabilities (fairseq)",
                                                 "ensemble: mean of scores before the softmax (paper)"]
    assert {r[1] for r in rows} == {rows[0][1]} and [r[2:4] for r in rows] == [["+0.00", "0"]] * 4
    short = tmp_path / "short.de"
    short.write_text("one line\n", encoding="utf-8")
    with pytest.raises(SystemExit, match=f"^error: {short} has 1 lines but subset 'test' has 6 sentences$"):
        bench.main(args + ["--reference", str(short)])
