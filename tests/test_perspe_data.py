"""The perSPE data path: normalisation, Japanese phrase chunker (MeCab + nltk),
projection of phrases onto pieces, the command lines, and scoring."""
import importlib.util
import runpy
import sys

import numpy as np
import pytest

from fairseq_luong.data import japanese_chunker
from fairseq_luong.data.chunk_projection import ProjectionError, with_eos
from fairseq_luong.data.chunk_projection import main as project_main
from fairseq_luong.data.chunk_projection import project_chunks as project
from fairseq_luong.data.japanese_chunker import ChunkerError, JapaneseChunker
from fairseq_luong.data.japanese_chunker import main as chunk_main
from fairseq_luong.data.text import iter_lines, normalize_line, normalize_main
from tests.helpers import ODD_LINES, REPO

SCRIPTS = REPO / "scripts" / "data"

# Expected phrases written by hand (bunsetsu as a Japanese grammar book would cut them).
SENTENCES = {
    "誰が一番に着くか私には分かりません。": ["誰が", "一番に", "着くか", "私には", "分かりません。"],
    "私はテニス部員です。": ["私は", "テニス部員です。"],  # compound noun + copula
    "彼はその本を読むことができる。": ["彼は", "その", "本を", "読む", "ことが", "できる。"],
    "毎日英語を勉強する。": ["毎日", "英語を", "勉強する。"],  # adverbial noun; サ変 noun + する
    "「こんにちは」と言った。": ["「こんにちは」と", "言った。"],  # brackets stay with their phrase
    "しかし、彼は来なかった。": ["しかし、", "彼は", "来なかった。"],
    "DNA polymeraseを調べる。": ["DNA polymeraseを", "調べる。"],  # inner space kept
    # ASPEC-style after NFKC: MeCab must still see "," as a comma, "." inside a number
    "温度は25°Cで,pHは7.4であった。": ["温度は", "25°Cで,", "pHは", "7.4であった。"],
    "図1(a)に結果を示す。": ["図1", "(a)に", "結果を", "示す。"],
    "": [],
}


@pytest.fixture(scope="module")
def chunker():
    return JapaneseChunker()


@pytest.mark.parametrize("text", list(SENTENCES))
def test_chunks_of_fixed_sentences(chunker, text):
    assert normalize_line(text) == text  # what the chunker is given
    assert chunker.chunk(text) == SENTENCES[text]


def test_every_morpheme_in_exactly_one_phrase(chunker):
    text = "、そして東京駅まで歩いて10分かかります。"
    spans = chunker.spans(text)
    assert spans[0][0] == 0 and spans[-1][1] == len(text)
    assert all(a[1] == b[0] for a, b in zip(spans, spans[1:]))  # contiguous, no overlap
    assert chunker.chunk(text)[0] == "、"  # a stray symbol is a phrase of its own


def test_missing_dictionary_is_a_clear_error(tmp_path):
    with pytest.raises(ChunkerError, match=r"sys\.dic is missing.*pip install ipadic"):
        JapaneseChunker(dicdir=tmp_path)


def test_broken_dictionary_is_a_clear_error(tmp_path):
    (tmp_path / "sys.dic").write_bytes(b"")
    (tmp_path / "dicrc").write_bytes(b"")
    with pytest.raises(ChunkerError, match=f"cannot load the dictionary in {tmp_path}"):
        JapaneseChunker(dicdir=tmp_path)


def test_grammar_errors_name_file_and_line(tmp_path):
    bad = tmp_path / "g.txt"
    bad.write_text("# comment\nA = <名詞.*>\nPHRASE:\n  {$A $B}\n", encoding="utf-8")
    with pytest.raises(ChunkerError, match=rf"{bad}:4: \$B is not defined"):
        japanese_chunker.load_grammar(bad)


def test_scripts_are_the_package_command_lines(capsys, monkeypatch):
    for script in ("normalize_text.py", "chunk_japanese.py", "project_chunks.py"):
        monkeypatch.setattr(sys, "argv", [script, "--help"])
        with pytest.raises(SystemExit) as exit:
            runpy.run_path(str(SCRIPTS / script), run_name="__main__")
        assert exit.value.code == 0
        assert f"usage: {script}" in capsys.readouterr().out


def test_cli_parallel_chunking(tmp_path, chunker, capsys):
    raw = tmp_path / "raw.ja"
    texts = list(SENTENCES)
    raw.write_text("\n".join(texts) + "\n", encoding="utf-8")
    out = tmp_path / "chunks.ja"
    chunk_main(["-i", str(raw), "-o", str(out), "--workers", "2"])
    assert f"{raw}: chunked {len(texts)} sentences" in capsys.readouterr().err
    lines = out.read_text(encoding="utf-8").split("\n")[:-1]
    assert [line.split("\t") if line else [] for line in lines] == [SENTENCES[t] for t in texts]


def test_cli_errors_name_file_and_line(tmp_path, capsys):
    raw = tmp_path / "raw.ja"
    raw.write_bytes("私は学生です。\n左\t右\n".encode("utf-8"))
    with pytest.raises(SystemExit, match=rf"{raw}:2: the line is not normalised \(column 2 "
                                         rf"holds U\+0009.*normalize_text\.py"):
        chunk_main(["-i", str(raw), "-o", str(tmp_path / "out"), "--workers", "1"])
    assert not (tmp_path / "out").exists() and not (tmp_path / "out.part").exists()
    raw.write_bytes("私は学生です。\n".encode("utf-8") + b"\xff\n")
    with pytest.raises(SystemExit, match=rf"{raw}:2: not valid UTF-8"):
        chunk_main(["-i", str(raw), "-o", str(tmp_path / "out"), "--workers", "1"])


def test_missing_mecab_dictionary_package_is_a_clear_error(monkeypatch):
    monkeypatch.setitem(sys.modules, "ipadic", None)  # "import ipadic" fails
    with pytest.raises(ChunkerError, match="IPADIC dictionary is not installed: pip install ipadic"):
        JapaneseChunker()


# the one normalisation, and the lines that broke the data path before it

@pytest.mark.parametrize("raw,_en,want", ODD_LINES)
def test_odd_lines_normalise_to_what_a_reader_sees(raw, _en, want):
    assert normalize_line(raw) == want
    assert normalize_line(want) == want  # idempotent


def test_only_newline_ends_a_line(tmp_path):
    path = tmp_path / "odd.ja"
    path.write_bytes("".join(ja + "\n" for ja, _, _ in ODD_LINES).encode("utf-8"))
    lines = [line for _, line in iter_lines(path)]
    # \r, \x1c, \x85, U+2028 split nothing; a \r\n line end is a line end (as for fairseq)
    assert lines == [ja.removesuffix("\r") for ja, _, _ in ODD_LINES]
    assert lines[1] == "私は\r学生です。"
    out = tmp_path / "norm.ja"
    normalize_main(["-i", str(path), "-o", str(out), "--quiet"])
    assert out.read_text(encoding="utf-8").split("\n")[:-1] == [w for _, _, w in ODD_LINES]


def test_odd_lines_go_through_chunking_and_projection(tmp_path, capsys):
    """Normalise -> SentencePiece (identity rule) -> chunk -> project, with every odd
    line: nothing is reported, each sentence has one id per piece plus </s>."""
    spm = pytest.importorskip("sentencepiece")
    from fairseq.data import data_utils

    raw = tmp_path / "raw.ja"
    raw.write_bytes("".join(ja + "\n" for ja, _, _ in ODD_LINES * 20).encode("utf-8"))
    text, chunks, pieces = tmp_path / "text.ja", tmp_path / "chunks.ja", tmp_path / "spm.ja"
    normalize_main(["-i", str(raw), "-o", str(text), "--quiet"])
    spm.SentencePieceTrainer.train(input=str(text), model_prefix=str(tmp_path / "m"),
                                   vocab_size=60, hard_vocab_limit=False, minloglevel=2,
                                   normalization_rule_name="identity")
    sp = spm.SentencePieceProcessor(model_file=str(tmp_path / "m.model"))
    lines = [line for _, line in iter_lines(text)]
    pieces.write_text("".join(" ".join(sp.encode(x, out_type=str)) + "\n" for x in lines),
                      encoding="utf-8")
    chunk_main(["-i", str(text), "-o", str(chunks), "--workers", "1", "--quiet"])
    out = tmp_path / "bin" / "train.en-ja.ja.chunks"
    project_main(["--pieces", str(pieces), "--chunks", str(chunks), "--output", str(out),
                  "--spm-model", str(tmp_path / "m.model")])
    err = capsys.readouterr().err
    assert "error" not in err and "0 line(s) given one phrase per piece" in err
    ds = data_utils.load_indexed_dataset(str(out), None, "mmap")
    assert len(ds) == len(lines)
    for i, line in enumerate(lines):
        assert len(ds[i]) == len(sp.encode(line)) + 1


# projection onto SentencePiece pieces

def test_projection_lone_space_mark_goes_with_the_next_piece():
    pieces = ["▁", "エ", "ミ", "は", "幸せそうに", "見え", "ます", "。"]
    chunks = ["エミは", "幸せそうに", "見えます。"]
    assert project(pieces, chunks) == [0, 0, 0, 0, 1, 2, 2, 2]
    assert with_eos(project(pieces, chunks)) == [0, 0, 0, 0, 1, 2, 2, 2, 3]


def test_projection_uses_the_first_real_character():
    # "はテ" starts in phrase 0 and ends in phrase 1: it belongs to phrase 0
    pieces = ["▁私", "はテ", "ニス", "部員", "です。"]
    assert project(pieces, ["私は", "テニス部員です。"]) == [0, 0, 1, 1, 1]
    # a mid-sentence "▁" alone goes with the piece after it
    assert project(["▁A", "▁", "B", "▁C"], ["A", "B C"]) == [0, 1, 1, 1]


def test_projection_normalizes_like_sentencepiece():
    # full-width letters in the phrases, NFKC-normalized pieces (nmt_nfkc)
    pieces = ["▁DNA", "▁poly", "merase", "を", "調べる", "。"]
    assert project(pieces, ["ＤＮＡ polymeraseを", "調べる。"]) == [0, 0, 0, 0, 1, 1]


def test_projection_mismatch_is_an_error():
    with pytest.raises(ProjectionError, match="does not match"):
        project(["▁私", "が"], ["私は"])
    with pytest.raises(ProjectionError, match="left over"):
        project(["▁私"], ["私は"])


def test_project_cli_writes_ids_with_eos_and_names_lines(tmp_path, capsys):
    from fairseq.data import data_utils

    pieces, chunks = tmp_path / "p.ja", tmp_path / "c.ja"
    pieces.write_text("▁ エ ミ は 幸せそうに 見え ます 。\n\n▁私は 学生 です 。\n", encoding="utf-8")
    chunks.write_text("エミは\t幸せそうに\t見えます。\n\n私は\t学生です。\n", encoding="utf-8")
    out = tmp_path / "bin" / "train.en-ja.ja.chunks"
    project_main(["--pieces", str(pieces), "--chunks", str(chunks), "--output", str(out)])
    ds = data_utils.load_indexed_dataset(str(out), None, "mmap")
    assert [ds[i].tolist() for i in range(len(ds))] == [
        [0, 0, 0, 0, 1, 2, 2, 2, 3], [0], [0, 1, 1, 1, 2]]
    assert np.array_equal(ds.sizes, [9, 1, 5])
    assert "pieces per phrase" in capsys.readouterr().err

    # a line that does not match is named; "stop" writes nothing, "token" goes on
    chunks.write_text("エミは\t幸せそうに\t見えます。\n\n私が\t学生です。\n", encoding="utf-8")
    bad = tmp_path / "bin" / "bad"
    with pytest.raises(SystemExit, match=r"1 line\(s\) of .* \(lines 3\)"):
        project_main(["--pieces", str(pieces), "--chunks", str(chunks), "--output", str(bad)])
    assert f"{pieces}:3 and {chunks}:3" in capsys.readouterr().err
    assert not (tmp_path / "bin" / "bad.idx").exists()
    project_main(["--pieces", str(pieces), "--chunks", str(chunks), "--output", str(bad),
                  "--on-mismatch", "token"])
    assert f"warning: {pieces}:3 and {chunks}:3" in capsys.readouterr().err
    ds = data_utils.load_indexed_dataset(str(bad), None, "mmap")
    assert ds[2].tolist() == [0, 1, 2, 3, 4]  # one phrase per piece, then </s>

    # files of different lengths
    chunks.write_text("エミは\t幸せそうに\t見えます。\n\n", encoding="utf-8")
    with pytest.raises(SystemExit, match=rf"{chunks} has 2 lines but {pieces} has more: "
                                         rf"{pieces}:3 has no counterpart"):
        project_main(["--pieces", str(pieces), "--chunks", str(chunks), "--output", str(bad)])


def test_project_uses_the_sentencepiece_normalizer(tmp_path):
    spm = pytest.importorskip("sentencepiece")
    text = tmp_path / "t.txt"
    text.write_text("".join(f"これはペン{i}です。ＤＮＡを調べる。\n" for i in range(50)), encoding="utf-8")
    spm.SentencePieceTrainer.train(input=str(text), model_prefix=str(tmp_path / "m"),
                                   vocab_size=30, hard_vocab_limit=False, minloglevel=2)
    sp = spm.SentencePieceProcessor(model_file=str(tmp_path / "m.model"))
    pieces = sp.encode("ＤＮＡを調べる。", out_type=str)
    ids = project(pieces, ["ＤＮＡを", "調べる。"], sp.normalize)
    assert len(ids) == len(pieces) and ids[0] == 0 and ids[-1] == 1
    assert ids == sorted(ids)


# scoring (examples/perspe/score.py)

def test_score_normalises_the_reference_like_the_hypotheses():
    """A hypothesis that is the reference as the model writes it (NFKC: half-width
    digits and letters) is a perfect translation: 100 BLEU, not ~60."""
    pytest.importorskip("MeCab")
    spec = importlib.util.spec_from_file_location("perspe_score", REPO / "examples/perspe/score.py")
    score = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(score)
    refs = ["ＤＮＡポリメラーゼを３０分間調べた。", "温度は２５℃で，ｐＨは７．４であった。",
            "図１に結果を示す。", "ＣＯ２の排出量は１９９０年比で１２％減った。"]
    import tempfile
    with tempfile.TemporaryDirectory() as d:
        ref, hyp = f"{d}/ref", f"{d}/hyp"
        open(ref, "w", encoding="utf-8").write("".join(r + "\n" for r in refs))
        open(hyp, "w", encoding="utf-8").write("".join(normalize_line(r) + "\n" for r in refs))
        result = score.score(hyp, ref)
    assert result["BLEU"] == 100.0 and result["chrF2"] == 100.0
    assert result["BLEU vs unnormalised reference"] < 80
    assert result["references normalisation changed"] == 4
