"""One reader per format, used everywhere: fairseq-generate output, fairseq-train logs, text
lines (only \\n ends a line) and one control-character policy."""
import contextlib
import io
import json
import runpy

import pytest

from fairseq_fixes.unk_replacement import load_align_dict
from fairseq_luong.analysis import bleu_by_length, text_files, training_log
from fairseq_luong.analysis.alignment import read_links
from fairseq_luong.analysis.generate_output import GenerateOutputError, read_generate_output, read_nbest
from fairseq_luong.data import text
from tests.helpers import REPO

RECIPE_TOOLS = REPO / "examples" / "common" / "recipe_tools.py"


def script(path):
    return runpy.run_path(str(REPO / path), run_name="script")


def run_main(main, argv, stdin=None):
    """(stdout, stderr) of a script's main(argv), in this process."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        main(argv)
    return out.getvalue(), err.getvalue()


# ------------------------------------------------------------ fairseq-generate output

def hypothesis_lines(i, score, tokens, detokenized, alignment):
    """What fairseq-generate prints for one hypothesis of sentence i."""
    return [f"H-{i}\t{score}\t{tokens}", f"D-{i}\t{score}\t{detokenized}", f"P-{i}\t-0.1 -0.2 -0.3",
            f"A-{i}\t{alignment}"]


# --nbest 2 with --print-alignment and --tokenizer: every hypothesis line twice, best first,
# sentences out of order, between fairseq's logging and its BLEU line
NBEST = "\n".join([
    "2024-01-01 12:00:00 | INFO | fairseq_cli.generate | loading model(s) from ckpt.pt",
    "S-1\tzwei hunde", "T-1\ttwo <<unk>>",
    *hypothesis_lines(1, -0.2, "two dogs", "two dogs", "0-0 1-1"),
    *hypothesis_lines(1, -0.9, "two cats", "two cats", "1-0 0-1"),
    "S-0\tein haus", "T-0\ta house",
    *hypothesis_lines(0, -0.1, "a house @-@ boat", "a house-boat", "0-0 1-1"),
    *hypothesis_lines(0, -0.7, "the house", "the house", "0-1 1-0"),
    "I-0\t3",
    "2024-01-01 12:00:01 | INFO | fairseq_cli.generate | Translated 2 sentences (6 tokens)",
    "Generate test with beam=5: BLEU4 = 0.00, 0.0/0.0/0.0/0.0 (BP=1.000, ratio=1.000, syslen=4, reflen=4)",
]) + "\n"


def test_generate_output_keeps_the_best_hypothesis_of_each_sentence(tmp_path):
    path = tmp_path / "gen.out"
    path.write_text(NBEST, encoding="utf-8")
    found = read_generate_output(path)
    assert list(found) == [0, 1]  # in sentence order
    assert found[0].hypothesis == "a house @-@ boat" and found[0].detokenized == "a house-boat"
    assert found[0].score == -0.1 and found[0].alignment == "0-0 1-1"
    assert (found[1].source, found[1].target, found[1].hypothesis) == ("zwei hunde", "two <<unk>>", "two dogs")
    assert found[1].alignment == "0-0 1-1"


def test_nbest_keeps_every_hypothesis_with_its_scores_and_alignment():
    found = read_nbest(enumerate(NBEST.splitlines(), 1), "gen.out")
    assert list(found) == [0, 1]
    house = found[0].hypotheses
    assert [(h.tokens, h.detokenized, h.score, h.alignment) for h in house] == [
        ("a house @-@ boat", "a house-boat", -0.1, "0-0 1-1"), ("the house", "the house", -0.7, "0-1 1-0")]
    assert house[1].positional_scores == [-0.1, -0.2, -0.3]
    assert (found[1].source, found[1].target) == ("zwei hunde", "two <<unk>>")
    assert [h.tokens for h in found[1].hypotheses] == ["two dogs", "two cats"]


def test_every_tool_reads_the_same_best_hypotheses(tmp_path):
    """report_translations.py, bleu_by_length.py and the recipes' `hyps` all read generate
    output through the one reader: each takes the best of --nbest (the perSPE recipe's own
    parser took every H- line)."""
    path, ref = tmp_path / "gen.out", tmp_path / "ref.txt"
    path.write_text(NBEST, encoding="utf-8")
    ref.write_text("a house-boat\ntwo dogs\n", encoding="utf-8")
    assert bleu_by_length.read_system(str(path), 2)[0] == ["a house-boat", "two dogs"]  # D- lines
    out, _ = run_main(script("examples/common/recipe_tools.py")["main"], ["hyps", str(path), "--ref", str(ref)])
    assert out == "a house @-@ boat\ntwo dogs\n"  # H- lines, as the recipes score them
    out, _ = run_main(script("scripts/eval/report_translations.py")["main"], [str(path), "--ref", str(ref)])
    assert "exact matches: 2/2 sentences" in out and "translation: a house-boat" in out


def test_malformed_hypothesis_line_is_named(tmp_path):
    path = tmp_path / "gen.out"
    path.write_text("S-0\tein haus\nH-0\ta house\n", encoding="utf-8")  # no score
    with pytest.raises(GenerateOutputError, match=f"{path}:2: malformed H- line"):
        read_generate_output(path)


def test_plain_text_is_not_generate_output(tmp_path):
    path = tmp_path / "plain.txt"
    path.write_text("H-0 is a line of plain text\nanother\n", encoding="utf-8")
    assert read_generate_output(path) == {}
    assert bleu_by_length.read_system(str(path), 2) == (["H-0 is a line of plain text", "another"],
                                                        "plain text, one translation a line")


# ------------------------------------------------------------ fairseq-train logs

SIMPLE_LOG = """2024-01-01 | INFO | train_inner | epoch 001:      2 / 4 loss=6.302, ppl=78.89, wps=100, num_updates=2, wall=10
2024-01-01 | INFO | valid | epoch 001 | valid on 'valid' subset | loss 6.07 | ppl 67.17 | num_updates 4
2024-01-01 | INFO | train | epoch 001 | loss 6.254 | ppl 76.31 | num_updates 4 | wall 20
"""
# fairseq-validate prints no epoch
VALIDATE_LOG = "2024-01-01 | INFO | valid | valid on 'valid' subset | loss 5.5 | nll_loss 5.1 | ppl 34.3\n"


def test_one_parser_of_train_logs_for_curves_and_recipe_tools(tmp_path):
    log = tmp_path / "train.log"
    log.write_text(SIMPLE_LOG, encoding="utf-8")
    parsed = [training_log.parse_log_line(line) for line in SIMPLE_LOG.splitlines()]
    assert [(p.tag, p.epoch) for p in parsed] == [("train_inner", "001"), ("valid", "001"), ("train", "001")]
    assert parsed[0].fields["steps"] == "4" and parsed[1].subset == "valid" and parsed[2].fields["ppl"] == "76.31"
    read = training_log.read_training_log(str(log))
    assert [r.num_updates for r in read.valid["valid"]] == [4] and read.train[0].stats["ppl"] == 76.31
    tools = script("examples/common/recipe_tools.py")
    out, _ = run_main(tools["main"], ["valid-json", str(log)])
    assert json.loads(out) == {"loss": 6.07, "ppl": 67.17}
    out, _ = run_main(tools["main"], ["curve", str(log)])
    assert out.splitlines()[1] == "4\t20.0\t1\t6.07\t67.17"


def test_fairseq_validate_output_is_read_by_valid_json(tmp_path):
    log = tmp_path / "validate.log"
    log.write_text(VALIDATE_LOG, encoding="utf-8")
    out, _ = run_main(script("examples/common/recipe_tools.py")["main"], ["valid-json", str(log)])
    assert json.loads(out) == {"loss": 5.5, "ppl": 34.3}
    with pytest.raises(ValueError, match="no fairseq-train statistics"):  # not a training log
        training_log.read_training_log(str(log))


# ------------------------------------------------------------ text lines

ODD = "a b\rc\nd\x85e\nf\u2028g\nh\x1ci\nj\r\nlast"  # only \n ends a line; a \r\n's \r is its line end
LINES = ["a b\rc", "d\x85e", "f\u2028g", "h\x1ci", "j", "last"]


def test_every_reader_ends_lines_at_newline_only(tmp_path):
    path = tmp_path / "odd.txt"
    path.write_bytes(ODD.encode("utf-8"))
    assert text.read_lines(path) == LINES
    assert text_files.read_lines(str(path)) == LINES
    assert text.count_lines(path) == len(LINES)
    assert bleu_by_length.read_system(str(path), len(LINES))[0] == LINES
    assert list(script("examples/common/recipe_tools.py")["text_lines"](path)) == LINES
    assert script("scripts/eval/aer.py")["sentence_lengths"](str(path)) == [len(line.split()) for line in LINES]
    links = tmp_path / "links"
    links.write_bytes("0-0\r1-1\n0-1\x851-0\n".encode("utf-8"))  # two sentences, whatever the separators
    assert len(read_links(str(links), False, False)) == 2
    words = tmp_path / "dict.txt"
    words.write_bytes("haus\thouse\r\nhund\x85chien\tdog\n".encode("utf-8"))
    assert load_align_dict(str(words)) == {"haus": "house", "hund\x85chien": "dog"}


def test_lines_are_fairseq_preprocesss_on_files_check_parallel_passes(tmp_path):
    """fairseq-preprocess reads text mode (a lone \\r is a line break too); on files without
    a lone \\r (check_parallel.py refuses those) it reads exactly our lines."""
    path = tmp_path / "crlf.en"
    path.write_bytes("one two\r\nthree\tfour\r\nfive\x85six\nseven".encode("utf-8"))
    with open(path, encoding="utf-8") as f:  # as fairseq's Binarizer
        fairseq_lines = [line.rstrip("\n") for line in f]
    assert text.read_lines(path) == fairseq_lines


def test_one_control_character_policy(tmp_path):
    """check_parallel.py reports exactly the characters normalize_line makes spaces of."""
    check_parallel = script("scripts/data/check_parallel.py")
    assert check_parallel["CONTROL"] is text.CONTROL
    controls = [chr(i) for i in range(0x110000) if text.CONTROL.match(chr(i))]
    assert "\t" not in controls and "\n" not in controls and {"\x00", "\x7f", "\x9f", "\u2028"} <= set(controls)
    assert all(text.normalize_line(f"a{c}b") == "a b" for c in controls)
    shown = [c for c in controls if c not in "\r\n"]  # \r: its own message
    (tmp_path / "c.en").write_text("".join(f"x{c}y\n" for c in shown), encoding="utf-8")
    (tmp_path / "c.de").write_text("z\n" * len(shown), encoding="utf-8")
    _, err = run_main(lambda argv: check_parallel["main"](argv),
                      ["-s", "en", "-t", "de", "--max-problems", "1000", str(tmp_path / "c")])
    reported = [line for line in err.splitlines() if "control character" in line]
    assert [f"U+{ord(c):04X} at column 2" in line for c, line in zip(shown, reported)] == [True] * len(shown)
    assert len(reported) == len(shown)
