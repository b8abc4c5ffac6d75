"""Training on several processes (torchrun, gloo on the CPU) equals one process with --update-freq;
a run killed with SIGKILL after an interval checkpoint resumes exactly; the distributed and
precision options fairseq mishandles on the CPU do what they say or stop with one line."""
import os
import re
import signal
import subprocess

import pytest
import torch
from fairseq import options
from fairseq.dataclass.utils import convert_namespace_to_omegaconf

from fairseq_fixes import precision, torchrun
from fairseq_luong.errors import UserError
from tests.helpers import USER_DIR, bin_path, run

N_UPDATES = 6
# a luong arch with input feeding and dropout; an LR that changes at every update (warm-up);
# batches small enough that an epoch is 8 updates of 2 batches, so every run stops mid-epoch
TRAIN = ["--user-dir", USER_DIR, "--arch", "luong_global_general", "--dropout", "0.3",
         "--encoder-embed-dim", "16", "--encoder-hidden-size", "16",
         "--decoder-embed-dim", "16", "--decoder-hidden-size", "16",
         "--optimizer", "adam", "--lr", "0.005", "--lr-scheduler", "inverse_sqrt",
         "--warmup-updates", "4", "--warmup-init-lr", "0.0001", "--clip-norm", "1",
         "--criterion", "fused_label_smoothed_cross_entropy", "--label-smoothing", "0.1",
         "--max-tokens", "300", "--max-update", str(N_UPDATES), "--save-interval-updates", "2",
         "--no-epoch-checkpoints", "--disable-validation", "--num-workers", "0", "--seed", "7",
         "--log-format", "simple", "--log-interval", "1", "--cpu"]
LOGGED = ("loss", "nll_loss", "lr", "gnorm", "wpb", "bsz")


def env():
    return dict(os.environ, PYTHONWARNINGS="ignore", OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")


def updates(log):
    """{num_updates: {field: value}} from fairseq's train_inner lines (as printed)."""
    out = {}
    for line in log.splitlines():
        if "| train_inner |" in line:
            fields = dict(re.findall(r"(\w+)=([^,\s]+)", line))
            out[int(fields["num_updates"])] = {k: fields[k] for k in LOGGED}
    return out


def params(save_dir):
    return torch.load(save_dir / "checkpoint_last.pt")["model"]


@pytest.fixture(scope="module")
def one_process(data_bin, tmp_path_factory):
    """The reference: one process, two micro-batches per update."""
    save = tmp_path_factory.mktemp("one_process")
    proc = run([bin_path("fairseq-train"), str(data_bin / "bin"), *TRAIN, "--update-freq", "2",
                "--save-dir", str(save)])
    logged = updates(proc.stdout + proc.stderr)
    assert sorted(logged) == list(range(1, N_UPDATES + 1)), proc.stdout[-3000:]
    return logged, save


def test_two_processes_under_torchrun_equal_one_with_update_freq_2(data_bin, one_process, tmp_path):
    """torchrun --nproc_per_node 2 (gloo, CPU DistributedDataParallel): the same losses, LR,
    gradient norms at every update and the same parameters, to the last bit. fairseq would
    train two independent copies here (its world size defaults to 1 on a CPU)."""
    ref, ref_save = one_process
    proc = run([bin_path("torchrun"), "--standalone", "--nproc_per_node", "2", "--no-python",
                bin_path("fairseq-train"), str(data_bin / "bin"), *TRAIN, "--save-dir", str(tmp_path)])
    log = proc.stdout + proc.stderr
    assert "torchrun: 2 processes, torch.distributed backend gloo" in log, log[-3000:]
    assert updates(log) == ref
    got, want = params(tmp_path), params(ref_save)
    assert got.keys() == want.keys()
    diffs = {k: (got[k] - want[k]).abs().max().item() for k in want}
    assert max(diffs.values()) == 0.0, diffs


def test_sigkill_after_interval_checkpoint_resumes_like_an_uninterrupted_run(data_bin, one_process, tmp_path):
    ref, _ = one_process
    cmd = [bin_path("fairseq-train"), str(data_bin / "bin"), *TRAIN, "--update-freq", "2",
           "--save-dir", str(tmp_path)]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env())
    seen = []
    for line in proc.stdout:
        seen.append(line)
        if re.search(r"Saved checkpoint .*checkpoint_1_2\.pt", line):
            proc.send_signal(signal.SIGKILL)
            break
    proc.stdout.close()
    assert proc.wait() == -signal.SIGKILL, "".join(seen)[-3000:]
    killed_at = max(updates("".join(seen)))
    assert killed_at < N_UPDATES and "done training" not in "".join(seen)

    resumed = run(cmd).stdout
    loaded = re.search(r"Loaded checkpoint .*checkpoint_last\.pt \(epoch 1 @ (\d+) updates\)", resumed)
    assert loaded, resumed[-3000:]
    start = int(loaded.group(1))
    assert start >= 2  # the interval checkpoint (or a later one, if the kill came late)
    after = updates(resumed)
    assert sorted(after) == list(range(start + 1, N_UPDATES + 1))
    assert after == {u: ref[u] for u in after}


def parse(*flags):
    parser = options.get_training_parser()
    args = options.parse_args_and_arch(parser, ["/nonexistent", "--user-dir", USER_DIR,
                                                "--arch", "luong_tiny", *flags])
    return convert_namespace_to_omegaconf(args)


def test_world_size_on_the_cpu_without_torchrun_gives_the_torchrun_command(monkeypatch):
    for name in torchrun.TORCHRUN_ENV:
        monkeypatch.delenv(name, raising=False)
    cfg = parse("--cpu", "--distributed-world-size", "2")
    with pytest.raises(UserError, match=r"torchrun --standalone --nproc_per_node 2 --no-python fairseq-train"):
        torchrun.check_cpu_world_size(cfg)


def test_torchrun_environment_sets_world_size_rank_and_gloo(monkeypatch):
    env_vars = {"WORLD_SIZE": "4", "RANK": "3", "LOCAL_RANK": "1", "MASTER_ADDR": "h", "MASTER_PORT": "1"}
    for name, value in env_vars.items():
        monkeypatch.setenv(name, value)
    assert torchrun.launched_by_torchrun()
    cfg = parse("--cpu")
    torchrun.init_from_torchrun(cfg)
    dt = cfg.distributed_training
    assert (dt.distributed_world_size, dt.distributed_rank, dt.device_id) == (4, 3, 1)
    assert (dt.distributed_init_method, dt.distributed_no_spawn, dt.distributed_backend) == ("env://", True, "gloo")
    with pytest.raises(UserError, match="torchrun started 4 processes"):
        torchrun.init_from_torchrun(parse("--cpu", "--distributed-world-size", "3"))


def test_precision_flags_on_the_cpu():
    bf16 = parse("--cpu", "--bf16")
    assert bf16.common.tpu  # what fairseq's option parsing does with --bf16
    precision.fix_precision_flags(bf16)
    assert not bf16.common.tpu and not bf16.distributed_training.tpu
    fp16 = parse("--cpu", "--fp16")
    precision.fix_precision_flags(fp16)
    assert fp16.common.fp16_no_flatten_grads


@pytest.mark.parametrize("flag,dtype", [("--bf16", torch.bfloat16), ("--amp", torch.bfloat16),
                                        ("--fp16", torch.float16)])
def test_precision_flag_trains_on_the_cpu(data_bin, one_thread, flag, dtype):
    """One fairseq Trainer update with the flag: it runs (fairseq: xla_device / CUDA errors),
    the model computes in the flag's type (--amp: a silent float32 no-op in fairseq), and the
    parameters move."""
    from fairseq import tasks
    from fairseq.trainer import Trainer

    cfg = parse(flag, "--cpu", "--optimizer", "adam", "--lr", "0.01", "--max-tokens", "500",
                "--criterion", "fused_label_smoothed_cross_entropy", "--seed", "1")
    cfg.task.data = str(data_bin / "bin")
    precision.fix_precision_flags(cfg)
    task = tasks.setup_task(cfg.task)
    task.load_dataset("train")
    model, criterion = task.build_model(cfg.model), task.build_criterion(cfg.criterion)
    trainer = Trainer(cfg, task, model, criterion)
    seen = []

    def compute_dtype(module, inputs):
        autocast = torch.is_autocast_enabled("cpu")
        seen.append(torch.get_autocast_dtype("cpu") if autocast else next(module.parameters()).dtype)

    hook = trainer.model.register_forward_pre_hook(compute_dtype)
    batch = next(iter(task.get_batch_iterator(task.dataset("train"), max_tokens=500).next_epoch_itr()))
    before = [p.detach().float().clone() for p in trainer.model.parameters()]
    trainer.train_step([batch])
    hook.remove()
    assert seen and set(seen) == {dtype}
    assert any(not torch.equal(b, p.detach().float()) for b, p in zip(before, trainer.model.parameters()))
