"""What only a GPU runs, exercised on the CPU by the nearest equivalent path (docs/gpu.md lists
these and what stays unverified):

* the WMT'14 recipe with several GPUs: the same command (torchrun, one fairseq-train
  process per device) with gloo instead of nccl, and the paper's 128 sentences per update;
* --fp16 with the fused criterion (the recipes add --fp16 on a GPU): fairseq's float16
  trainer on the CPU (unflattened master weights, loss scaling), through the recipe;
* the fused criterion's float16 arithmetic (GEMMs in float16, softmax in float32), against
  float32, with logits that overflow float16.
"""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import fairseq_luong  # noqa: F401  (checkpoint allowlist for torch.load)
from fairseq_luong.criterions.fused_label_smoothed_cross_entropy import fused_output_loss
from tests.helpers import REPO, SHARED_DATA, TINY_SPEED, load_file, make_wmt14_release

machine = load_file("scripts/bench/machine.py")

TINY = ["--encoder-embed-dim", "16", "--decoder-embed-dim", "16", "--encoder-hidden-size", "16",
        "--decoder-hidden-size", "16", "--encoder-layers", "2", "--decoder-layers", "2"]


def wmt14(*args, check=True):
    env = dict(os.environ, PYTHONWARNINGS="ignore", OMP_NUM_THREADS="1",
               PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    proc = subprocess.run(["bash", str(REPO / "examples" / "wmt14_en_de" / "run.sh"), *map(str, args)],
                          capture_output=True, text=True, env=env)
    if check and proc.returncode != 0:
        raise AssertionError(f"run.sh {' '.join(map(str, args))} failed:\n{proc.stderr[-5000:]}")
    return proc


@pytest.fixture(scope="module")
def release(tmp_path_factory):
    if not (SHARED_DATA / "wmt_sample_en_de" / "train.en").exists():
        pytest.skip("../shared/data/wmt_sample_en_de not present")
    return make_wmt14_release(tmp_path_factory.mktemp("release"), n_train=256, n_test=12)


def train_lines(log):
    """The train_inner lines of a fairseq-train log, as {field: value}."""
    rows = []
    for line in Path(log).read_text().splitlines():
        if "| train_inner |" in line:
            stats = line.split("/", 1)[1].split(None, 1)[1]  # after "epoch E: N / M"
            rows.append(dict(item.strip().split("=", 1) for item in stats.split(", ")))
    return rows


def test_several_gpus_run_as_torchrun_processes_with_the_papers_batch(release, tmp_path):
    """`--gpus 2`: torchrun starts two fairseq-train processes (gloo here, nccl on GPUs), each
    with 64 sentences, so every update is the paper's 128 (256 training pairs: 4 batches of
    64, 2 updates an epoch). The recipe used to leave the GPU count to fairseq: on N GPUs
    each update was 128 x N sentences."""
    work = tmp_path / "work"
    wmt14("--data-dir", release, "--work-dir", work, "--gpus", 2, "train", "t1_base", "--", *TINY,
          "--max-update", 2, "--log-interval", 1)
    log = work / "systems" / "base" / "train.log"
    assert "torchrun: 2 processes, torch.distributed backend gloo" in log.read_text()
    assert [row["bsz"] for row in train_lines(log)] == ["128", "128"]
    cfg = torch.load(work / "systems" / "base" / "checkpoints" / "checkpoint_last.pt", weights_only=True)["cfg"]
    assert cfg["distributed_training"]["distributed_world_size"] == 2 and cfg["dataset"]["batch_size"] == 64


def test_fp16_training_with_the_fused_criterion_through_the_recipe(release, tmp_path):
    """On a GPU the recipe trains with --fp16 and the fused criterion; here fairseq's float16
    trainer on the CPU (what fairseq_fixes/precision.py makes runnable): float16
    weights with float32 master copies, the loss is scaled, the loss falls, and eval translates
    and scores."""
    work = tmp_path / "work"
    opts = ["--data-dir", release, "--work-dir", work]
    wmt14(*opts, "train", "t1_localp_general", "--", *TINY, "--max-update", 6, "--fp16", "--log-interval", 1,
          "--lr", "0.5")
    sysdir = work / "systems" / "localp_general_feed"
    state = torch.load(sysdir / "checkpoints" / "checkpoint_last.pt", weights_only=True)
    assert state["cfg"]["criterion"]["_name"] == "fused_label_smoothed_cross_entropy"
    # fairseq writes checkpoints in float32 (utils.move_to_cpu); the optimizer was the
    # float16 one: it saved its loss scale, and the log names the CPU's master weights
    assert "loss_scale" in state["last_optimizer_state"]
    assert "--fp16 on the CPU: float32 master weights per parameter" in (sysdir / "train.log").read_text()
    rows = train_lines(sysdir / "train.log")
    assert all("loss_scale" in row for row in rows) and len(rows) == 6
    assert float(rows[-1]["loss"]) < float(rows[0]["loss"])
    wmt14(*opts, "eval", "t1_localp_general")
    assert json.loads((work / "rows" / "t1_localp_general" / "test.tok_bleu.json").read_text())["name"] == "BLEU"


@pytest.mark.parametrize("scale", [1.0, 1024.0])
def test_fused_criterion_in_float16_is_float32_to_float16_precision(scale):
    """The fused criterion with float16 features and weights (a --fp16 model): GEMMs in
    float16, the softmax and the sums in float32, so logits of 80 (exp overflows float16 past
    11) give the float32 loss to float16 precision, and the gradients, times a loss scale, too."""
    g = torch.Generator().manual_seed(0)
    n, hidden, vocab = 37, 24, 1003
    features = torch.randn(n, hidden, generator=g) * 4
    weight = torch.randn(vocab, hidden, generator=g)
    weight[7] = features.mean(0) * 0.9  # large logits: about 80 for word 7
    bias = torch.randn(vocab, generator=g)
    target = torch.randint(0, vocab, (n,), generator=g)
    results = {}
    for dtype in (torch.float32, torch.float16):
        f, w, b = (t.to(dtype).clone().requires_grad_() for t in (features, weight, bias))  # leaves
        loss, nll, _ = fused_output_loss(f, w, b, target, 0.1, 16)
        (loss * scale).backward()
        results[dtype] = (loss.detach(), f.grad.float() / scale, w.grad.float() / scale, b.grad.float() / scale)
    logits = (features.half() @ weight.half().t()).float()
    assert logits.max() > 60 and not torch.isfinite(torch.exp(logits.max().half()))
    ref, half = results[torch.float32], results[torch.float16]
    assert half[0].dtype == torch.float32  # the loss is summed in float32
    torch.testing.assert_close(half[0], ref[0], rtol=2e-3, atol=0)
    for got, want, name in zip(half[1:], ref[1:], ("features", "weight", "bias")):
        assert torch.isfinite(got).all(), name
        rel = (got - want).norm() / want.norm()
        assert rel < 5e-3, (name, float(rel))


def test_gpu_check_without_cuda_checks_nothing_in_one_line(tmp_path):
    """scripts/bench/gpu_check.py, the one command for a first GPU run: without CUDA, --device
    cuda is one line and checks nothing. (Every check and the speed table with the CPU standing
    in: tests/test_gpu_session.py, through the GPU session's one command.)"""
    if torch.cuda.is_available():
        pytest.skip("a CUDA device is here")
    proc = subprocess.run([sys.executable, str(REPO / "scripts" / "bench" / "gpu_check.py"), "--out",
                           str(tmp_path / "cuda")], capture_output=True, text=True,
                          env=dict(os.environ, PYTHONWARNINGS="ignore", OMP_NUM_THREADS="1"))
    assert proc.returncode == 0 and proc.stdout.startswith("gpu_check.py: no CUDA device here")
    assert not (tmp_path / "cuda").exists()


@pytest.mark.full
def test_gpu_check_with_no_checks_runs_the_speed_table_alone(tmp_path):
    """gpu_check.py --no-checks: the speed table without the checks, which took 300 s on an H200
    (2026-11-28) and with a table outlasted the session's budget; with --speed none it refuses."""
    def gpu_check(*args):
        return subprocess.run([sys.executable, str(REPO / "scripts" / "bench" / "gpu_check.py"), "--device", "cpu",
                               "--no-checks", "--updates", "20", "--size", "16",  # without --no-checks: quick checks
                               "--out", str(tmp_path / "out"), *args], capture_output=True, text=True,
                              env=dict(os.environ, PYTHONWARNINGS="ignore", OMP_NUM_THREADS="1"))
    proc = gpu_check("--speed", "none")
    assert proc.returncode == 2 and proc.stderr.strip().splitlines()[-1].endswith(
        "--no-checks with --speed none: nothing to run")
    proc = gpu_check("--speed", " ".join([*TINY_SPEED, "--precisions", "fp16", "--systems", "lstm"]))
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    result = json.loads((tmp_path / "out" / "gpu_check.json").read_text())
    assert [(r["check"], r["result"]) for r in result["rows"]] == [("speed table (benchmark_speed.py)", "PASS")]
    table = result["speed"]["table"]
    # float16 on the CPU: no fast matrix product, so no peak to measure the rows against
    assert table[0].startswith(f"# device CPU, 1 thread of {machine.describe_cpu()} (torch kernels ")
    assert "fp16 - (no fast GEMM kernel on the CPU)" in table[0]
    header = [c.strip() for c in table[1].strip("|").split("|")]
    rows = [dict(zip(header, (c.strip() for c in line.strip("|").split("|")))) for line in table
            if line.startswith("| 1x16")]
    assert [(r["precision"], r["system"], r["% GEMM peak"]) for r in rows] == [("fp16", "lstm", "-")]
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["gpu_check.json", "speed", "speed.log"]
