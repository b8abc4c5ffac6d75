"""Word alignments: AER (scripts/eval/aer.py), forced alignment (scripts/eval/force_align.py),
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
    return runpy.run_path(str(REPO / "scripts" / "eval" / f"{name}.py"), run_name=f"script_{name}")["main"]


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
    aer([str(gold), str(gold)])
    assert capsys.readouterr().out == (
        "AER = 0.0000  (precision 1.0000, recall 1.0000; 3 sentences, |A| = 4, |S| = 3, |P| = 4; gold 1-indexed "
        "(no position 0 in it), test 1-indexed (no position 0 in it), the gold's order)\n")
    aer([str(gold), str(test)])  # A = 4, S = 3, A&S = 2 (1-1, 1-2), A&P = 3: 1 - 5/7
    assert capsys.readouterr().out == (
        f"AER = {1 - 5 / 7:.4f}  (precision 0.7500, recall 0.6667; 3 sentences, |A| = 4, |S| = 3, |P| = 4; gold "
        "1-indexed (no position 0 in it), test 0-indexed (it has position 0), the gold's order)\n")
    aer([str(gold), str(gold), "--test-index", "0"])  # what is said is done, and named: A&S = A&P = 1 (1-1)
    out = capsys.readouterr().out
    assert out.startswith(f"AER = {1 - 2 / 7:.4f}") and "test 0-indexed (--test-index 0)" in out
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
def test_kftt_gold_against_itself_and_the_diagonal_against_itself(tmp_path, capsys):
    """Two files in the same format give AER 0 with no option: the 1-indexed TALP gold (it read
    TEST as 0-indexed and gave 0.8183 here, 0.5988 on RWTH's De-En set), and 0-indexed
    Pharaoh links (diagonal_align.py's, as force_align.py's)."""
    gold = str(KFTT / "jaen.gold")
    script("aer")([gold, gold])
    assert capsys.readouterr().out == (
        "AER = 0.0000  (precision 1.0000, recall 1.0000; 582 sentences, |A| = 13562, |S| = 13562, |P| = 13562; "
        "gold 1-indexed (no position 0 in it), test 1-indexed (no position 0 in it), the gold's order)\n")
    diagonal = tmp_path / "diagonal.align"
    script("diagonal_align")(["--source", str(KFTT / "jaen.ja"), "--target", str(KFTT / "jaen.en")])
    printed = capsys.readouterr()
    diagonal.write_text(printed.out, encoding="utf-8")
    n_links = sum(len(line.split()) for line in diagonal.read_text(encoding="utf-8").splitlines())
    assert printed.err == (f"diagonal_align.py: 582 sentences, {n_links} links: 0-indexed i-j, i the source word "
                           f"({KFTT / 'jaen.ja'}), j the target word ({KFTT / 'jaen.en'}), target word j -> source "
                           "word floor((j + 0.5) S / T)\n")
    texts = ["--first-text", str(KFTT / "jaen.ja"), "--second-text", str(KFTT / "jaen.en")]
    script("aer")([str(diagonal), str(diagonal), *texts])
    assert capsys.readouterr().out.startswith(
        f"AER = 0.0000  (precision 1.0000, recall 1.0000; 582 sentences, |A| = {n_links}, |S| = {n_links}, "
        f"|P| = {n_links}; gold 0-indexed (it has position 0), test 0-indexed (it has position 0), the gold's order)")
    script("aer")([gold, str(diagonal), *texts, "--drop-out-of-range-gold"])  # docs/analysis.md's baseline
    assert capsys.readouterr().out.startswith("AER = 0.8888  (precision 0.1154, recall 0.1073; 582 sentences")


def test_aer_names_what_the_files_cannot_show(tmp_path):
    """With the sentences: a file with neither position 0 nor a last word counted from 1 could
    be 0- or 1-indexed; test links that fit only with the sides swapped need --swap-test."""
    aer = script("aer")
    first, second = tmp_path / "first", tmp_path / "second"
    first.write_text("a b c\nd e f g\n", encoding="utf-8")  # the gold's first side: 3 and 4 words
    second.write_text("x y\nz w\n", encoding="utf-8")  # its second side: 2 and 2 words
    texts = ["--first-text", str(first), "--second-text", str(second)]
    gold = tmp_path / "gold"
    gold.write_text("1-1 3-2\n4p2 2-1\n", encoding="utf-8")  # 1-indexed: 3-2 links the last words
    ambiguous = tmp_path / "ambiguous"
    ambiguous.write_text("1-1\n2-1 1p1\n", encoding="utf-8")  # fits either way: no 0, no last word
    with pytest.raises(SystemExit, match=(
            f"^error: {ambiguous}: cannot tell whether its links are 0- or 1-indexed: none has position 0 .*; "
            "give --test-index 0 or --test-index 1$")):
        aer([str(gold), str(ambiguous), *texts])
    aer([str(gold), str(ambiguous), *texts, "--test-index", "1"])  # told: no question
    swapped = tmp_path / "swapped"  # 0-indexed, second side first
    swapped.write_text("0-0 1-2\n0-3 1-1\n", encoding="utf-8")
    with pytest.raises(SystemExit, match=(
            f"^error: {swapped}: read in the gold's order, 2 of its links fall outside their sentences \\(first: "
            "line 1\\); read the other way round, none does: give --swap-test$")):
        aer([str(gold), str(swapped), *texts])
    in_order = tmp_path / "in_order"
    in_order.write_text("0-0 2-1\n3-1 1-0\n", encoding="utf-8")
    with pytest.raises(SystemExit, match=(
            f"^error: {in_order}: read with --swap-test, 2 of its links fall outside their sentences \\(first: line "
            "1\\); read in the gold's order, none does: drop --swap-test$")):
        aer([str(gold), str(in_order), *texts, "--swap-test"])
    aer([str(gold), str(swapped), *texts, "--swap-test"])
    aer([str(gold), str(in_order), *texts])


def test_aer_and_the_link_readers_start_without_torch():
    """aer.py, the link readers and the segmenter import neither torch nor fairseq (2 s a
    process): the in-form study runs aer.py once per model and convention."""
    code = ("import sys, fairseq_luong.analysis.alignment, fairseq_luong.analysis.segmentation; "
            "print([m for m in ('torch', 'fairseq') if m in sys.modules])")
    assert run([sys.executable, "-c", code], cwd=REPO).stdout.strip() == "[]"


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


def test_segmenter_keeps_one_group_per_word_when_normalisation_splits_a_word(tmp_path):
    """KFTT gold line 49 has the mojibake word "\u00e6\u00b4\u00aa": NFKC turns "\u00b4" into a space and
    an accent, so encoding the line whole gives one word more than it has."""
    import sentencepiece as spm

    from fairseq_luong.analysis.segmentation import Segmenter

    text = tmp_path / "text"
    text.write_text("\n".join(f"the chinese character number {i} of ming" for i in range(200)) + "\n")
    spm.SentencePieceTrainer.train(input=str(text), model_prefix=str(tmp_path / "m"), vocab_size=30,
                                   character_coverage=1.0, minloglevel=2)
    line = "the character \u00e6\u00b4\u00aa of ming"
    pieces, groups = Segmenter(str(tmp_path / "m.model"))(line, "gold:49")
    assert len(pieces.split()) == len(groups) and groups == sorted(groups)
    assert sorted(set(groups)) == [0, 1, 2, 3, 4]
    whole = spm.SentencePieceProcessor(model_file=str(tmp_path / "m.model")).encode(line, out_type=str)
    assert max(word_groups(whole, "\u2581")) + 1 == 6  # what the old line-at-once grouping saw


@pytest.mark.parametrize("paper_convention", [False, True])
def test_force_align_links_every_sentence_in_range(diagonal_model, tmp_path, capsys, paper_convention):
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
    script("force_align")([str(diagonal_model / "bin"), "--path", f"{ckpt}:{ckpt}", "--source", str(tmp_path / "src"),
                           "--target", str(tmp_path / "tgt"), *(["--paper-convention"] if paper_convention else []),
                           "--batch-size", "2"])
    proc = capsys.readouterr()
    lines = proc.out.split("\n")[:-1]
    assert len(lines) == len(src)
    for s, t, line in zip(src, tgt, lines):
        n, m = len(s.split()), len(t.split())
        attended = [j + paper_convention for j in range(m)]
        want = " ".join(f"{i if i < n else 0}-{j}" for j, i in enumerate(attended)) if n and m else ""
        assert line == want, (s, t, line)
    # the result line names every convention that decided the links
    rows = ("footnote 14 (--paper-convention): 2 of 2 model(s) read a_t as the input word y_{t-1}'s (content-based "
            "scores), the others as y_t's" if paper_convention else
            "a_t aligns the predicted word y_t, as fairseq's --print-alignment (not --paper-convention)")
    assert proc.err.splitlines()[-1] == (
        f"force_align.py: 5 sentences, {sum(len(line.split()) for line in lines)} links to stdout: 0-indexed i-j, i "
        f"the source word ({tmp_path / 'src'}), j the target word ({tmp_path / 'tgt'}), one link per target word; "
        f"rows: {rows}; words as in the text, one token each; attention averaged over 2 models")


def test_lexicon_alignment_counts_links_to_a_partner(tmp_path):
    """scripts/eval/lexicon_alignment.py (run.sh's alignment line): each hypothesis word with a
    lexicon partner is right when its A- link points at that partner; words without one
    (und) are not counted."""
    import subprocess
    import sys

    from tests.helpers import REPO

    gen = tmp_path / "generate.out"
    gen.write_text("S-0\ttwenty one cats\nH-0\t-0.1\tein und zwanzig katzen\nD-0\t-0.1\tein und zwanzig katzen\n"
                   "A-0\t1-0 0-1 0-2 0-3\n"  # ein<-one right, und (not counted), zwanzig<-twenty right, katzen wrong
                   "S-1\tfour hundred\nH-1\t-0.2\tvier hundert\nA-1\t0-0 0-1\n", encoding="utf-8")  # hundert wrong
    src = tmp_path / "test.en"
    src.write_text("twenty one cats\nfour hundred\n", encoding="utf-8")
    lex = tmp_path / "lexicon.tsv"
    lex.write_text("ein\tone\nzwanzig\ttwenty\nkatzen\tcats\nvier\tfour\nhundert\thundred\n", encoding="utf-8")
    tool = [sys.executable, str(REPO / "scripts" / "eval" / "lexicon_alignment.py"), str(gen), "--source", str(src),
            "--lexicon", str(lex)]
    proc = subprocess.run(tool, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("alignment: 60.0% of the 5 hypothesis words with a lexicon partner are linked to "
                                  "it (3; ")
    assert "most often wrong: katzen<-twenty (1), hundert<-four (1)" in proc.stdout
    lex.write_text("ein one\n", encoding="utf-8")
    proc = subprocess.run(tool, capture_output=True, text=True)
    assert proc.returncode == 1 and proc.stderr.strip() == (f"error: {lex}:1: lexicon lines are 'TARGET<TAB>SOURCE "
                                                            "[SOURCE ...]', got 'ein one'")
