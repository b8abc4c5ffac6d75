"""End to end through fairseq's own CLI with --user-dir: preprocess -> train -> generate
(beam 3, --print-alignment) -> interactive, for every arch; ensembles; resuming; checkpoints."""
import os
import re
import signal
import subprocess
import sys

import pytest

from tests.helpers import LUONG_ARCHS, REPO, USER_DIR, bin_path, cli, cli_error, error_line, run

TINY = ["--encoder-embed-dim", "16", "--encoder-hidden-size", "16",
        "--decoder-embed-dim", "16", "--decoder-hidden-size", "16", "--location-max-len", "40"]
RNNSEARCH_TINY = ["--encoder-embed-dim", "16", "--encoder-hidden-size", "16", "--decoder-embed-dim", "16",
                  "--decoder-hidden-size", "16", "--init-uniform", "0.1"]
TRAIN = ["--optimizer", "adam", "--lr", "0.005", "--max-tokens", "1500",
         "--criterion", "label_smoothed_cross_entropy", "--label-smoothing", "0.1",
         "--no-epoch-checkpoints", "--num-workers", "0", "--seed", "1", "--log-format", "simple",
         "--log-interval", "1", "--disable-validation"]


_TRAINED = {}


def train(data_bin, arch, updates=4, save_dir=None, extra=()):
    save_dir = save_dir or data_bin / f"ckpt_{arch}"
    proc = cli("train", [str(data_bin / "bin"), "--user-dir", USER_DIR,
                         "--arch", arch, *(RNNSEARCH_TINY if arch.startswith("rnnsearch") else TINY), *TRAIN,
                         "--max-update", str(updates),
                         "--save-dir", str(save_dir), *extra])
    return save_dir / "checkpoint_last.pt", proc


def trained(data_bin, arch):
    if arch not in _TRAINED:
        _TRAINED[arch] = train(data_bin, arch)[0]
    return _TRAINED[arch]


def check_generate_output(out, n_sentences, alignments=True):
    hyps = re.findall(r"^H-(\d+)\t\S+\t(.*)$", out, re.M)
    aligns = dict(re.findall(r"^A-(\d+)\t(.*)$", out, re.M))
    srcs = dict(re.findall(r"^S-(\d+)\t(.*)$", out, re.M))
    assert len(hyps) == n_sentences, out[-2000:]
    assert len(aligns) == (n_sentences if alignments else 0)
    for sid, hyp in hyps if alignments else []:
        n_src, n_hyp = len(srcs[sid].split()), len(hyp.split())
        for link in aligns[sid].split():
            s, t = map(int, link.split("-"))
            assert 0 <= s < n_src and 0 <= t < n_hyp, (link, srcs[sid], hyp)
    return hyps


@pytest.mark.parametrize("arch", LUONG_ARCHS + ["rnnsearch_tiny"])
def test_train_generate_interactive(data_bin, arch):
    ckpt = trained(data_bin, arch)
    align = [] if arch == "luong_base" else ["--print-alignment"]
    gen = cli("generate", [str(data_bin / "bin"), "--user-dir", USER_DIR,
                           "--path", str(ckpt), "--beam", "3", "--batch-size", "5", *align, "--max-len-b", "20"])
    # all 12 test sentences, although 12 is no multiple of 8 (fairseq issue #5036)
    check_generate_output(gen.stdout, 12, alignments=bool(align))
    # --replace-unk for every arch with attention (zebras is outside the vocabulary)
    replace = ["--replace-unk"] if align else []
    inter = cli("interactive", [str(data_bin / "bin"), "--user-dir", USER_DIR,
                                "--path", str(ckpt), "-s", "en", "-t", "de", "--beam", "3", *align, *replace,
                                "--max-len-b", "20", "--buffer-size", "2"],
                input="twenty one zebras\nfour hundred\n\n")
    hyps = re.findall(r"^H-\d+\t\S+\t(.*)$", inter.stdout, re.M)
    assert len(hyps) == 3
    if replace:
        assert all("<unk>" not in h for h in hyps[:2]), hyps


@pytest.mark.parametrize("flag", ["--print-alignment", "--replace-unk"])
def test_alignment_without_attention_is_a_clear_error(data_bin, flag):
    err = cli_error("interactive", [str(data_bin / "bin"), "--user-dir", USER_DIR,
                                    "--path", str(trained(data_bin, "luong_base")), "-s", "en", "-t", "de", flag],
                    input="twenty one\n")
    assert err == ("fairseq-interactive: error: this model has no attention (--no-attention / luong_base), so "
                   "it has no alignments: drop --print-alignment and --replace-unk")


def test_relative_user_dir_from_repository_root(data_bin):
    ckpt = trained(data_bin, "luong_localp")
    proc = run([bin_path("fairseq-generate"), str(data_bin / "bin"), "--user-dir", "fairseq_luong",
                "--path", str(ckpt), "--beam", "2", "--max-len-b", "10"], cwd=str(REPO))
    check_generate_output(proc.stdout, 12, alignments=False)


@pytest.mark.parametrize("archs", [("luong_localp", "luong_global_dot"), ("rnnsearch_tiny", "luong_localp")])
def test_ensemble_of_two_different_archs_decodes(data_bin, archs):
    paths = ":".join(str(trained(data_bin, a)) for a in archs)
    proc = cli("generate", [str(data_bin / "bin"), "--user-dir", USER_DIR,
                            "--path", paths, "--beam", "3", "--print-alignment", "--max-len-b", "20"])
    check_generate_output(proc.stdout, 12)


def test_training_resumes_from_checkpoint_last(data_bin, tmp_path):
    ckpt, _ = train(data_bin, "luong_global_general", updates=3, save_dir=tmp_path)
    _, proc = train(data_bin, "luong_global_general", updates=6, save_dir=tmp_path)
    log = proc.stdout + proc.stderr
    assert re.search(r"Loaded checkpoint .*checkpoint_last\.pt \(epoch \d+ @ 3 updates\)", log), log[-3000:]
    assert "num_updates=6" in log or "num_updates 6" in log


@pytest.mark.parametrize("arch", ["luong_global_general", "rnnsearch_tiny"])
def test_fused_criterion_trains_like_fairseqs(data_bin, tmp_path, arch):
    """Same seed, same batches: fairseq-train logs the same losses and gradient norms
    (train, every update, and valid) with --criterion fused_label_smoothed_cross_entropy
    as with label_smoothed_cross_entropy."""
    sizes = RNNSEARCH_TINY if arch.startswith("rnnsearch") else TINY
    logs = []
    for criterion, extra in (("label_smoothed_cross_entropy", []),
                             ("fused_label_smoothed_cross_entropy", ["--loss-chunk-tokens", "100"])):
        flags = [criterion if f == "label_smoothed_cross_entropy" else f for f in TRAIN
                 if f != "--disable-validation"]
        proc = cli("train", [str(data_bin / "bin"), "--user-dir", USER_DIR,
                             "--arch", arch, *sizes, *flags, *extra, "--max-update", "5",
                             "--save-dir", str(tmp_path / criterion)])
        log = proc.stdout + proc.stderr
        updates = re.findall(r"train_inner .* loss=([0-9.]+), nll_loss=([0-9.]+).* gnorm=([0-9.]+)", log)
        valid = re.findall(r"valid on 'valid' subset \| loss ([0-9.]+) \| nll_loss ([0-9.]+)", log)
        assert len(updates) == 5 and len(valid) == 1, log[-3000:]
        logs.append((updates, valid))
    (ref_updates, ref_valid), (updates, valid) = logs
    for ref, got in zip(ref_updates + ref_valid, updates + valid):
        assert [float(x) for x in got] == pytest.approx([float(x) for x in ref], abs=2e-3)


def test_corrupt_checkpoint_is_one_line_without_traceback(data_bin, tmp_path):
    bad = tmp_path / "checkpoint_last.pt"
    bad.write_bytes(trained(data_bin, "luong_tiny").read_bytes()[:5000])
    err = cli_error("generate", [str(data_bin / "bin"), "--user-dir", USER_DIR,
                                 "--path", str(bad), "--beam", "2"])
    assert err.startswith(f"fairseq-generate: error: cannot load checkpoint {bad}")
    assert "truncated or corrupt" in err


def test_checkpoint_without_user_dir_names_the_missing_option(data_bin):
    """fairseq alone crashes formatting its own message (KeyError: "'_name'"); the start-up hint
    that scripts/setup.sh installs names --user-dir, without loading the plugin."""
    err = error_line([bin_path("fairseq-generate"), str(data_bin / "bin"), "--beam", "2",
                      "--path", str(trained(data_bin, "luong_localp"))])
    assert err == (
        "fairseq-generate: error: model luong_localp comes from the fairseq_luong plugin, which is not "
        "loaded: add --user-dir fairseq_luong (from the repository root; from elsewhere --user-dir "
        "\"$(python -c 'import fairseq_luong, os; print(os.path.dirname(fairseq_luong.__file__))')\")"), err


def test_model_overrides_that_cannot_apply_are_refused(data_bin):
    from fairseq import checkpoint_utils

    from fairseq_luong.errors import UserError

    ckpt = [str(trained(data_bin, "luong_global_general"))]
    with pytest.raises(UserError, match=r"architecture of a trained model cannot change .* luong_global_general"):
        checkpoint_utils.load_model_ensemble(ckpt, arg_overrides={"arch": "luong_localp"})
    with pytest.raises(UserError, match="no setting 'droput'"):
        checkpoint_utils.load_model_ensemble(ckpt, arg_overrides={"droput": 0.5})
    with pytest.raises(UserError, match=r"weights do not fit .*'encoder_hidden_size': 32"):
        checkpoint_utils.load_model_ensemble(ckpt, arg_overrides={"encoder_hidden_size": 32})
    models, cfg = checkpoint_utils.load_model_ensemble(ckpt, arg_overrides={"dropout": 0.5})
    assert cfg.model.dropout == 0.5 and models[0].decoder.dropout_out.p == 0.5


def interactive_long(data_bin, lines):
    return cli("interactive", [str(data_bin / "bin"), "--user-dir", USER_DIR,
                               "--path", str(trained(data_bin, "luong_global_general")), "-s", "en", "-t", "de",
                               "--beam", "2", "--buffer-size", "2", "--batch-size", "2",
                               "--min-len", "3", "--max-len-b", "3"], input="\n".join(lines) + "\n")


def test_interactive_cuts_an_over_long_line_and_translates_the_rest(data_bin):
    """A 1,100-word line (the model takes 1,024 positions) used to end the session with
    'Size of sample #1 is invalid' and lose the lines after it; a translation that reaches
    fairseq's length limit is reported instead of cut silently."""
    lines = ["twenty one cats", " ".join(["one"] * 1100), "four hundred", "seven"]
    for _ in range(2):  # a second run in the same process counts its lines from 1 again
        proc = interactive_long(data_bin, lines)
    hyps = re.findall(r"^H-(\d+)\t\S+\t(.*)$", proc.stdout, re.M)
    assert [int(i) for i, _ in hyps] == [0, 1, 2, 3]
    assert all(len(h.split()) == 3 for _, h in hyps)
    sources = dict(re.findall(r"^S-(\d+)\t(.*)$", proc.stdout, re.M))
    assert len(sources["1"].split()) == 1023 and sources["2"] == "four hundred"
    log = proc.stdout + proc.stderr
    assert ("input line 2 has 1100 tokens (+ EOS), more than the model's 1024 source positions: "
            "translating its first 1023 tokens only (H-1)") in log
    assert re.search(r"2 of 2 translations stopped at the length limit of 3 tokens and are cut off: the "
                     r"limit is min\(--max-len-a 0 x \d+ \(longest source\) \+ --max-len-b 3, 1023\)",
                     log), log[-3000:]


@pytest.mark.parametrize("buffer", [1, 4])
def test_interactive_translates_a_line_over_max_tokens_in_a_batch_of_its_own(data_bin, buffer):
    """A line of more tokens than --max-tokens ended the session (fairseq's batch_by_size asserts):
    the rest of its buffer and every later line were lost. Now every line gets one H- line, in
    order, and a warning names the line that went alone."""
    lines = [f"{w} cats" for w in ("one", "two", "three", "four", "five")]
    lines[2] = " ".join(["seven"] * 120)
    proc = cli("interactive", [str(data_bin / "bin"), "--user-dir", USER_DIR,
                               "--path", str(trained(data_bin, "luong_global_general")), "-s", "en", "-t", "de",
                               "--beam", "2", "--buffer-size", str(buffer), "--max-tokens", "50",
                               "--max-len-b", "3"], input="\n".join(lines) + "\n")
    hyps = re.findall(r"^H-(\d+)\t", proc.stdout, re.M)
    assert [int(i) for i in hyps] == [0, 1, 2, 3, 4]
    sources = dict(re.findall(r"^S-(\d+)\t(.*)$", proc.stdout, re.M))
    assert sources["3"] == "four cats" and len(sources["2"].split()) == 120
    assert ("input line 3 has 120 tokens (+ EOS), more than --max-tokens 50: translating it in a batch of its own "
            "(H-2)") in proc.stdout + proc.stderr


def test_interactive_reads_a_multilingual_tasks_positions_for_the_runs_direction():
    """fairseq's multilingual tasks resolve their positions a language pair ({"de-en": (src, tgt)}):
    the cut reads the run's direction (an int compared with that dict was a TypeError that ended
    every multilingual fairseq-interactive; tests/test_coexistence.py runs one)."""
    from types import SimpleNamespace

    from fairseq_fixes.interactive_long_lines import source_limit

    cfg = SimpleNamespace(task=SimpleNamespace(source_lang="de", target_lang="en"))
    assert source_limit({"en-de": (10, 11), "de-en": (12, 13)}, cfg) == 12
    assert source_limit({"en-de": (10, 11)}, cfg) is None  # no entry for the direction: nothing cut
    assert source_limit((7, 8), cfg) == 7 and source_limit(5, cfg) == 5 and source_limit(None, cfg) is None


@pytest.mark.parametrize("command", ["generate", "interactive"])
def test_a_closed_output_pipe_ends_the_command_quietly(data_bin, command):
    """`fairseq-generate ... | head` ended in a BrokenPipeError traceback (and another at exit):
    now the command dies of SIGPIPE without a word, as other tools in a pipe do. The process
    itself is under test. Its output (about 150 KB) is more than the pipe and Python's buffer hold."""
    cmd = [bin_path(f"fairseq-{command}"), str(data_bin / "bin"), "--user-dir", USER_DIR,
           "--path", str(trained(data_bin, "luong_global_general")), "--max-len-b", "3"]
    if command == "generate":
        cmd += ["--gen-subset", "train", "--beam", "4", "--nbest", "4", "--batch-size", "100"]
        lines = b""
    else:
        cmd += ["-s", "en", "-t", "de", "--beam", "1", "--buffer-size", "100", "--batch-size", "100"]
        lines = b"twenty one cats\n" * 1500
    proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env=dict(os.environ, OMP_NUM_THREADS="1"))
    proc.stdin.write(lines)
    proc.stdin.close()
    first = proc.stdout.readline()
    proc.stdout.close()  # what head does after its lines
    err = proc.stderr.read().decode()
    proc.wait(timeout=300)
    assert first.startswith(b"S-"), (first, err[-2000:])
    assert "Traceback" not in err and "BrokenPipe" not in err, err[-2000:]
    assert proc.returncode == -signal.SIGPIPE, (proc.returncode, err[-2000:])


# ------------------------------------------------------------------ one line for each bad input

TRAIN_ONE = ["--optimizer", "adam", "--lr", "0.01", "--max-tokens", "500", "--max-update", "1",
             "--num-workers", "0", "--disable-validation"]


def separate_dictionaries(data_bin):
    """The number corpus binarized with one dictionary per language."""
    dest = data_bin / "bin_separate"
    if not (dest / "dict.de.txt").exists():
        cli("preprocess", ["-s", "en", "-t", "de", "--trainpref", str(data_bin / "raw" / "train"),
                           "--destdir", str(dest), "--workers", "1"])
    return dest


@pytest.mark.parametrize("separate,args,message", [
    (False, ["--arch", "luong_localp", "--local-window", "-1"], "--local-window must be >= 0, got -1"),
    (False, ["--arch", "luong_localp", "--local-window", "0"],
     "--local-window 0 with local-p: eq. 10's Gaussian has sigma = D/2 = 0; give D >= 1 (the paper uses 10), "
     "or local-m (--attention-type local_m), where D = 0 attends to position t alone"),
    (False, ["--arch", "luong_localp", "--attention-score", "location"],
     "the LocationScore is global-only (Luong et al. 2015, section 3.1): use --attention-type global"),
    (False, ["--arch", "luong_tiny", "--encoder-layers", "1", "--decoder-layers", "2"],
     "--encoder-layers (1) must equal --decoder-layers (2): each decoder layer starts from its encoder layer"),
    (True, ["--arch", "luong_tiny", "--share-all-embeddings"],
     "--share-all-embeddings requires a joint dictionary (fairseq-preprocess --joined-dictionary); these data "
     "have one dictionary per language"),
])
def test_options_a_model_cannot_use_are_one_line(data_bin, tmp_path, separate, args, message):
    data = separate_dictionaries(data_bin) if separate else data_bin / "bin"
    err = cli_error("train", [str(data), "--user-dir", USER_DIR, *TINY, *args, *TRAIN_ONE,
                              "--save-dir", str(tmp_path / "ckpt")])
    assert err == f"fairseq-train: error: {message}"


def test_local_m_with_window_zero_trains(data_bin, tmp_path):
    ckpt, _ = train(data_bin, "luong_localm", updates=1, save_dir=tmp_path, extra=["--local-window", "0"])
    assert ckpt.exists()


PREPROCESSED = "the --destdir of fairseq-preprocess, which holds dict.SRC.txt, dict.TGT.txt and the binarized splits"


@pytest.mark.parametrize("case", ["missing", "empty", "a file", "missing, with -s -t", "no train split"])
def test_data_directory_problems_are_one_line(data_bin, tmp_path, case):
    """fairseq: FileNotFoundError, 'Could not infer language pair', 'Dataset not found', each
    under a traceback."""
    data, langs = tmp_path / "data", []
    if case == "empty":
        data.mkdir()
    elif case == "a file":
        data.write_text("one two\n")
    elif case == "missing, with -s -t":
        langs = ["-s", "en", "-t", "de"]
    elif case == "no train split":
        data.mkdir()
        for lang in ("en", "de"):
            (data / f"dict.{lang}.txt").write_bytes((data_bin / "bin" / f"dict.{lang}.txt").read_bytes())
        langs = ["-s", "en", "-t", "de"]
    err = cli_error("train", [str(data), *langs, "--user-dir", USER_DIR, "--arch", "luong_tiny",
                              *TRAIN_ONE, "--save-dir", str(tmp_path / "ckpt")])
    want = {
        "missing": f"data directory {data} does not exist: give {PREPROCESSED}",
        "empty": f"data directory {data} holds no binarized data (fairseq takes the language pair from file "
                 f"names such as train.en-de.en.idx): give {PREPROCESSED}, or give -s SRC -t TGT",
        "a file": f"data directory {data} is not a directory: give {PREPROCESSED}",
        "missing, with -s -t": f"no dictionary {data}/dict.en.txt (the directory {data} does not exist): a data "
                               f"directory is {PREPROCESSED}",
        "no train split": f"no train split in {data}: fairseq looks for train.en-de.en (or train.de-en.en), which "
                          "fairseq-preprocess writes for the prefix it is given (--trainpref, --validpref, "
                          "--testpref)",
    }[case]
    assert err == f"fairseq-train: error: {want}"


def test_a_path_that_is_not_a_checkpoint_is_one_line(data_bin, tmp_path):
    """fairseq: 'OSError: Model file not found' under a traceback; a directory was called
    'truncated or corrupt (was training killed while saving?)'."""
    ckpt = trained(data_bin, "luong_tiny")  # the only .pt in its folder
    generate = [str(data_bin / "bin"), "--user-dir", USER_DIR, "--path"]
    writes = ("check --path; fairseq-train writes checkpoint_best.pt, checkpoint_last.pt and checkpointN.pt "
              "into its --save-dir")
    err = cli_error("generate", [*generate, str(tmp_path / "nosuch.pt")])
    assert err == (f"fairseq-generate: error: no checkpoint {tmp_path}/nosuch.pt ({tmp_path} holds no .pt file): "
                   f"{writes}")
    err = cli_error("generate", [*generate, str(ckpt.parent / "checkpoint_best.pt")])
    assert err == (f"fairseq-generate: error: no checkpoint {ckpt.parent}/checkpoint_best.pt ({ckpt.parent} holds "
                   f"checkpoint_last.pt): {writes}")
    err = cli_error("generate", [*generate, str(ckpt.parent)])
    assert err == (f"fairseq-generate: error: {ckpt.parent} is a directory, not a checkpoint file (it holds "
                   f"checkpoint_last.pt): give a checkpoint in it, e.g. {ckpt}")


@pytest.mark.parametrize("script", ["plot_attention", "force_align"])
def test_attention_tools_refuse_a_model_without_attention_in_one_line(data_bin, tmp_path, script):
    ckpt = trained(data_bin, "luong_base")
    raw = data_bin / "raw"
    extra = ["--lines", "1", "--out-dir", str(tmp_path)] if script == "plot_attention" else []
    err = error_line([sys.executable, str(REPO / "scripts" / "eval" / f"{script}.py"), str(data_bin / "bin"),
                      "--path", str(ckpt),
                      "--source", str(raw / "test.en"), "--target", str(raw / "test.de"), *extra])
    assert err == (f"{script}.py: error: {ckpt}: the model has no attention (luong_base, --no-attention; fairseq's "
                   "lstm with --decoder-attention 0), so it gives no alignments or attention maps: use a model "
                   "with attention")


def test_a_malformed_replace_unk_dictionary_is_one_line(data_bin, tmp_path):
    bad = tmp_path / "dict.txt"
    bad.write_text("zwanzig twenty\nthree drei extra\n", encoding="utf-8")
    err = cli_error("interactive", [str(data_bin / "bin"), "--user-dir", USER_DIR,
                                    "--path", str(trained(data_bin, "luong_tiny")), "-s", "en", "-t", "de",
                                    "--replace-unk", str(bad)], input="twenty one\n")
    assert err == (f"fairseq-interactive: error: {bad}:2: --replace-unk dictionary lines are 'source<TAB>target' "
                   "or 'source target', got 'three drei extra'")


def test_interactive_refuses_soft_alignments_in_one_line_before_translating(data_bin):
    """fairseq-interactive printed the first translation, then stopped with 'ValueError: too
    many values to unpack' (it prints every alignment as source-target pairs)."""
    proc = subprocess.run([bin_path("fairseq-interactive"), str(data_bin / "bin"), "--user-dir", USER_DIR,
                           "--path", str(trained(data_bin, "luong_tiny")), "-s", "en", "-t", "de",
                           "--print-alignment", "soft"], input="twenty one\n", capture_output=True, text=True,
                          env=dict(os.environ, PYTHONWARNINGS="ignore", OMP_NUM_THREADS="1"))
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr[-3000:]
    assert proc.stderr.strip().splitlines()[-1] == (
        "fairseq-interactive: error: --print-alignment soft: fairseq-interactive prints hard alignments only (its "
        "A- lines are source-target pairs); use --print-alignment, or fairseq-generate --print-alignment soft for "
        "the attention weights")
    assert "H-0" not in proc.stdout  # refused before any translation


def positional_scores(out):
    return {int(i): [float(x) for x in p.split()] for i, p in re.findall(r"^P-(\d+)\t(.*)$", out, re.M)}


@pytest.mark.parametrize("flag,said", [("--bf16", "LuongLSTMModel translates with bfloat16 weights"),
                                       ("--amp", "LuongLSTMModel translates under autocast to bfloat16 (CPU)")])
def test_generate_and_interactive_translate_in_the_precision_asked(data_bin, flag, said):
    """fairseq-generate and -interactive ignored --bf16 and --amp (float32, silently). The
    reference's scores (--score-reference: the same tokens whatever the precision) now
    differ from float32's by bfloat16 rounding, and the log says so."""
    ckpt = str(trained(data_bin, "luong_global_general"))
    score = [str(data_bin / "bin"), "--user-dir", USER_DIR, "--path", ckpt,
             "--score-reference", "--batch-size", "4"]
    if "float32" not in _TRAINED:
        _TRAINED["float32"] = positional_scores(cli("generate", score).stdout)
    full = _TRAINED["float32"]
    proc = cli("generate", [*score, flag])
    low = positional_scores(proc.stdout)
    assert said in proc.stderr and len(low) == len(full) == 12
    diffs = [abs(a - b) for i in full for a, b in zip(full[i], low[i])]
    assert len(diffs) == sum(len(p) for p in full.values())
    assert 0 < max(diffs) < 0.05
    inter = cli("interactive", [str(data_bin / "bin"), "--user-dir", USER_DIR, "--path", ckpt,
                                "-s", "en", "-t", "de", "--beam", "2", "--max-len-b", "5", flag], input="twenty one\n")
    assert said in inter.stderr and re.search(r"^H-0\t", inter.stdout, re.M)
