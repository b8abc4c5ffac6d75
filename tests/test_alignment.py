"""Word alignments: AER (scripts/aer.py), forced alignment (scripts/force_align.py),
footnote 14's reading of the attention rows, subword folding."""
import random
import runpy
import sys

import pytest
import torch

from fairseq_luong.analysis.alignment import (
    Links,
    aer_counts,
    fold_into_words,
    one_to_one_links,
    parse_links,
    rows_per_target_token,
    word_groups,
)
from tests.helpers import REPO, SHARED_DATA, build_model, run

KFTT = SHARED_DATA / "kftt_gold_align_ja_en"


def script(name):
    """A script's main(argv), to run it in this process (its if __name__ block is skipped)."""
    return runpy.run_path(str(REPO / "scripts" / f"{name}.py"), run_name=f"script_{name}")["main"]


def test_aer_agrees_with_nltk_on_random_link_sets():
    from nltk.translate import Alignment
    from nltk.translate.metrics import alignment_error_rate

    rng = random.Random(0)
    for _ in range(200):
        grid = [(i, j) for i in range(rng.randint(1, 7)) for j in range(rng.randint(1, 7))]
        sure = set(rng.sample(grid, rng.randint(1, len(grid))))
        possible = sure | set(rng.sample(grid, rng.randint(0, len(grid))))
        test = set(rng.sample(grid, rng.randint(0, len(grid))))
        want = alignment_error_rate(Alignment(sure), Alignment(test), Alignment(possible))
        got = aer_counts([Links(sure, possible - sure)], [test]).aer
        assert got == pytest.approx(want, abs=1e-12)


def test_parse_links_indexing_sides_and_errors():
    assert parse_links("1-2 3p1", "f:1", one_based=True, target_first=False) == Links({(0, 1)}, {(2, 0)})
    assert parse_links("1-2 3p1", "f:1", one_based=False, target_first=True) == Links({(2, 1)}, {(1, 3)})
    assert parse_links("0-0 0p0", "f:1", one_based=False, target_first=False) == Links({(0, 0)}, set())
    with pytest.raises(ValueError, match="f:3: malformed link '1-x'"):
        parse_links("1-1 1-x", "f:3", True, False)
    with pytest.raises(ValueError, match="f:4: link '0-2' has position 0"):
        parse_links("0-2", "f:4", True, False)


def test_aer_script(tmp_path, capsys):
    """Gold against itself is 0; a known AER; errors name file and line."""
    aer = script("aer")
    gold = tmp_path / "gold"
    gold.write_text("1-1 2-2 2p3\n1-2\n\n", encoding="utf-8")
    test = tmp_path / "test"
    test.write_text("0-0 1-2 0-1\n0-1\n\n", encoding="utf-8")  # 0-based: 1-1, 2-3 (possible), 1-2
    aer([str(gold), str(gold), "--test-index", "1"])
    assert "AER = 0.0000" in capsys.readouterr().out
    aer([str(gold), str(test)])  # A = 4, S = 3, A&S = 2 (1-1, 1-2), A&P = 3: 1 - 5/7
    assert f"AER = {1 - 5 / 7:.4f}  (precision 0.7500, recall 0.6667" in capsys.readouterr().out
    first, second = tmp_path / "first", tmp_path / "second"
    first.write_text("a b\nc\n\n", encoding="utf-8")
    second.write_text("x y\ny z\n\n", encoding="utf-8")
    with pytest.raises(SystemExit, match=f"{gold}:1: link\\(s\\) \\[\\(1, 2\\)\\] .*outside"):
        aer([str(gold), str(test), "--first-text", str(first), "--second-text", str(second)])
    swapped = tmp_path / "swapped"
    swapped.write_text("0-0 1-1\n1-0\n\n", encoding="utf-8")  # second side first
    aer([str(gold), str(swapped), "--swap-test", "--first-text", str(first), "--second-text", str(second),
         "--drop-out-of-range-gold"])
    captured = capsys.readouterr()
    assert f"{gold}:1: dropped gold link 2-3" in captured.err and "AER = 0.0000" in captured.out
    bad = tmp_path / "bad"
    bad.write_text("0-0\n0_1\n\n", encoding="utf-8")
    with pytest.raises(SystemExit, match=f"{bad}:2: malformed link '0_1'"):
        aer([str(gold), str(bad)])
    bad.write_text("0-0\n", encoding="utf-8")
    with pytest.raises(SystemExit, match="has 3 lines but .* has 1"):
        aer([str(gold), str(bad)])


@pytest.mark.skipif(not KFTT.exists(), reason=f"{KFTT} not found")
def test_kftt_gold_against_itself(capsys):
    gold = str(KFTT / "jaen.gold")
    script("aer")([gold, gold, "--test-index", "1"])
    assert capsys.readouterr().out.startswith("AER = 0.0000  (precision 1.0000, recall 1.0000; 582 sentences")


def test_footnote_14_rows_by_hand():
    """Row t is computed reading y_{t-1} and predicting y_t: fairseq gives word k row k,
    the paper (content-based scores) row k + 1."""
    attn = torch.zeros(4, 3)  # 3 target words + EOS row, 3 source words
    for row, src in enumerate([2, 0, 1, 2]):
        attn[row, src] = 1.0
    assert one_to_one_links(rows_per_target_token(attn, 3, input_word=False)) == {(2, 0), (0, 1), (1, 2)}
    assert one_to_one_links(rows_per_target_token(attn, 3, input_word=True)) == {(0, 0), (1, 1), (2, 2)}


@pytest.mark.parametrize("arch,input_word", [("luong_global_general", True), ("luong_localp", True),
                                             ("luong_global_location", False), ("luong_base", False),
                                             ("rnnsearch_tiny", False), ("lstm", False)])
def test_forced_attention_reads_rows_as_the_model_declares(arch, input_word):
    from fairseq_luong.analysis.forced_attention import aligns_input_word, forced_attention

    torch.manual_seed(0)
    sizes = [] if arch.startswith("rnnsearch") else ["--encoder-embed-dim", "8", "--encoder-hidden-size", "8",
                                                     "--decoder-embed-dim", "8", "--decoder-hidden-size", "8"]
    if arch == "lstm":  # fairseq's own: its decoder returns the attention tensor itself
        sizes += ["--decoder-out-embed-dim", "8"]
    model, task, _ = build_model(arch, *sizes)
    model.eval()
    assert aligns_input_word(model) == input_word
    if arch == "luong_base":
        return
    src_d, tgt_d = task.source_dictionary, task.target_dictionary
    pairs = [("w3 w5 w7 w1", "w2 w9 w4"), ("w8", "w6 w6")]
    got = {}
    for paper in (False, True):
        got[paper] = dict(forced_attention([model], src_d, tgt_d, pairs, paper, batch_size=2))
    for i, (s, t) in enumerate(pairs):
        src = src_d.encode_line(s, add_if_not_exist=False).long().unsqueeze(0)
        tgt = tgt_d.encode_line(t, add_if_not_exist=False).long()
        prev = torch.cat([tgt[-1:], tgt[:-1]]).unsqueeze(0)
        with torch.no_grad():
            extra = model(src, torch.tensor([src.size(1)]), prev)[1]
            attn = (extra["attn"][0] if isinstance(extra, dict) else extra)[0, :, :-1]  # EOS column dropped
        n = len(t.split())
        assert torch.allclose(got[False][i].rows, attn[:n], atol=1e-6)
        assert torch.allclose(got[True][i].rows, attn[1:] if input_word else attn[:n], atol=1e-6)


def test_subword_folding_by_hand():
    assert word_groups(["\u2581a", "b", "\u2581c", "\u2581", "d"], "\u2581") == [0, 0, 1, 2, 2]
    assert word_groups(["x@@", "y", "z@@", "w@@", "v"], "@@") == [0, 0, 1, 1, 1]
    weights = torch.tensor([[0.1, 0.2, 0.7], [0.5, 0.4, 0.1], [0.3, 0.3, 0.4]])  # 3 target x 3 source pieces
    words = fold_into_words(weights, src_groups=[0, 0, 1], tgt_groups=[0, 0, 1])
    # source word 0 sums pieces 0-1; target word 0 averages rows 0-1
    assert torch.allclose(words, torch.tensor([[(0.3 + 0.9) / 2, (0.7 + 0.1) / 2], [0.6, 0.4]]))
    assert one_to_one_links(words) == {(0, 0), (0, 1)}


@pytest.mark.parametrize("paper_convention", [False, True])
def test_force_align_links_every_sentence_in_range(diagonal_model, tmp_path, paper_convention):
    """The crafted model's step t attends to source word t alone (the EOS from t = n on):
    fairseq's rows link target word j to source word j, footnote 14's (local-m with the
    general score is content-based) to word j + 1; a word whose row sits on the EOS gets
    source word 0 (the EOS column is dropped). Empty lines give empty lines; an ensemble
    of the model with itself (attention averaged) changes nothing."""
    src = ["twenty zebra one", "", "seven okapis and twenty lemurs", "quagga", "cats dogs"]
    tgt = ["Zwanzig Zebra Eins", "Leer", "", "Quagga Quagga", "Katzen Hunde Und Mehr"]
    (tmp_path / "src").write_text("\n".join(src) + "\n", encoding="utf-8")
    (tmp_path / "tgt").write_text("\n".join(tgt) + "\n", encoding="utf-8")
    ckpt = str(diagonal_model / "crafted.pt")
    out = run([sys.executable, str(REPO / "scripts" / "force_align.py"), str(diagonal_model / "bin"),
               "--path", f"{ckpt}:{ckpt}", "--source", str(tmp_path / "src"), "--target", str(tmp_path / "tgt"),
               *(["--paper-convention"] if paper_convention else []), "--batch-size", "2"]).stdout
    lines = out.split("\n")[:-1]
    assert len(lines) == len(src)
    for s, t, line in zip(src, tgt, lines):
        n, m = len(s.split()), len(t.split())
        attended = [j + paper_convention for j in range(m)]
        want = " ".join(f"{i if i < n else 0}-{j}" for j, i in enumerate(attended)) if n and m else ""
        assert line == want, (s, t, line)
