"""Japanese phrase chunker (MeCab + nltk) and the projection of phrases onto pieces."""
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[1]
SCRIPTS = REPO / "scripts"
sys.path.insert(0, str(SCRIPTS))

import chunk_japanese  # noqa: E402
from chunk_japanese import ChunkerError, JapaneseChunker  # noqa: E402
from project_chunks import ProjectionError, project_chunks as project, with_eos  # noqa: E402

# Expected phrases written by hand (bunsetsu as a Japanese grammar book would cut them).
SENTENCES = {
    "誰が一番に着くか私には分かりません。": ["誰が", "一番に", "着くか", "私には", "分かりません。"],
    "私はテニス部員です。": ["私は", "テニス部員です。"],  # compound noun + copula
    "彼はその本を読むことができる。": ["彼は", "その", "本を", "読む", "ことが", "できる。"],
    "毎日英語を勉強する。": ["毎日", "英語を", "勉強する。"],  # adverbial noun; サ変 noun + する
    "「こんにちは」と言った。": ["「こんにちは」と", "言った。"],  # brackets stay with their phrase
    "しかし、彼は来なかった。": ["しかし、", "彼は", "来なかった。"],
    "ＤＮＡ polymeraseを調べる。": ["ＤＮＡ polymeraseを", "調べる。"],  # inner space kept
    "": [],
}


@pytest.fixture(scope="module")
def chunker():
    return JapaneseChunker()


@pytest.mark.parametrize("text", list(SENTENCES))
def test_chunks_of_fixed_sentences(chunker, text):
    assert chunker.chunk(text) == SENTENCES[text]


def test_every_morpheme_in_exactly_one_phrase(chunker):
    text = "、そして東京駅まで歩いて１０分かかります。"
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
        chunk_japanese.load_grammar(bad)


def run_script(name, *args, stdin=None):
    return subprocess.run([sys.executable, str(SCRIPTS / name), *args], input=stdin,
                          capture_output=True, text=True)


def test_cli_help_and_parallel_chunking(tmp_path, chunker):
    assert run_script("chunk_japanese.py", "--help").returncode == 0
    raw = tmp_path / "raw.ja"
    texts = list(SENTENCES)
    raw.write_text("\n".join(texts) + "\n", encoding="utf-8")
    out = tmp_path / "chunks.ja"
    proc = run_script("chunk_japanese.py", "-i", str(raw), "-o", str(out), "--workers", "2")
    assert proc.returncode == 0, proc.stderr
    assert "sentences/s" in proc.stderr
    lines = out.read_text(encoding="utf-8").split("\n")[:-1]
    assert [line.split("\t") if line else [] for line in lines] == [SENTENCES[t] for t in texts]


def test_cli_errors_name_file_and_line(tmp_path):
    raw = tmp_path / "raw.ja"
    raw.write_bytes("私は学生です。\n左\t右\n".encode("utf-8"))
    proc = run_script("chunk_japanese.py", "-i", str(raw), "-o", str(tmp_path / "out"))
    assert proc.returncode != 0
    assert f"{raw}:2:" in proc.stderr and "TAB" in proc.stderr
    assert not (tmp_path / "out").exists()  # no half-written output
    raw.write_bytes("私は学生です。\n".encode("utf-8") + b"\xff\n")
    proc = run_script("chunk_japanese.py", "-i", str(raw), "-o", str(tmp_path / "out"))
    assert f"{raw}:2: not valid UTF-8" in proc.stderr


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


def test_project_cli_writes_ids_with_eos_and_names_lines(tmp_path):
    from fairseq.data import data_utils

    pieces, chunks = tmp_path / "p.ja", tmp_path / "c.ja"
    pieces.write_text("▁ エ ミ は 幸せそうに 見え ます 。\n\n▁私は 学生 です 。\n", encoding="utf-8")
    chunks.write_text("エミは\t幸せそうに\t見えます。\n\n私は\t学生です。\n", encoding="utf-8")
    out = tmp_path / "bin" / "train.en-ja.ja.chunks"
    proc = run_script("project_chunks.py", "--pieces", str(pieces), "--chunks", str(chunks),
                      "--output", str(out))
    assert proc.returncode == 0, proc.stderr
    ds = data_utils.load_indexed_dataset(str(out), None, "mmap")
    assert [ds[i].tolist() for i in range(len(ds))] == [
        [0, 0, 0, 0, 1, 2, 2, 2, 3], [0], [0, 1, 1, 1, 2]]
    assert np.array_equal(ds.sizes, [9, 1, 5])

    chunks.write_text("エミは\t幸せそうに\t見えます。\n\n私が\t学生です。\n", encoding="utf-8")
    proc = run_script("project_chunks.py", "--pieces", str(pieces), "--chunks", str(chunks),
                      "--output", str(out))
    assert proc.returncode != 0 and f"{pieces}:3 and {chunks}:3" in proc.stderr
    assert run_script("project_chunks.py", "--help").returncode == 0


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
