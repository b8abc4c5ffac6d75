"""Faults of long runs and at fairseq's edges (fairseq_fixes: save_dir.py,
whole_checkpoints.py, divergence.py, clean_exit.py, resume_architecture.py, resume_state.py, precision.py,
batching.py, interactive_input.py; the plugin's checkpoint_identity.py, option_checks.py, data_directories.py,
restore_file.py):
each a clear error naming the file, flag or value, nothing lost, nothing silent.

fairseq runs in this process (tests.helpers.fairseq_cli) wherever the process itself is
not what is tested: an error arrives as the exception the terminal shows as one line.
"""
import errno
import hashlib
import os
import re
import shutil
import subprocess
import sys
import zipfile

import pytest
import torch

from fairseq_luong.errors import ConfigError, UserError
from tests.helpers import REPO, USER_DIR, bin_path, fairseq_cli

TRAIN = ["--user-dir", USER_DIR, "--arch", "luong_tiny", "--optimizer", "adam", "--lr", "0.005",
         "--max-tokens", "1000", "--no-progress-bar", "--log-format", "simple", "--log-interval", "1",
         "--num-workers", "0", "--no-epoch-checkpoints"]


def train(data, save_dir, *extra):
    return fairseq_cli("train", [data, *TRAIN, "--save-dir", save_dir, *extra])


def sha(path):
    return hashlib.sha1(path.read_bytes()).hexdigest()


@pytest.fixture(scope="module")
def trained(data_bin, tmp_path_factory):
    """luong_tiny trained 2 updates on the number corpus (en->de, joined dictionary)."""
    save = tmp_path_factory.mktemp("trained") / "ckpt"
    train(data_bin / "bin", save, "--max-update", "2")
    return save / "checkpoint_last.pt"


# ------------------------------------------------------------------ fp16 on the CPU
def test_fp16_on_the_cpu_trains_through_an_overflow_and_lowers_the_loss_scale(data_bin, tmp_path, one_thread):
    """fairseq's overflow handler calls .cuda(): on a torch without CUDA the stand-in of the
    GPU's fp16 path died at its first overflow. A loss scale of 2^20 overflows float16 at once."""
    _, log = train(data_bin / "bin", tmp_path / "ckpt", "--fp16", "--memory-efficient-fp16", "--cpu",
                   "--fp16-init-scale", str(2 ** 20), "--max-update", "6")
    assert "gradient overflow detected, ignoring gradient, setting loss scale to: 524288.0" in log
    scales = [float(x) for x in re.findall(r"loss_scale=([\d.]+)", log)]
    assert scales and max(scales) < 2 ** 20
    assert "num_updates=6" in log and (tmp_path / "ckpt" / "checkpoint_last.pt").exists()


def test_a_diverging_run_ends_in_one_line_naming_the_last_checkpoint(data_bin, tmp_path, one_thread):
    with pytest.raises(UserError, match=r"training diverged: Minimum loss scale reached \(65536.0\).*; no checkpoint "
                                        r"was saved in .* yet: train again with a lower --lr"):
        train(data_bin / "bin", tmp_path / "ckpt", "--fp16", "--memory-efficient-fp16", "--cpu",
              "--fp16-init-scale", str(2 ** 20), "--min-loss-scale", "65536", "--max-update", "6")


# ------------------------------------------------------------------ saving
@pytest.mark.parametrize("fails", ["torch.save", "the copy to checkpoint_last.pt"])
def test_a_full_disk_while_saving_keeps_the_last_checkpoint_and_leaves_no_tmp(data_bin, tmp_path, monkeypatch,
                                                                              fails, one_thread):
    """The first save of a resumed run fails half-way (ENOSPC): the checkpoint saved before is
    byte for byte what it was, no .tmp is left, and the line says how to go on."""
    save = tmp_path / "ckpt"
    train(data_bin / "bin", save, "--max-update", "2")
    before = sha(save / "checkpoint_last.pt")

    def full(*args, **kwargs):
        dst = args[1]
        with open(dst, "wb") as f:  # half a file, then the disk is full
            f.write(b"x" * 100)
        raise OSError(errno.ENOSPC, "No space left on device")

    if fails == "torch.save":
        monkeypatch.setattr(torch, "save", lambda obj, f, *a, **k: full(None, f.name))
    else:
        monkeypatch.setattr(shutil, "copyfile", full)
    with pytest.raises(UserError, match=r"cannot write checkpoint .*: No space left on device; nothing half-written "
                                        r"is left, and .* keeps the checkpoints saved before \(.*checkpoint_last.pt"
                                        r"\): free space \(or give another --save-dir\), then run the same command to "
                                        r"resume from checkpoint_last.pt"):
        train(data_bin / "bin", save, "--max-update", "8")
    assert sha(save / "checkpoint_last.pt") == before
    assert not list(save.glob("*.tmp"))


def _file_size_limit(limit):
    """A child's writes past ``limit`` bytes fail (EFBIG) as on a full disk: inside torch's
    zip writer that is a RuntimeError, not an OSError."""
    import resource
    import signal

    def limit_writes():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    return limit_writes


@pytest.mark.parametrize("command", ["fairseq-train", "average_checkpoints.py"])
def test_a_write_failing_inside_torchs_zip_writer_is_one_line_and_loses_nothing(data_bin, tmp_path, command):
    """torch.save reports a write that fails half-way through its zip writer as
    ``RuntimeError: [enforce fail at inline_container.cc:672] . unexpected pos ...``: made real
    here by a file-size limit on the child process. The line is the full-disk one, the
    checkpoints saved before are byte for byte what they were, and no .tmp is left."""
    save = tmp_path / "ckpt"
    train(data_bin / "bin", save, "--max-update", "2")
    last = save / "checkpoint_last.pt"
    before = sha(last)
    if command == "fairseq-train":
        cmd = [bin_path("fairseq-train"), str(data_bin / "bin"), *TRAIN, "--save-dir", str(save), "--max-update", "8"]
        expected = (r"fairseq-train: error: cannot write checkpoint .*checkpoint\w*\.pt: the write failed inside "
                    r"torch's zip writer \(\[enforce fail at inline_container.cc:\d+\] \. unexpected pos .*\); "
                    r"nothing half-written is left, and .* keeps the checkpoints saved before \(.*checkpoint_last.pt")
    else:
        cmd = [sys.executable, str(REPO / "scripts" / "train" / "average_checkpoints.py"), "--inputs", str(last),
               str(last), "--output", str(tmp_path / "avg.pt")]
        expected = (r"error: cannot write .*avg.pt: the write failed inside torch's zip writer .*; nothing "
                    r"half-written is left")
    # the limit falls inside the largest tensor, which torch's zip writer writes in one call
    # that the system cuts short (a write inside Python's buffer fails as an OSError instead)
    with zipfile.ZipFile(last) as z:
        largest = max(z.infolist(), key=lambda info: info.file_size)
    limit = largest.header_offset + largest.file_size // 2
    proc = subprocess.run(cmd, capture_output=True, text=True, preexec_fn=_file_size_limit(limit),
                          env=dict(os.environ, OMP_NUM_THREADS="1", PYTHONWARNINGS="ignore"))
    assert proc.returncode != 0
    assert re.search(expected, proc.stderr), proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr
    assert sha(last) == before
    assert not list(tmp_path.rglob("*.tmp")) and not (tmp_path / "avg.pt").exists()


def test_averaging_onto_a_full_disk_leaves_nothing_half_written(trained, tmp_path, monkeypatch):
    import runpy

    def full(obj, f, *args, **kwargs):
        f.write(b"x" * 100)
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(torch, "save", full)
    monkeypatch.setattr(sys, "argv", ["average_checkpoints.py", "--inputs", str(trained), str(trained),
                                      "--output", str(tmp_path / "avg.pt")])
    with pytest.raises(SystemExit, match=r"error: cannot write .*avg.pt: No space left on device; nothing "
                                         r"half-written is left"):
        runpy.run_path(str(REPO / "scripts" / "train" / "average_checkpoints.py"), run_name="__main__")
    assert list(tmp_path.iterdir()) == []


# ------------------------------------------------------------------ the save-dir
def test_save_dir_in_use_is_refused_and_a_killed_holder_leaves_no_lock(data_bin, tmp_path, one_thread):
    from fairseq_fixes.save_dir import LOCK_NAME, SaveDirLock

    save = tmp_path / "ckpt"
    with SaveDirLock(str(save)):  # another training holds it
        with pytest.raises(UserError, match=rf"--save-dir {save} is in use by another training \(pid {os.getpid()} "
                                            r"on .*\): its checkpoints would overwrite each other"):
            train(data_bin / "bin", save, "--max-update", "1")
    # a holder killed with SIGKILL: the lock goes with it
    holder = subprocess.Popen([sys.executable, "-c", "import fcntl, sys, time; f = open(sys.argv[1], 'a+'); "
                               "fcntl.flock(f, fcntl.LOCK_EX); print('locked', flush=True); time.sleep(120)",
                               str(save / LOCK_NAME)], stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline().strip() == "locked"
    with pytest.raises(UserError, match="is in use by another training"):
        train(data_bin / "bin", save, "--max-update", "1")
    holder.kill()
    holder.wait()
    train(data_bin / "bin", save, "--max-update", "1")
    assert (save / "checkpoint_last.pt").exists()


def test_save_dir_that_is_a_file_is_refused_before_any_work(data_bin, tmp_path):
    (tmp_path / "afile").write_text("x")
    with pytest.raises(UserError, match=r"--save-dir .*afile is a file, not a folder"):
        train(data_bin / "bin", tmp_path / "afile", "--max-update", "1")


def test_a_restore_file_that_is_not_there_is_refused_not_trained_from_scratch(data_bin, trained, tmp_path,
                                                                              monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(UserError, match=r"--restore-file checkpoint_last2.pt: no such checkpoint \(fairseq would "
                                        r"train from scratch\)$"):
        train(data_bin / "bin", trained.parent, "--max-update", "4", "--restore-file", "checkpoint_last2.pt")
    with pytest.raises(UserError, match=rf"--restore-file checkpoint_best.pt: no such checkpoint .*; "
                                        rf"{trained.parent}/checkpoint_best.pt exists: fairseq reads --restore-file "
                                        "from the current folder"):
        train(data_bin / "bin", tmp_path / "new", "--max-update", "4", "--restore-file", "checkpoint_best.pt",
              "--save-dir", trained.parent)


def test_resuming_into_a_save_dir_of_another_architecture_names_both(data_bin, trained, tmp_path):
    save = tmp_path / "ckpt"
    shutil.copytree(trained.parent, save)
    (save / ".fairseq_luong.lock").unlink(missing_ok=True)
    args = [a if a != "luong_tiny" else "rnnsearch_tiny" for a in TRAIN]
    with pytest.raises(UserError, match=r"checkpoint_last.pt holds a luong_tiny model, and this command trains "
                                        r"rnnsearch_tiny: give another --save-dir \(or --restore-file\)"):
        fairseq_cli("train", [data_bin / "bin", *args, "--save-dir", save, "--max-update", "4"])
    with pytest.raises(UserError, match=r"holds a luong_tiny whose parameters differ from this command's \(Missing "
                                        r"key\(s\) in state_dict: .*\): give another --save-dir .* give the options"):
        train(data_bin / "bin", save, "--max-update", "4", "--encoder-hidden-size", "24")


# ------------------------------------------------------------------ option values
GENERATE = ["--user-dir", USER_DIR, "--batch-size", "8", "--max-len-b", "5"]


@pytest.mark.parametrize("command,words,message", [
    ("train", ["--dropout", "1.5"], "--dropout 1.5: give a probability from 0 up to (not including) 1"),
    ("train", ["--encoder-memory-dropout", "-0.1"], "--encoder-memory-dropout -0.1: give a probability"),
    ("generate", ["--beam", "0"], "--beam 0: give a beam of at least 1"),
    ("generate", ["--beam", "2", "--nbest", "5"],
     "--nbest 5 is more than --beam 2: beam search keeps 2 hypotheses; give --beam 5 or more"),
    ("interactive", ["--batch-size", "5", "--buffer-size", "2"],
     "--batch-size 5 is more than the 2 line(s) fairseq-interactive reads at a time (--buffer-size 2)"),
    ("interactive", ["--batch-size", "3"], "--batch-size 3 is more than the 1 line(s) fairseq-interactive reads at a "
                                           "time (--buffer-size not given): give --buffer-size 3 or more"),
])
def test_option_values_fairseq_would_crash_on_are_refused_before_any_work(data_bin, trained, tmp_path, command,
                                                                          words, message):
    if command == "train":
        argv = [data_bin / "bin", *TRAIN, "--save-dir", tmp_path / "ckpt", "--max-update", "1", *words]
    else:
        argv = [data_bin / "bin", *GENERATE, "--path", trained, *words]
    with pytest.raises(ConfigError) as err:
        fairseq_cli(command, argv)
    assert str(err.value).startswith(message)
    assert not (tmp_path / "ckpt").exists()  # nothing ran


def test_validate_without_a_task_is_one_line(data_bin, trained):
    with pytest.raises(ConfigError, match=r"^no --task: this command has no default task; give the one the model "
                                          r"was trained with \(--task translation"):
        fairseq_cli("validate", [data_bin / "bin", "--user-dir", USER_DIR, "--path", trained])


def test_a_sentence_longer_than_max_tokens_is_named_with_the_value_to_give(data_bin, tmp_path):
    with pytest.raises(UserError, match=r"--max-tokens 5 is smaller than sentence \d+ of this split \((\d+) tokens, "
                                        r"end of sentence included\): give --max-tokens \1 or more"):
        train(data_bin / "bin", tmp_path / "ckpt", "--max-update", "1", "--max-tokens", "5")


# ------------------------------------------------------------------ data files
@pytest.mark.parametrize("cut", ["train.en-de.en.bin", "train.en-de.de.idx", "valid.en-de.de.idx:10"])
def test_a_binarized_split_cut_short_is_named_when_it_is_loaded(data_bin, tmp_path, cut):
    data = tmp_path / "bin"
    shutil.copytree(data_bin / "bin", data)
    name, _, size = cut.partition(":")
    path = data / name
    os.truncate(path, int(size) if size else path.stat().st_size - 30)
    want = {"train.en-de.en.bin": rf"{path} is cut short: its index .*train.en-de.en.idx puts \d[\d,]* sentences in "
                                  r"[\d,]+ bytes, the file has [\d,]+ bytes",
            "train.en-de.de.idx": rf"{path} is cut short: its header promises [\d,]+ sentences \([\d,]+ bytes\), the "
                                  r"file has [\d,]+ bytes",
            "valid.en-de.de.idx": rf"{path} holds 10 bytes, not even the 26-byte header"}[name]
    with pytest.raises(UserError, match=want + ": the copy or fairseq-preprocess that made it was cut short"):
        train(data, tmp_path / "ckpt", "--max-update", "1")


# ------------------------------------------------------------------ nothing silent
def test_a_checkpoint_run_in_the_other_direction_is_refused(data_bin, trained):
    """The joined dictionary has one size both ways: fairseq loaded the en->de model for
    de->en and translated garbage with exit status 0."""
    with pytest.raises(UserError, match=rf"{trained} was trained en->de, and this run translates de->en \(-s/-t, or "
                                        r"the language pair found in .*\): give -s en -t de"):
        fairseq_cli("generate", [data_bin / "bin", *GENERATE, "--path", trained, "-s", "de", "-t", "en"])


def test_a_data_folder_binarized_with_another_dictionary_is_refused(data_bin, trained, tmp_path):
    """The same symbols in another order: same sizes, other token ids."""
    words = (data_bin / "bin" / "dict.en.txt").read_text(encoding="utf-8").splitlines()
    (tmp_path / "dict.txt").write_text("\n".join(reversed(words)) + "\n", encoding="utf-8")
    fairseq_cli("preprocess", ["-s", "en", "-t", "de", "--testpref", data_bin / "raw" / "test", "--destdir",
                               tmp_path / "bin", "--srcdict", tmp_path / "dict.txt", "--tgtdict",
                               tmp_path / "dict.txt", "--workers", "1"])
    with pytest.raises(UserError, match=rf"{trained} was trained with another source dictionary than "
                                        rf"{tmp_path / 'bin'}/dict.en.txt \(the same number of symbols, \d+, but "
                                        r"other symbols or another order\)"):
        fairseq_cli("generate", [tmp_path / "bin", *GENERATE, "--path", trained])
    # the folder it was trained on still translates
    out, _ = fairseq_cli("generate", [data_bin / "bin", *GENERATE, "--path", trained])
    assert out.count("\nH-") + out.startswith("H-") >= 1


def test_a_data_folder_with_a_dictionary_of_another_size_is_named_not_the_overrides(data_bin, trained, tmp_path):
    """fairseq stopped in load_state_dict (with the plugin: a line blaming --model-overrides, which
    may hold only dropout); the dictionary is what does not fit, and it is checked first."""
    shutil.copytree(data_bin / "bin", tmp_path / "bin")
    for lang in ("en", "de"):
        with open(tmp_path / "bin" / f"dict.{lang}.txt", "a", encoding="utf-8") as f:
            f.write("".join(f"extra{i} 1\n" for i in range(8)))
    with pytest.raises(UserError) as err:
        fairseq_cli("generate", [tmp_path / "bin", *GENERATE, "--path", trained, "--model-overrides",
                                 "{'dropout': 0.1}"])
    assert re.fullmatch(rf"{trained} was trained with another source dictionary than {tmp_path / 'bin'}/dict.en.txt "
                        r"\((\d+) symbols then, (\d+) now\), so its token ids would mean other words: use the data "
                        r"folder it was trained on, or binarize with fairseq-preprocess --srcdict/--tgtdict from its "
                        r"training data", str(err.value))


@pytest.mark.parametrize("what", ["text", "a malicious checkpoint, with TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD=1"])
def test_a_path_that_is_not_a_checkpoint_is_one_line(data_bin, tmp_path, monkeypatch, what):
    """fairseq-generate --path: a text file gave a KeyError from torch's unpickler; with the
    variable set, a malicious checkpoint's code ran and fairseq-generate exited 0."""
    path = tmp_path / "model.pt"
    if what == "text":
        path.write_text("not a model\n", encoding="utf-8")
        message = (f"{path} is not a checkpoint: it holds text (it starts with 'not a model'); give a checkpoint "
                   "file (fairseq-train writes checkpoint_best.pt, checkpoint_last.pt and checkpointN.pt into its "
                   "--save-dir)")
    else:
        class Evil:
            def __reduce__(self):
                return (os.system, (f"echo pwned > {tmp_path / 'pwned'}",))

        monkeypatch.setenv("TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD", "1")
        torch.save({"model": {}, "cfg": {}, "x": Evil()}, path)
        message = f"refusing to load checkpoint {path}: it holds posix.system, which fairseq checkpoints never contain"
    with pytest.raises(UserError) as err:
        fairseq_cli("generate", [data_bin / "bin", *GENERATE, "--path", path])
    assert str(err.value).startswith(message) and "\n" not in str(err.value)
    assert not (tmp_path / "pwned").exists()


STREAM = [b"one two", b"three \xff four", b"", b"five six", b"  ", b"\xc3( seven", b"eight", b"nine ten", b"eleven"]


@pytest.mark.parametrize("buffer_size", [1, 2, 4, 64])
def test_a_line_of_invalid_utf8_is_translated_with_a_warning_and_the_stream_goes_on(data_bin, trained, tmp_path,
                                                                                     buffer_size):
    """One bad line ended fairseq-interactive's stream, losing the lines still in the buffer and
    every line after it. Now each line gets its one H- line, in order, at any --buffer-size (a
    bad line at the start, inside and at the end of a buffer; empty lines too), and a warning
    names each bad line and its H- number."""
    (tmp_path / "in.txt").write_bytes(b"\n".join(STREAM) + b"\n")
    out, log = fairseq_cli("interactive", [data_bin / "bin", "--user-dir", USER_DIR, "--path", trained, "--input",
                                           tmp_path / "in.txt", "--buffer-size", buffer_size, "--max-len-b", "3"])
    assert [line.split("\t")[0] for line in out.splitlines() if line.startswith("H-")] == [
        f"H-{i}" for i in range(len(STREAM))]
    warned = [line for line in log.splitlines() if "not valid UTF-8" in line]
    assert warned == [
        f"WARNING | fairseq_fixes.interactive_input | {tmp_path / 'in.txt'}:{n}: not valid UTF-8 ({why} at "
        f"byte {byte}): its bad bytes are read as U+FFFD (\ufffd), and the line is translated as such (H-{n - 1}); "
        "fairseq-interactive reads UTF-8 text" for n, why, byte in ((2, "invalid start byte", 7),
                                                                   (6, "invalid continuation byte", 1))]


def test_invalid_utf8_on_standard_input_is_a_warning_in_any_locale(data_bin, trained):
    """The process is the subject: its locale decides how Python decodes stdin."""
    for lang in ("C.UTF-8", "en_US.UTF-8"):
        env = dict(os.environ, LANG=lang, LC_ALL=lang, PYTHONWARNINGS="ignore", OMP_NUM_THREADS="1")
        proc = subprocess.run([os.path.join(os.path.dirname(sys.executable), "fairseq-interactive"),
                               str(data_bin / "bin"), "--user-dir", USER_DIR, "--path", str(trained), "--buffer-size",
                               "2", "--max-len-b", "3"],
                              input=b"one two\nthree \xff four\nfive\n", capture_output=True, env=env)
        err = proc.stderr.decode("utf-8", "replace")
        assert proc.returncode == 0 and "Traceback" not in err, (lang, err[-2000:])
        assert ("standard input:2: not valid UTF-8 (invalid start byte at byte 7): its bad bytes are read as U+FFFD "
                "(\ufffd), and the line is translated as such (H-1)") in err
        hypotheses = [line.split("\t")[0] for line in proc.stdout.decode().splitlines() if line.startswith("H-")]
        assert hypotheses == ["H-0", "H-1", "H-2"], (lang, proc.stdout.decode()[-2000:])


@pytest.mark.parametrize("script,args,message", [
    ("aer.py", ["EMPTY", "EMPTY"], "error: EMPTY is empty: no gold alignment to score against"),
    ("bleu_by_length.py", ["--source", "EMPTY", "--reference", "EMPTY", "--png", "OUT.png", "EMPTY"],
     "error: EMPTY is empty: no sentence to group and score"),
    ("diagonal_align.py", ["--source", "EMPTY", "--target", "EMPTY"], "error: EMPTY is empty: no sentence to align"),
])
def test_analysis_scripts_refuse_an_empty_input(tmp_path, script, args, message):
    empty = tmp_path / "empty.txt"
    empty.write_text("")
    args = [a.replace("EMPTY", str(empty)).replace("OUT", str(tmp_path / "out")) for a in args]
    proc = subprocess.run([sys.executable, str(REPO / "scripts" / "eval" / script), *args], capture_output=True,
                          text=True, env=dict(os.environ, PYTHONWARNINGS="ignore"))
    assert proc.returncode == 1 and proc.stderr.strip() == message.replace("EMPTY", str(empty))


def test_a_training_that_ends_inside_an_epoch_exits_cleanly(tmp_path):
    """fairseq's background batch consumer (a daemon thread) was still collating when Python
    finalized, and the process aborted after 'done training' (std::terminate, status 134):
    the process's exit status is the subject, so it runs as a process."""
    raw = tmp_path / "raw"
    subprocess.run([sys.executable, str(REPO / "scripts" / "data" / "make_number_corpus.py"), "--out", str(raw),
                    "--train", "4000", "--valid", "20", "--test", "20", "--seed", "11"], check=True,
                   capture_output=True)
    fairseq_cli("preprocess", ["-s", "en", "-t", "de", "--joined-dictionary", "--trainpref", raw / "train",
                               "--validpref", raw / "valid", "--destdir", tmp_path / "bin", "--workers", "1"])
    proc = subprocess.run([os.path.join(os.path.dirname(sys.executable), "fairseq-train"), str(tmp_path / "bin"),
                           "--user-dir", USER_DIR, "--arch", "luong_global_general", "--encoder-embed-dim", "16",
                           "--decoder-embed-dim", "16", "--encoder-hidden-size", "16", "--decoder-hidden-size", "16",
                           "--optimizer", "adam", "--lr", "0.003", "--max-tokens", "3000", "--num-workers", "0",
                           "--max-update", "20", "--disable-validation", "--no-save",
                           "--save-dir", str(tmp_path / "ckpt")],  # made even with --no-save: not in the checkout
                          capture_output=True, text=True,
                          env=dict(os.environ, OMP_NUM_THREADS="1", PYTHONWARNINGS="ignore"))
    assert "done training" in proc.stdout + proc.stderr
    assert proc.returncode == 0 and "terminate called" not in proc.stderr, proc.stderr[-2000:]


PLATEAU = ["--lr-scheduler", "reduce_lr_on_plateau", "--lr-shrink", "0.5", "--lr-threshold", "0.5"]


def epochs(log):
    """(rate, validation loss) of each epoch trained, from fairseq's end-of-epoch lines."""
    rates = [float(r) for r in re.findall(r"\| train \| epoch \d+ \|.*? \| lr ([\d.e-]+) \|", log)]
    losses = [float(v) for v in re.findall(r"\| valid \| epoch \d+ \| valid on 'valid' subset \| loss ([\d.]+) \|",
                                            log)]
    return list(zip(rates, losses))


# patience 2, stopped after epoch 3: the checkpoint holds one bad epoch counted (epoch 2), epoch 3's is the step
@pytest.mark.parametrize("patience,stop_after", [(0, 2), (2, 3)])
def test_a_plateau_schedule_resumed_between_epochs_is_the_uninterrupted_one(data_bin, tmp_path, patience, stop_after):
    """--lr-scheduler reduce_lr_on_plateau, stopped after an epoch and resumed from
    checkpoint_last.pt, trains at the rates (and to the validation losses) of the same run
    without the stop. fairseq saves that checkpoint before the epoch's plateau step and skips
    the step on resume (a halving one epoch late, a stale best), and loses --lr-patience's
    count of bad epochs (fairseq_fixes/resume_state.py). --lr-threshold 0.5: every epoch
    after the first is a bad one."""
    args = [*PLATEAU, "--lr-patience", str(patience), "--seed", "1"]
    whole = epochs(train(str(data_bin / "bin"), tmp_path / "whole", *args, "--max-epoch", "5")[1])
    first = epochs(train(str(data_bin / "bin"), tmp_path / "stopped", *args, "--max-epoch", str(stop_after))[1])
    rest = epochs(train(str(data_bin / "bin"), tmp_path / "stopped", *args, "--max-epoch", "5")[1])
    assert len({r for r, _ in whole}) == {0: 4, 2: 2}[patience]  # halvings were due
    assert [r for r, _ in first + rest] == [r for r, _ in whole]
    # the losses as logged (3 decimals), equal: the resumed epochs train on the same batches (batching.py)
    assert [loss for _, loss in first + rest] == [loss for _, loss in whole]


def test_a_training_stopped_and_resumed_stops_early_where_the_uninterrupted_one_does(data_bin, tmp_path):
    """--patience 2 at rate 0: every validation after the first is no better, so the training
    stops after epoch 3. Stopped after epoch 2 (one validation counted) and resumed, it stopped
    after epoch 5: fairseq does not save should_stop_early's best and count, and the resumed
    process took epoch 3's validation as a new best (fairseq_fixes/resume_state.py)."""
    args = ["--patience", "2", "--lr", "0", "--seed", "1"]
    whole = train(str(data_bin / "bin"), tmp_path / "whole", *args, "--max-epoch", "9")[1]
    first = train(str(data_bin / "bin"), tmp_path / "stopped", *args, "--max-epoch", "2")[1]
    saved = torch.load(tmp_path / "stopped" / "checkpoint_last.pt", weights_only=True)["extra_state"]
    rest = train(str(data_bin / "bin"), tmp_path / "stopped", *args, "--max-epoch", "9")[1]
    stop = "early stop since valid performance hasn't improved for last 2 runs"
    assert stop in whole and stop in rest and stop not in first
    assert saved["should_stop_early"] == {"best": epochs(first)[0][1], "num_runs": 1}
    assert epochs(first + rest) == epochs(whole) and len(epochs(whole)) == 3
    # a new training in the same process starts with no count: it runs its 3 epochs again
    assert len(epochs(train(str(data_bin / "bin"), tmp_path / "again", *args, "--max-epoch", "9")[1])) == 3


@pytest.mark.parametrize("stop", ["after epoch 2", "inside epoch 3"])
def test_a_training_stopped_and_resumed_trains_on_the_uninterrupted_ones_batches(data_bin, tmp_path, one_thread,
                                                                                 stop):
    """ve-fairseq built a process's batches from the permutation of the epoch it started at, so a
    training resumed after epoch 2 trained epochs 3 and 4 on other batches (its first update of
    epoch 3 already differed; fairseq_fixes/batching.py). Now every update's loss and the final
    weights are those of the uninterrupted training, to the bit; also when it stopped inside an
    epoch (--max-update) and resumes from that epoch's next batch."""
    args = ["--dropout", "0.2", "--seed", "1", "--clip-norm", "5"]

    def losses(log):
        return re.findall(r"epoch (\d+):\s+(\d+) / \d+ loss=([\d.]+)", log)

    whole = losses(train(str(data_bin / "bin"), tmp_path / "whole", *args, "--max-epoch", "4")[1])
    per_epoch = sum(epoch == "001" for epoch, _, _ in whole)
    until = (["--max-epoch", "2"] if stop == "after epoch 2"
             else ["--max-update", str(2 * per_epoch + per_epoch // 2)])  # half of epoch 3
    stopped = losses(train(str(data_bin / "bin"), tmp_path / "stopped", *args, *until)[1])
    resumed = losses(train(str(data_bin / "bin"), tmp_path / "stopped", *args, "--max-epoch", "4")[1])
    # it resumes at epoch 3's first batch, or at the one after the half it trained
    assert per_epoch >= 4 and resumed[0][:2] == ("003", "1" if stop == "after epoch 2" else str(per_epoch // 2 + 1))
    assert stopped + resumed == whole and whole[-1][0] == "004"
    a, b = (torch.load(tmp_path / d / "checkpoint_last.pt", weights_only=True)["model"] for d in ("whole", "stopped"))
    assert all(torch.equal(a[k], b[k]) for k in a)
