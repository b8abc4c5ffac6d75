"""--replace-unk [DICT] through fairseq-generate and fairseq-interactive (fairseq_fixes/unk_replacement.py).

The crafted model of ``diagonal_model`` (conftest.py) gives a known answer: the step that
predicts target word t attends to source word t alone, in the ORIGINAL order (also with
--reverse-source), and every hypothesis word is <unk> until the length limit (one word
per source word). Each <unk> must then become the source word at its own position, taken
from the raw text (so a word outside the vocabulary is itself), or the dictionary's
translation of it: a reversed or shifted alignment gives another sentence.
"""
import re
import sys

import pytest

from tests.helpers import USER_DIR

DICTIONARY = "twenty\tZWANZIG\nseven SIEBEN\n"  # both formats fairseq users have


@pytest.fixture(scope="module")
def crafted(diagonal_model):
    (diagonal_model / "dict.txt").write_text(DICTIONARY, encoding="utf-8")
    return diagonal_model


def expected(source, align_dict={"twenty": "ZWANZIG", "seven": "SIEBEN"}):
    """Target word t replaced by source word t, or its dictionary entry."""
    return " ".join(align_dict.get(word, word) for word in source.split())


def hypotheses(out):
    """{id: [hypotheses in order]} from fairseq-generate / -interactive output."""
    hyps = {}
    for sid, hyp in re.findall(r"^H-(\d+)\t\S+\t(.*)$", out, re.M):
        hyps.setdefault(int(sid), []).append(hyp)
    return hyps


GENERATE = ["--beam", "2", "--nbest", "2", "--batch-size", "1", "--max-len-a", "1", "--max-len-b", "-1"]


def cli(name, argv):
    """fairseq-generate / fairseq-interactive (``name``) in this process: their cli_main
    with ``argv``, returning what they print (saves a process start per call)."""
    import contextlib
    import importlib
    import io

    module = importlib.import_module(f"fairseq_cli.{name}")
    out = io.StringIO()
    saved = sys.argv
    sys.argv = [f"fairseq-{name}", *argv]
    try:
        with contextlib.redirect_stdout(out):
            module.cli_main()
    finally:
        sys.argv = saved
    return out.getvalue()


def test_generate_replaces_unks_with_source_words_and_dictionary(crafted):
    """Beam 2, both n-best hypotheses, an ensemble (attention averaged), reversed source;
    the raw source text (OOV words included) is what replaces."""
    ckpt = str(crafted / "crafted.pt")
    sources = (crafted / "raw" / "test.en").read_text(encoding="utf-8").splitlines()
    vocab = {line.split()[0] for line in (crafted / "bin" / "dict.en.txt").read_text().splitlines()}
    assert any(w not in vocab for s in sources for w in s.split())  # OOV source words occur
    out = cli("generate", [str(crafted / "bin"), "--user-dir", USER_DIR, "--dataset-impl", "raw",
                           "--path", f"{ckpt}:{ckpt}", *GENERATE, "--replace-unk", str(crafted / "dict.txt"),
                           "--print-alignment"])
    hyps = hypotheses(out)
    srcs = dict(re.findall(r"^S-(\d+)\t(.*)$", out, re.M))
    assert len(hyps) == len(sources)
    for sid, (best, second) in hyps.items():
        source = srcs[str(sid)]
        assert source == sources[sid]
        assert best == expected(source)
        # the runner-up differs in one word (not <unk>); its <unk>s are replaced alike
        want, got = expected(source).split(), second.split()
        assert len(got) == len(want) and sum(a != b for a, b in zip(got, want)) <= 1
        assert "<unk>" not in second
    n = len(sources[0].split())
    assert re.search(rf"^A-0\t{' '.join(f'{t}-{t}' for t in range(n))}$", out, re.M)  # as before
    # a bare --replace-unk copies the source words (fairseq opened a file named "@@ ")
    out = cli("generate", [str(crafted / "bin"), "--user-dir", USER_DIR, "--dataset-impl", "raw",
                           "--path", ckpt, *GENERATE, "--replace-unk"])
    assert [hypotheses(out)[i][0] for i in range(len(sources))] == sources


def test_interactive_recovers_out_of_vocabulary_source_words(crafted, tmp_path):
    lines = ["twenty zebra", "seven okapis and twenty lemurs", "quagga", "okapis seven"]
    (tmp_path / "input.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    out = cli("interactive", [str(crafted / "bin"), "--user-dir", USER_DIR, "--path", str(crafted / "crafted.pt"),
                              "-s", "en", "-t", "de", *GENERATE, "--buffer-size", "2",
                              "--input", str(tmp_path / "input.txt"), "--replace-unk", str(crafted / "dict.txt")])
    hyps = hypotheses(out)
    read = re.search(r"^S-0\t(.*)$", out, re.M).group(1)  # what the model read: zebra is <unk>
    assert read.split()[1] == "<unk>"
    assert [hyps[i][0] for i in range(4)] == ["ZWANZIG zebra", "SIEBEN okapis and ZWANZIG lemurs", "quagga",
                                              "okapis SIEBEN"]


def test_replace_unk_dictionary_errors_name_file_and_line(tmp_path):
    from fairseq_fixes.unk_replacement import UnkReplacementError, load_align_dict

    good = tmp_path / "good.txt"
    good.write_text("twenty\tZWANZIG\n\nseven SIEBEN\nNew York\tNew-York\n", encoding="utf-8")
    assert load_align_dict(str(good)) == {"twenty": "ZWANZIG", "seven": "SIEBEN", "New York": "New-York"}
    assert load_align_dict("@@ ") == {} and load_align_dict(None) is None
    bad = tmp_path / "bad.txt"
    bad.write_text("twenty ZWANZIG\nthree drei extra\n", encoding="utf-8")
    with pytest.raises(UnkReplacementError, match=re.escape(f"{bad}:2: --replace-unk dictionary lines")):
        load_align_dict(str(bad))
    with pytest.raises(UnkReplacementError, match="cannot read the dictionary"):
        load_align_dict(str(tmp_path / "missing.txt"))


def test_replace_unks_by_hand():
    from fairseq_fixes.unk_replacement import replace_unks

    tokens = ["<unk>", "x", "<unk>", "<unk>"]
    links = {0: 2, 1: 0, 2: 0}  # target 3 has no link (e.g. an empty source)
    got = replace_unks(tokens, ["a", "b", "zebra"], links, {"a": "A"}, "<unk>")
    assert got == ["zebra", "x", "A", "<unk>"]
