"""scripts/data/check_parallel.py reads lines as fairseq-preprocess does and names every problem by file
and line; scripts/eval/report_translations.py scores against the raw reference; run.sh checks its options.

The scripts run in this process (their main()), except where a test is about the command itself
(exit status, the paths run.sh calls them by): each new process would import fairseq again."""
import contextlib
import io
import runpy
import subprocess
import sys

import pytest

from tests.helpers import REPO, WMT_SAMPLE

CHECK = [sys.executable, str(REPO / "scripts" / "data" / "check_parallel.py"), "-s", "en", "-t", "de"]  # run.sh's path
REPORT = [sys.executable, str(REPO / "scripts" / "eval" / "report_translations.py")]  # run.sh's path


def in_process(script, argv):
    """(exit status, stdout, stderr) of scripts/SCRIPT.py's main(argv), run in this process."""
    main = runpy.run_path(str(REPO / "scripts" / script), run_name=f"script_{script}")["main"]
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(argv) or 0
        except SystemExit as exit:  # argparse's errors, the scripts' "error: ..."
            code = exit.code if isinstance(exit.code, int) else 1
            if not isinstance(exit.code, int) and exit.code is not None:
                print(exit.code, file=sys.stderr)
    return code, out.getvalue(), err.getvalue()


def write(path, text):
    path.write_bytes(text.encode("utf-8") if isinstance(text, str) else text)


def pair(tmp_path, name, en, de):
    write(tmp_path / f"{name}.en", en)
    write(tmp_path / f"{name}.de", de)
    return str(tmp_path / name)


def check(*args):
    code, _, err = in_process("data/check_parallel.py", ["-s", "en", "-t", "de", *args])
    return code, err


def report(*args):
    return in_process("eval/report_translations.py", list(args))


def test_lone_carriage_return_is_reported_where_fairseq_would_split(tmp_path):
    """The issue's example: fairseq-preprocess reads 5 lines from each file (pairs tw-zwei,
    o-dr, three-ei); the check used to say 'ok: 4 sentence pairs'."""
    prefix = pair(tmp_path, "t", "one\ntw\ro\nthree\nfour\n", "eins\nzwei\ndr\rei\nvier\n")
    with open(f"{prefix}.en", encoding="utf-8") as f:  # text mode, as fairseq's Binarizer
        assert len(f.readlines()) == 5
    proc = subprocess.run([*CHECK, prefix], capture_output=True, text=True)  # the command run.sh runs
    code, err = proc.returncode, proc.stderr
    assert code == 1
    assert f"error: {prefix}.en:2: carriage return (\\r) inside the line" in err
    assert f"error: {prefix}.de:3: carriage return (\\r) inside the line" in err
    assert "ok:" not in err
    assert all(line.startswith("error: ") for line in err.splitlines()), err  # its own lines only


def test_crlf_line_endings_are_one_line_break(tmp_path):
    prefix = pair(tmp_path, "w", "one\r\ntwo\r\n", "eins\r\nzwei\r\n")
    code, err = check(prefix)
    assert code == 0 and f"ok: {prefix}.{{en,de}}: 2 sentence pairs" in err


def test_bom_control_characters_and_invalid_utf8_are_named(tmp_path):
    prefix = pair(tmp_path, "b", "\ufeffone\ntwo\u2028three\n", b"eins\nzw\x01ei\n")
    write(tmp_path / "u.en", b"gut\n\xff\n")
    write(tmp_path / "u.de", "good\nbad\n")
    code, err = check(prefix, str(tmp_path / "u"))
    assert code == 1
    assert f"{prefix}.en:1: UTF-8 byte order mark (U+FEFF) at the start of the file" in err
    assert f"{prefix}.en:2: control character U+2028 at column 4" in err
    assert f"{prefix}.de:2: control character U+0001 at column 3" in err
    assert f"{tmp_path / 'u.en'}:2: not valid UTF-8" in err


def test_control_characters_keep_is_one_warning_but_line_breaks_stay_errors(tmp_path):
    """WMT text holds C1 mojibake (U+0092 for an apostrophe, ../shared/data/wmt_sample_en_de
    has 11 such lines): --control-characters keep (the WMT14 recipe's) lets it through with one
    warning per file; characters that str.splitlines takes for a line break stay errors."""
    prefix = pair(tmp_path, "c", "it\x92s\nok\u2028no\nthe\x96end\n", "es\nja\nnein\n")
    code, err = check(prefix)
    assert code == 1 and f"{prefix}.en:1: control character U+0092 at column 3" in err
    code, err = check(prefix, "--control-characters", "keep")
    assert code == 1 and f"{prefix}.en:2: control character U+2028 at column 3" in err
    assert (f"warning: {prefix}.en: 2 lines hold control characters (first: line 1, U+0092 at "
            "column 3); kept") in err
    assert "U+0092 at column 3: remove" not in err
    only_c1 = pair(tmp_path, "d", "it\x92s\nfine\n", "es\x85\ngut\n")
    code, err = check(only_c1, "--control-characters", "keep")
    assert code == 1 and f"{only_c1}.de:1: control character U+0085" in err  # NEL: a line break
    write(tmp_path / "d.de", "es\ngut\n")
    code, err = check(only_c1, "--control-characters", "keep")
    assert code == 0 and f"ok: {only_c1}.{{en,de}}: 2 sentence pairs" in err
    assert f"warning: {only_c1}.en: 1 line holds control characters (first: line 1, U+0092" in err


def test_repair_c1_gives_the_windows_1252_character_and_keeps_every_line():
    """C1 mojibake is a Windows-1252 byte read as Latin-1: each becomes what was typed;
    NEL (U+0085, a line break for str.splitlines) is the ellipsis; undefined bytes a space."""
    from fairseq_luong.data.text import repair_c1

    assert repair_c1("it\x92s \x93so\x94 \x96 2007\x85") == "it\u2019s \u201cso\u201d \u2013 2007\u2026"
    assert repair_c1("a\x81b\x9dc") == "a b c"
    assert repair_c1("Stra\u00dfe \u2013 \u65e5\u672c\t\x7f") == "Stra\u00dfe \u2013 \u65e5\u672c\t\x7f"


@pytest.mark.skipif(not (WMT_SAMPLE / "train.en").exists(), reason=f"no {WMT_SAMPLE}")
def test_wmt_c1_mojibake_names_both_ways_past_it_and_repair_c1_clears_it(tmp_path):
    """On ../shared/data/wmt_sample_en_de (11 problems on 9 of 10,000 lines): each error names
    scripts/data/repair_c1.py and --control-characters keep, a last line counts them, and the
    repaired copies pass with every line in place."""
    wmt = WMT_SAMPLE
    code, err = check(str(wmt / "train"), "--max-problems", "2")
    assert code == 1
    assert (f"{wmt / 'train'}.en:664: control character U+0096 at column 25, C1 mojibake of Windows-1252 "
            "'\u2013': repair the files with scripts/data/repair_c1.py, or keep such characters with "
            "--control-characters keep") in err
    assert err.rstrip().splitlines()[-1] == (
        f"error: 11 problems in all ({wmt / 'train'}.en 6, {wmt / 'train'}.de 5); nothing was changed: "
        "fix the files and check them again")
    fixed = tmp_path / "train"
    code, _, err = in_process("data/repair_c1.py", ["-i", f"{wmt / 'train'}.en", f"{wmt / 'train'}.de",
                                                    "-o", f"{fixed}.en", f"{fixed}.de"])
    assert code == 0 and "10000 lines, 10 C1 characters repaired on 6 lines" in err
    code, err = check(str(fixed))
    assert code == 0 and f"ok: {fixed}.{{en,de}}: 10000 sentence pairs" in err
    assert "\u2013 CropEnergies AG" in (tmp_path / "train.en").read_text(encoding="utf-8").split("\n")[663]


@pytest.mark.parametrize("words,ok", [(1023, True), (1024, False)])
def test_length_counts_the_eos_fairseq_appends(tmp_path, words, ok):
    """1,024 words + EOS = 1,025 positions: fairseq-train drops the pair, fairseq-generate stops."""
    prefix = pair(tmp_path, "l", "a b\n" + " ".join(["w"] * words) + "\n", "c d\ne f\n")
    code, err = check(prefix)
    assert (code == 0) == ok, err
    if not ok:
        assert f"{prefix}.en:2: 1024 words + EOS = 1025 positions, more than --max-positions 1024" in err


def test_lines_out_of_step_and_one_sided_empty_lines(tmp_path):
    code, err = check(pair(tmp_path, "n", "a\nb\nc\n", "x\ny\n"))
    assert code == 1 and "3 lines but" in err and "has 2" in err
    code, err = check(pair(tmp_path, "e", "a\n\nc\n", "x\ny\nz\n"))
    assert code == 1 and "e.en:2: empty line, but" in err


def test_held_out_pairs_seen_in_training_are_counted(tmp_path):
    train = pair(tmp_path, "train", "a b\nc d\ne f\n", "1 2\n3 4\n5 6\n")
    test = pair(tmp_path, "test", "x y\nc d\n", "9 9\n3 4\n")
    code, err = check("--trainpref", train, "--testpref", test)
    assert code == 0
    assert (f"warning: {test}: 1 of 2 sentence pairs also occur in {train} (first: line 2 = line 2 "
            "there)") in err
    code, err = check("--trainpref", train, "--validpref", test, "--testpref", train)
    assert code == 2 and "is given as training data and as a held-out set" in err


def generate_output(refs_as_fairseq_prints, hyps):
    lines = []
    for i, (t, h) in enumerate(zip(refs_as_fairseq_prints, hyps)):
        lines += [f"S-{i}\tsource {i}", f"T-{i}\t{t}", f"H-{i}\t-0.5\t{h}", f"D-{i}\t-0.5\t{h}"]
    return "\n".join(lines) + "\n"


def test_bleu_uses_the_raw_reference_not_fairseqs_unk_lines(tmp_path):
    """The reference as its own translation scores 100 with the reference's own length; against
    fairseq's T- lines (every out-of-vocabulary word <<unk>>, 5 tokens for sacreBLEU) it did not."""
    raw = ["das kätzchen schläft", "zwei hunde laufen schnell", "ein haus"]
    fairseq_t = ["das <<unk>> schläft", "zwei hunde laufen <<unk>>", "ein haus"]
    write(tmp_path / "gen.out", generate_output(fairseq_t, raw))
    write(tmp_path / "ref.de", "\n".join(raw) + "\n")
    proc = subprocess.run([*REPORT, str(tmp_path / "gen.out"), "--ref", str(tmp_path / "ref.de")],
                          capture_output=True, text=True)  # the command run.sh runs
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr  # no logging of fairseq's import
    assert "sacreBLEU = 100.00" in proc.stdout and "hyp_len = 9 ref_len = 9" in proc.stdout
    assert "exact matches: 3/3" in proc.stdout and "2 of 3 T- lines hold <unk>" in proc.stdout
    write(tmp_path / "short.de", "\n".join(raw[:2]) + "\n")
    code, _, err = report(str(tmp_path / "gen.out"), "--ref", str(tmp_path / "short.de"))
    assert code == 1 and "has only 2 lines" in err
    write(tmp_path / "long.de", "\n".join(raw + ["one more"]) + "\n")
    code, _, err = report(str(tmp_path / "gen.out"), "--ref", str(tmp_path / "long.de"))
    assert code == 1 and f"{tmp_path / 'long.de'}:4: no translation of this line" in err


def test_report_scores_the_detokenised_d_lines_and_says_so(tmp_path):
    """fairseq-generate --tokenizer moses prints tokenised H- lines and detokenised D- lines; the
    raw reference matches the D- lines. Scoring the H- lines (what the script did) gave a lower
    number without a word; the score line now names the lines, the reference and sacreBLEU's
    signature."""
    import sacrebleu

    raw = ["Das Kätzchen trägt ein T-Shirt.", "Er sagt 'nein' zum E-Mail-Konto."]
    tokenised = ["Das Kätzchen trägt ein T @-@ Shirt .", "Er sagt &apos; nein &apos; zum E @-@ Mail @-@ Konto ."]
    lines = []
    for i, (tok, detok) in enumerate(zip(tokenised, raw)):
        lines += [f"S-{i}\tsource {i}", f"T-{i}\t{tok}", f"H-{i}\t-0.5\t{tok}", f"D-{i}\t-0.5\t{detok}"]
    write(tmp_path / "gen.out", "\n".join(lines) + "\n")
    write(tmp_path / "ref.de", "\n".join(raw) + "\n")
    code, out, err = report(str(tmp_path / "gen.out"), "--ref", str(tmp_path / "ref.de"))
    assert code == 0, err
    first = out.splitlines()[0]
    assert first.startswith("sacreBLEU = 100.00  (BLEU = 100.00 ") and "exact matches: 2/2" in out
    assert first.endswith(f"[D- lines (detokenised) of {tmp_path / 'gen.out'} against {tmp_path / 'ref.de'} as it "
                          f"is; nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:{sacrebleu.__version__}]")
    # output without D- lines: the H- lines, said so
    write(tmp_path / "h.out", "\n".join(line for line in lines if not line.startswith("D-")) + "\n")
    code, out, err = report(str(tmp_path / "h.out"), "--ref", str(tmp_path / "ref.de"))
    first = out.splitlines()[0]
    assert not first.startswith("sacreBLEU = 100.00") and "[H- lines (no D- lines in it) of" in first


@pytest.mark.parametrize("args,message", [
    (["--minutes", "abc"], "--minutes abc: give the training time in minutes, a positive number"),
    (["--minutes", "0"], "--minutes 0: give the training time in minutes"),
    (["--updates", "0"], "--updates 0: give the number of updates, a positive whole number"),
    (["--updates", "1e3"], "--updates 1e3: give the number of updates"),
    (["--seed", "1.5"], "--seed 1.5: give a non-negative integer"),
    (["--arch"], "--arch needs a value"),
    (["--bogus"], "unknown option --bogus"),
])
def test_run_sh_refuses_bad_options_in_one_line(args, message, tmp_path):
    # --work-dir first and a timeout: a run.sh that accepted the option would start a real run
    proc = subprocess.run(["bash", str(REPO / "run.sh"), "--work-dir", str(tmp_path), *args],
                          capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=120)
    assert proc.returncode == 2
    assert proc.stderr.startswith(f"run.sh: {message}") and proc.stderr.count("\n") == 1
