"""The benchmarks of scripts/bench: the speed table against fairseq's lstm (benchmark_speed.py,
with bench_device.py) and the op counts (count_step_ops.py), so that what a GPU session runs
cannot rot on a machine without one: the clock waits for the device, peak memory and the
device's name come from CUDA there, the busy share is read from a profiler trace, Luong et
al.'s shape is written as it says, the speed table runs end to end on the CPU in float32 and
float16 (its ratios the rates they divide) and the op counts give their table. No timing is
asserted. The GPU check and the session that runs it: test_gpu_session.py, test_gpu_paths.py."""
import os
import subprocess
import sys
import time
import types

import numpy as np
import pytest
import torch

from tests.helpers import (
    BENCH,
    REPO,
    SHARED_DATA,
    TINY_SPEED,
    load_bench,
    load_file,
)

machine = load_file("scripts/bench/machine.py")


def script(name, *args):
    """A script of scripts/bench as a process (one thread)."""
    env = dict(os.environ, PYTHONWARNINGS="ignore", OMP_NUM_THREADS="1")
    return subprocess.run([sys.executable, str(BENCH / f"{name}.py"), *map(str, args)], capture_output=True,
                          text=True, env=env)


def bench(*args):
    return script("benchmark_speed", *args)


def test_on_cuda_the_clock_is_read_after_the_gpu_has_finished_and_memory_is_the_allocators(monkeypatch):
    """A GPU runs what the host queued later: DeviceClock.now synchronises before it reads the
    clock; peak memory is torch.cuda.max_memory_allocated and the name the GPU's. CUDA stands
    faked here (the calls are recorded); on the CPU nothing of CUDA is called."""
    dev = load_bench("bench_device")
    calls = []
    monkeypatch.setattr(torch.cuda, "synchronize", lambda: calls.append("synchronize"))
    monkeypatch.setattr(torch.cuda, "max_memory_allocated", lambda: 3 * 2**20)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda index=0: f"NVIDIA H100 80GB HBM3 ({index})")
    monkeypatch.setattr(dev, "time", types.SimpleNamespace(perf_counter=lambda: calls.append("clock") or 7.0))
    gpu = dev.DeviceClock("cuda")
    assert gpu.now() == 7.0 and calls == ["synchronize", "clock"]
    assert gpu.peak_mb() == 3.0 and gpu.name() == "NVIDIA H100 80GB HBM3 (0)"
    calls.clear()
    cpu = dev.DeviceClock("cpu")
    cpu.now()
    assert calls == ["clock"]  # no synchronize: nothing of CUDA
    assert cpu.peak_mb() > 50  # the process's resident peak (MB): torch alone is more
    assert cpu.name(threads=2).startswith(f"CPU, 2 threads of {machine.describe_cpu()} (torch kernels ")
    with pytest.raises(ValueError):
        dev.DeviceClock("gpu")


def test_busy_time_is_the_union_of_the_devices_intervals_in_the_profiler_trace():
    dev = load_bench("bench_device")
    trace = {"traceEvents": [
        {"ph": "X", "cat": "kernel", "ts": 100, "dur": 10},
        {"ph": "X", "cat": "kernel", "ts": 105, "dur": 10},  # overlaps the first: 100-115
        {"ph": "X", "cat": "gpu_memcpy", "ts": 120, "dur": 5},  # 120-125
        {"ph": "X", "cat": "kernel", "ts": 121, "dur": 2},  # inside the copy
        {"ph": "X", "cat": "gpu_memset", "ts": 130, "dur": 1},
        {"ph": "X", "cat": "cpu_op", "ts": 0, "dur": 200},  # the host, not the GPU
        {"ph": "X", "cat": "cpu_op", "ts": 50, "dur": 300},  # nested and overlapping: 0-350
        {"ph": "i", "cat": "kernel", "ts": 400},  # an instant: no duration
    ]}
    assert dev.busy_seconds(trace, "cuda") == pytest.approx(21e-6)
    assert dev.busy_seconds(trace, "cpu") == pytest.approx(350e-6)
    assert dev.union_seconds([]) == 0


def test_the_busy_share_of_a_real_profile_tells_work_from_waiting():
    """torch.profiler on the CPU, the path the GPU takes but for the trace's categories: matrix
    products keep the device busy most of the time, sleeping does not."""
    dev = load_bench("bench_device")
    clock = dev.DeviceClock("cpu")
    a = torch.randn(256, 256)
    working = dev.busy_fraction(clock, lambda: [a @ a for _ in range(200)])
    waiting = dev.busy_fraction(clock, lambda: time.sleep(0.3))
    assert 0.5 < working <= 1.0 and waiting < 0.1, (working, waiting)


def test_the_papers_shape_is_a_50k_style_vocabulary_and_batches_of_128_sentences_of_about_30_words(tmp_path):
    bs = load_bench("benchmark_speed")
    from fairseq.data import Dictionary, data_utils

    bin_dir = bs.make_paper_shape(str(tmp_path), vocab=500, n_train=256, n_test=20)
    d = Dictionary.load(os.path.join(bin_dir, "dict.en.txt"))
    assert len(d) == 500  # the four specials among them, as fairseq's --nwordssrc counts
    assert open(os.path.join(bin_dir, "dict.de.txt")).read() == open(os.path.join(bin_dir, "dict.en.txt")).read()
    src = data_utils.load_indexed_dataset(os.path.join(bin_dir, "train.en-de.en"), d)
    tgt = data_utils.load_indexed_dataset(os.path.join(bin_dir, "train.en-de.de"), d)
    assert len(src) == len(tgt) == 256
    low, high = bs.PAPER_LENGTHS
    for s, t in zip(src, tgt):
        assert low + 1 <= len(s) <= high + 1 and abs(len(t) - len(s)) <= 3  # words + EOS
        for sentence in (s, t):
            assert sentence[-1] == d.eos() and bool((sentence[:-1] >= d.nspecial).all())
    words = torch.cat([s[:-1] for s in src]).numpy()
    counts = np.bincount(words, minlength=len(d))
    assert counts[d.nspecial] > 5 * counts[d.nspecial + 20:d.nspecial + 30].mean()  # Zipf: rank 1 is common
    # written once: a second call with the same parameters reuses the files
    stamp = os.path.getmtime(os.path.join(bin_dir, "train.en-de.en.bin"))
    assert bs.make_paper_shape(str(tmp_path), vocab=500, n_train=256, n_test=20) == bin_dir
    assert os.path.getmtime(os.path.join(bin_dir, "train.en-de.en.bin")) == stamp
    # the batches the workers time: 128 sentences each
    from fairseq import options, tasks

    args = options.parse_args_and_arch(options.get_training_parser(),
                                       [bin_dir, "--task", "translation", "--arch", "lstm", "-s", "en", "-t", "de"])
    samples = bs.batches(tasks.setup_task(args), {"shape": "paper"}, "train", 2)
    assert [s["nsentences"] for s in samples] == [128, 128]


@pytest.mark.full
def test_the_speed_benchmark_runs_on_the_cpu_with_busy_shares_and_a_checkout_before(tmp_path):
    """benchmark_speed.py end to end (tiny sizes, Luong et al.'s shape written small) in float32:
    one row per system, and with --before PATH each of our systems again from the plugin at PATH
    (here this checkout); every ratio is the row's rate over fairseq's lstm's in the same block;
    the device, torch, commit and PATH in the header, the busy shares as percentages. (--fp16 runs
    in test_gpu_paths.py's gpu_check --no-checks, --bf16 in test_gpu_session.py's CPU stand-in,
    both through the same benchmark.)"""
    proc = bench(*TINY_SPEED, "--precisions", "float32", "--systems", "lstm", "luong_global_general",
                 "--before", REPO, "--busy", "--busy-steps", 1, "--work", tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = proc.stdout.splitlines()
    assert lines[0].startswith(f"# device CPU, 1 thread of {machine.describe_cpu()} (torch kernels ")
    assert "), torch " in lines[0] and " commit " in lines[0]
    assert "GEMM peak at start (GFLOP/s, best of 8, measured again after each size: % GEMM peak uses the best) " \
        "float32 " in lines[0]
    assert lines[0].endswith(f"; @before: {REPO} (commit {load_bench('bench_device').commit(str(REPO))})")
    header = [c.strip() for c in lines[1].strip("|").split("|")]
    assert header[:3] == ["size", "precision", "system"] and "train busy" in header and "gen busy" in header
    cells = [[c.strip() for c in line.strip("|").split("|")] for line in lines[3:] if line.startswith("| 1x16")]
    rows = [dict(zip(header, c)) for c in cells]  # "ratio": beam search's (the second column of that name)
    assert [(r["precision"], r["system"]) for r in rows] == [
        ("float32", s) for s in ("lstm", "luong_global_general", "luong_global_general@before")]
    # one repetition: each ratio is the row's rate over lstm's of its block, its range that ratio alone
    train_ratio, gen_ratio = [i for i, c in enumerate(header) if c == "ratio"]
    for row in cells:
        (lstm,) = [r for r in cells if r[1] == row[1] and r[2] == "lstm"]
        for rate, ratio in ((header.index("train tok/s"), train_ratio), (header.index("beam-5 sent/s"), gen_ratio)):
            assert float(row[rate]) > 0 and float(row[ratio]) == pytest.approx(
                float(row[rate]) / float(lstm[rate]), abs=0.011), (row, lstm)
            assert row[ratio + 1] == f"{row[ratio]}-{row[ratio]}", row
    for row in rows:
        for cell in (row["train busy"], row["gen busy"]):
            assert cell.endswith("%") and 0 < int(cell[:-1]) <= 100, row
        assert row["% GEMM peak"].endswith("%"), row  # of a 1 x 16 model: a few per cent at most
    # the peak of --gemm-size's products (512: 0.02 s; the CPU default 4096 takes 13 s in float32)
    assert lines[-1].startswith("# GEMM peak of 512 x 512 products, best seen (GFLOP/s): float32 ")


def test_the_speed_benchmark_refuses_what_it_cannot_run_in_one_line(tmp_path):
    if not torch.cuda.is_available():
        proc = bench("--device", "cuda", "--work", tmp_path)
        assert proc.returncode == 2 and "Traceback" not in proc.stderr
        assert proc.stderr.strip().splitlines()[-1].endswith(
            f"--device cuda: torch {torch.__version__} sees no CUDA device here")
    # a GPU run once measured every row, then stopped at the table with a KeyError: no lstm to divide by
    for systems, reference in ((["luong_global_general"], "lstm"), (["rnnsearch", "lstm"], "lstm_bi1")):
        proc = bench("--systems", *systems, "--before", REPO, *TINY_SPEED,
                     "--work", tmp_path)  # tiny: what it measures without the refusal
        assert proc.returncode == 2 and proc.stderr.strip().splitlines()[-1].endswith(
            f"--systems {' '.join(systems)}: add {reference}, the reference the ratios are measured against in the "
            "same run")
    proc = bench("--sizes", "4by1000", "--work", tmp_path)
    assert proc.returncode == 2 and proc.stderr.strip().splitlines()[-1].endswith(
        "--sizes 4by1000: LAYERSxHIDDEN, e.g. 4x1000")
    proc = bench("--shape", "paper", "--vocab", 10, "--work", tmp_path)
    assert proc.returncode == 2 and proc.stderr.strip().splitlines()[-1].endswith(
        "--vocab 10: at least 100 (fairseq's four special symbols among them)")
    assert not any(tmp_path.iterdir())  # nothing written


def multi30k_slice(tmp_path):
    """The first 300 / 20 / 20 pairs of Multi30k's train / valid / test in tmp_path/data."""
    source = SHARED_DATA / "multi30k_en_de"
    if not (source / "train.en").exists():
        pytest.skip(f"{source} not present")
    data = tmp_path / "data"
    data.mkdir()
    for split, n in (("train", 300), ("valid", 20), ("test", 20)):
        for lang in ("en", "de"):
            lines = (source / f"{split}.{lang}").read_text(encoding="utf-8").splitlines(True)[:n]
            (data / f"{split}.{lang}").write_text("".join(lines), encoding="utf-8")
    return data


def test_a_small_multi30k_slice_is_prepared_with_the_pieces_it_holds(tmp_path):
    """benchmark_speed.py's Multi30k data (--shape multi30k) from a corpus too small for 8,000
    pieces: SentencePiece keeps what it holds (it refused with a traceback from its C++ trainer)."""
    data = multi30k_slice(tmp_path)
    bin_dir = load_bench("benchmark_speed").prepare_data(str(data), str(tmp_path / "work"))
    pieces = len((tmp_path / "work" / "bin" / "dict.en.txt").read_text(encoding="utf-8").splitlines())
    assert bin_dir == str(tmp_path / "work" / "bin") and 500 < pieces < 8000
    assert (tmp_path / "work" / "bin" / "test.en-de.de.bin").exists()


def test_operations_per_decoder_step_are_counted_where_the_step_adds_them():
    """count_step_ops.py as a command (tiny models, 2 layers): a target step more adds the
    recurrence's operations with input feeding and none without it (each decoder layer is then
    one nn.LSTM over all steps); a beam step always has some, its matrix products among them."""
    proc = script("count_step_ops", "--layers", 2, "--systems", "luong_global_general",
                  "luong_global_general_no_feed")
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = proc.stdout.splitlines()
    assert lines[0].startswith("| system | layers | ops per training step (fwd + bwd) | ops per beam step | ")
    assert lines[0].endswith(f"(ATen operations that are not views; torch {torch.__version__})")
    rows = {c[0]: c[1:] for c in (line.strip(" |").split(" | ") for line in lines[2:])}
    assert list(rows) == ["luong_global_general", "luong_global_general_no_feed"]
    assert all(r[0] == "2" for r in rows.values())
    feed, no_feed = ([int(c) for c in rows[name][1:]] for name in rows)
    assert feed[0] > 40 and feed[2] >= 2 * 2  # per layer: the gates' product and its input gradient
    assert no_feed[0] == 0 and no_feed[2] == 0
    assert feed[1] > no_feed[1] > 0 and feed[3] > 0


def test_the_speed_tables_header_says_what_the_before_rows_run(tmp_path):
    """The NAME@before rows are another checkout, or a copy without .git (a ``git archive`` carried
    to a GPU machine): the header names the path and what the copy's COMMIT file says, else the
    checkout's commit."""
    speed = load_bench("benchmark_speed")
    (tmp_path / "fairseq_luong").mkdir()
    (tmp_path / "COMMIT").write_text("abc1234+all_rows\n")
    assert speed.before_name(str(tmp_path)) == f"{tmp_path} (abc1234+all_rows)"
    head = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"], capture_output=True,
                          text=True).stdout.strip()
    assert speed.before_name(str(REPO)).startswith(f"{REPO} (commit {head}")
