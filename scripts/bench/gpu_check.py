#!/usr/bin/env python3
"""One command for a first GPU run: the checks of docs/gpu.md, one table of pass / fail.

  python scripts/bench/gpu_check.py                 # on CUDA device 0
  python scripts/bench/gpu_check.py --device cpu    # the CPU stands in for the GPU (the tests)

Everything runs on the synthetic number corpus it writes (scripts/data/make_number_corpus.py,
nothing to download) with fairseq's own commands and the plugin, and each row says what
it compared:

  loss         one float32 checkpoint's test loss with fairseq-validate --cpu and on the
               device: equal to the 3 decimals fairseq prints (cuDNN's LSTM against PyTorch's
               CPU LSTM)
  translations fairseq-generate of the first 100 test sentences on both (beam 5, at most
               source length + 10 tokens): the same translation scored the same on both (within
               SCORE_TOLERANCE), and a translation that differs only where the two are a tie,
               the two devices' best scores within SCORE_TOLERANCE (float32 sums in another
               order can flip a tie in the beam: on an H200, 1 of 100, 2.7e-6 apart)
  fp16 / bf16  --fp16 and --bf16 training against float32 from the same seed for --updates
               updates: final train loss within 1 %; fp16's loss scale above its minimum
  fused fp16   the fused criterion's loss and gradient in float16 against float32 on the device
  perSPE       --task translation_chunks trains through fairseq's pinned-memory loader
  multi-GPU    with several GPUs: two processes under torchrun (nccl), 64 + 64 sentences

Then the speed table: scripts/bench/benchmark_speed.py on the same device, fairseq's lstm
against our models side by side in one run, training and beam-5 translation in float32,
--fp16 and --bf16, at Luong et al.'s shape (4 x 1000, a 50K vocabulary, 128 sentences of
about 30 words; synthetic), with the share of wall time the GPU is busy. --speed gives its
options instead (--speed none: no speed table; --no-checks: the table alone).

With --device cpu the CPU stands in for the GPU: each side called the device is the CPU's own
run (the same command), so the comparisons pass by construction and what is checked is that
every command runs and every number is read. On a machine without CUDA, --device cuda says so
in one line and checks nothing. The tables also go to --out as JSON, with the GPU's name,
torch's version and the commit.
"""
import argparse
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import time

from bench_device import commit

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
USER_DIR = os.path.join(REPO, "fairseq_luong")
# benchmark_speed.py's options for the speed table (--device and --work are gpu_check's)
SPEED = ("--shape paper --sizes 4x1000 --precisions float32 fp16 bf16 --repeats 1 --updates 20 "
         "--gen-sentences 512 --systems lstm luong_global_general luong_global_general_no_feed")


# the largest difference between the CPU's and the device's score of a translation (fairseq-generate's
# H- score: the mean log2-probability of its tokens) that is float32 rounding, not a bug; an H200's
# largest over 100 translations was 7.0e-5 (docs/gpu.md)
SCORE_TOLERANCE = 1e-3

# the translations' length limit: source words + 10 (every test reference is at most source + 5;
# an untrained model, as the CPU stand-in's, would otherwise write fairseq's 200 tokens a sentence)
GEN_LEN = ("--max-len-a", "1", "--max-len-b", "10")


def bin_path(name):
    """fairseq's console script NAME: beside this Python (a virtual environment), else on PATH
    (fairseq installed with ``pip --target``, as scripts/bench/gpu_session.sh does on the GPU machine)."""
    beside = os.path.join(os.path.dirname(sys.executable), name)
    return beside if os.path.exists(beside) else shutil.which(name) or beside


def run(cmd, log, env=None):
    """Run CMD, its stdout to LOG as it comes (a run stopped by a time limit leaves the rows it
    printed), then its stderr; (status, output)."""
    with open(log, "w", encoding="utf-8") as f:
        proc = subprocess.run([str(c) for c in cmd], stdout=f, stderr=subprocess.PIPE, text=True,
                              env=dict(os.environ, PYTHONWARNINGS="ignore", PYTHONUNBUFFERED="1", **(env or {})))
    with open(log, "a", encoding="utf-8") as f:
        f.write(proc.stderr)
    with open(log, encoding="utf-8") as f:
        return proc.returncode, f.read()


def compare_translations(cpu, device, tolerance=SCORE_TOLERANCE):
    """(ok, numbers) for two {sentence id: (score, translation)}: 100 on each side; each translation
    identical with its two scores within ``tolerance``, or different where the two best scores tie
    (within ``tolerance``), which float32 rounding decides either way."""
    same = [i for i in cpu if i in device and cpu[i][1] == device[i][1]]
    differ = [i for i in cpu if i in device and cpu[i][1] != device[i][1]]

    def gap(ids):
        return max((abs(cpu[i][0] - device[i][0]) for i in ids), default=0.0)

    ok = len(cpu) == len(device) == 100 and gap(same) <= tolerance and gap(differ) <= tolerance
    parts = [f"{len(same)} of {len(cpu)} test translations identical, scores {gap(same):.1e} apart at most"]
    if differ:
        kind = "a tie" if gap(differ) <= tolerance else "NOT a tie"
        parts.append(f"{len(differ)} differ (sentence {', '.join(map(str, differ[:5]))}): best scores "
                     f"{gap(differ):.1e} apart at most, {kind}")
    if len(cpu) != len(device):
        parts.append(f"{len(cpu)} translations on the CPU, {len(device)} on the device")
    return ok, "; ".join(parts) + f" (limit {tolerance:g})"


def precision_limit(float32_cpu, float32_device):
    """How far --fp16 or --bf16 training may end from float32 on the device (the mean train loss of
    the last 10 updates): 1 %, or twice as far as float32 itself ends between the CPU and the
    device, the same training with other rounding, where that is more. A trajectory perturbed by
    rounding drifts: on an H200 (2026-11-28) a float32 cell equal to 1e-5 a step moved that loss by
    1.2 % after 300 updates, past the 1 % that fp16 and bf16 were held to."""
    if not float32_cpu or not float32_device:
        return 0.01
    return max(0.01, 2 * abs(float32_cpu[-1] - float32_device[-1]) / float32_device[-1])


class Checks:
    def __init__(self, args, about=None):
        self.args, self.rows = args, []
        self.about = about or {}  # device, torch, commit: the head of gpu_check.json
        self.work = args.out
        self.cpu_flags = ["--cpu"]  # the reference side
        self.dev_flags = ["--cpu"] if args.device == "cpu" else []
        self.float32_cpu_losses = None  # the float32 training's last losses, once it has run

    def add(self, name, ok, numbers):
        self.rows.append({"check": name, "result": "n/a" if ok is None else ("PASS" if ok else "FAIL"),
                          "numbers": numbers})
        print(f"[gpu_check] {name}: {self.rows[-1]['result']} ({numbers})", file=sys.stderr, flush=True)
        self.save()

    def save(self, speed=None):
        """gpu_check.json with the rows so far, written after each: a command stopped by a budget or
        a device call's time limit keeps the checks it finished."""
        with open(self.path("gpu_check.json"), "w", encoding="utf-8") as f:
            json.dump({**self.about, "rows": self.rows, "speed": speed}, f, indent=1)

    def path(self, *parts):
        return os.path.join(self.work, *parts)

    # ------------------------------------------------------------------ data and a model
    def prepare(self):
        raw = self.path("raw")
        subprocess.run([sys.executable, os.path.join(REPO, "scripts", "data", "make_number_corpus.py"), "--out", raw,
                        "--train", "4000", "--valid", "100", "--test", "100", "--seed", "11", "--phrases"],
                       check=True, capture_output=True)
        subprocess.run([bin_path("fairseq-preprocess"), "-s", "en", "-t", "de", "--joined-dictionary",
                        "--trainpref", f"{raw}/train", "--validpref", f"{raw}/valid", "--testpref", f"{raw}/test",
                        "--destdir", self.path("bin"), "--workers", "1"], check=True, capture_output=True)
        subprocess.run([sys.executable, os.path.join(REPO, "scripts", "data", "project_chunks.py"),
                        "--pieces", f"{raw}/train.de", f"{raw}/valid.de",
                        "--chunks", f"{raw}/train.de.phrases", f"{raw}/valid.de.phrases",
                        "--output", self.path("bin", "train.en-de.de.chunks"),
                        self.path("bin", "valid.en-de.de.chunks")], check=True, capture_output=True)

    def model(self):
        h = str(self.args.size)
        return ["--arch", "luong_global_general", "--encoder-embed-dim", h, "--decoder-embed-dim", h,
                "--encoder-hidden-size", h, "--decoder-hidden-size", h, "--share-all-embeddings",
                "--optimizer", "adam", "--lr", "0.003", "--clip-norm", "1.0", "--max-tokens", "3000",
                "--criterion", "fused_label_smoothed_cross_entropy", "--label-smoothing", "0.1", "--seed", "1",
                "--log-format", "simple", "--log-interval", "1", "--no-epoch-checkpoints", "--disable-validation",
                "--num-workers", "0"]

    def train(self, name, flags, updates, extra=()):
        save = self.path(name)
        status, out = run([bin_path("fairseq-train"), self.path("bin"), "--user-dir", USER_DIR, *self.model(),
                           *flags, *extra, "--max-update", updates, "--save-dir", save], self.path(f"{name}.log"))
        losses = [float(x) for x in re.findall(r"train_inner \| .* loss=([\d.]+)", out)]
        losses = [sum(losses[-10:]) / len(losses[-10:])] if losses else []  # the mean of the last 10 updates
        scales = [float(x) for x in re.findall(r"loss_scale=([\d.]+)", out)]
        return status, losses, scales, os.path.join(save, "checkpoint_last.pt")

    # ------------------------------------------------------------------ the checks
    def loss_and_translations(self):
        status, self.float32_cpu_losses, _, ckpt = self.train("float32_cpu", self.cpu_flags, self.args.updates)
        if status:
            self.add("loss on CPU and device (float32)", False, f"training failed: {self.path('float32_cpu.log')}")
            return
        def loss(side, flags):
            _, out = run([bin_path("fairseq-validate"), self.path("bin"), "--user-dir", USER_DIR, "--path", ckpt,
                          "--task", "translation", "--valid-subset", "test", "--batch-size", "50", *flags],
                         self.path(f"validate_{side}.log"))
            m = re.search(r"valid on 'test' subset \| loss ([\d.]+)", out)
            return float(m.group(1)) if m else None

        def translations(side, flags):
            _, out = run([bin_path("fairseq-generate"), self.path("bin"), "--user-dir", USER_DIR, "--path", ckpt,
                          "--gen-subset", "test", "--beam", "5", "--batch-size", "50", *GEN_LEN, *flags],
                         self.path(f"generate_{side}.log"))
            return {int(i): (float(score), text) for i, score, text in re.findall(r"^H-(\d+)\t(\S+)\t(.*)$", out, re.M)}

        losses = self.on_both(loss)
        ok = None not in losses and round(losses[0], 4) == round(losses[1], 4)
        self.add("loss on CPU and device (float32)", ok, f"test loss {losses[0]} on the CPU, {losses[1]} on the device")
        self.add("translations on CPU and device", *compare_translations(*self.on_both(translations)))

    def on_both(self, fn):
        """(fn's result on the CPU, on the device) for fn(side, flags); the CPU's twice where it
        stands in for the device (the same command: its run is the device's too)."""
        cpu = fn("cpu", self.cpu_flags)
        return cpu, cpu if self.dev_flags == self.cpu_flags else fn("device", self.dev_flags)

    def precision(self):
        if self.dev_flags == self.cpu_flags and self.float32_cpu_losses:
            base = self.float32_cpu_losses  # the CPU standing in: float32 on the device is that very run
        else:
            _, base, _, _ = self.train("float32_device", self.dev_flags, self.args.updates)
        for name, flags in (("fp16", ["--fp16"] + (["--memory-efficient-fp16"] if self.args.device == "cpu" else [])),
                            ("bf16", ["--bf16"])):
            status, losses, scales, _ = self.train(name, self.dev_flags + flags, self.args.updates)
            if status or not losses or not base:
                self.add(f"--{name} training against float32", False, f"training failed: {self.path(name + '.log')}")
                continue
            gap = abs(losses[-1] - base[-1]) / base[-1]
            limit = precision_limit(self.float32_cpu_losses, base)
            ok = gap <= limit
            numbers = (f"train loss of the last 10 updates {losses[-1]:.4f} against float32's {base[-1]:.4f} "
                       f"({100 * gap:.2f} %, limit {100 * limit:.2f} %)")
            if name == "fp16":
                ok = ok and bool(scales) and scales[-1] > 1e-4  # fairseq's default --min-loss-scale
                numbers += f", loss scale {scales[-1] if scales else '?'} at the end"
            self.add(f"--{name} training against float32", ok, numbers + f", {self.args.updates} updates")

    def fused_fp16(self):
        import torch

        from fairseq_luong.criterions.fused_label_smoothed_cross_entropy import fused_output_loss

        device = "cpu" if self.args.device == "cpu" else "cuda"
        g = torch.Generator().manual_seed(0)
        n, h, v = 600, 256, 5000
        feats = torch.randn(n, h, generator=g) * 4
        weight = torch.randn(v, h, generator=g)
        weight[7] = feats.mean(0) * 0.9  # logits about 80 for word 7: exp overflows float16
        bias = torch.randn(v, generator=g)
        target = torch.randint(4, v, (n,), generator=g).to(device)
        results = []
        for dtype in (torch.float32, torch.float16):
            f, w, b = (t.to(device, dtype).clone().requires_grad_() for t in (feats, weight, bias))
            loss, _, _ = fused_output_loss(f, w, b, target, 0.1, 256)
            (loss * 1024).backward()  # as a loss scale would
            results.append((float(loss), f.grad.float().cpu() / 1024))
        rel = abs(results[1][0] - results[0][0]) / abs(results[0][0])
        grad = float((results[1][1] - results[0][1]).norm() / results[0][1].norm())
        ok = rel < 2e-3 and grad < 5e-3 and bool(torch.isfinite(results[1][1]).all())
        self.add("fused criterion in float16", ok,
                 f"loss {results[1][0]:.2f} against float32's {results[0][0]:.2f} (relative {rel:.1e}), "
                 f"gradient relative difference {grad:.1e} (limits 2e-3, 5e-3)")

    def perspe(self):
        status, losses, _, _ = run_train_chunks(self)
        self.add("perSPE batches through the pinned-memory loader", status == 0 and bool(losses),
                 f"{len(losses)} updates of --task translation_chunks with --num-workers 1"
                 + ("" if status == 0 else f"; failed: {self.path('perspe.log')}"))

    def several(self):
        import torch

        n = torch.cuda.device_count() if self.args.device == "cuda" else 0
        if n < 2:
            self.add("one process per GPU (torchrun, nccl)", None, f"{n or 'no'} GPU(s) beyond one: nothing to check")
            return
        save = self.path("two_gpus")
        status, out = run(["torchrun", "--standalone", "--nproc_per_node", "2", "--no-python",
                           bin_path("fairseq-train"), self.path("bin"), "--user-dir", USER_DIR, *self.model(),
                           "--max-update", "20", "--distributed-world-size", "2", "--save-dir", save],
                          self.path("two_gpus.log"))
        ok = status == 0 and "nccl" in out
        self.add("one process per GPU (torchrun, nccl)", ok,
                 f"exit status {status}, backend nccl named in the log: {'nccl' in out}")

    def speed(self):
        """benchmark_speed.py's table on the device: its rows, and the command that made it."""
        if self.args.speed == "none":
            return None
        cmd = [sys.executable, os.path.join(REPO, "scripts", "bench", "benchmark_speed.py"),
               *shlex.split(self.args.speed), "--device", self.args.device, "--work", self.path("speed")]
        status, out = run(cmd, self.path("speed.log"))
        table = [line for line in out.splitlines() if line.startswith(("| ", "|---", "# "))]
        ok = status == 0 and any(line.startswith("| ") and " lstm " in line for line in table)
        self.add("speed table (benchmark_speed.py)", ok,
                 f"{sum(line.startswith('| ') for line in table) - 1} rows below" if ok
                 else f"failed: {self.path('speed.log')}")
        return {"command": " ".join(shlex.quote(os.path.relpath(c, REPO) if c.startswith(REPO) else c)
                                    for c in cmd[1:]), "table": table}


def run_train_chunks(checks):
    h = str(checks.args.size)
    status, out = run([bin_path("fairseq-train"), checks.path("bin"), "--user-dir", USER_DIR, "--arch",
                       "transformer_perspe_tiny", "--task", "translation_chunks", "--share-all-embeddings",
                       "--encoder-embed-dim", h, "--decoder-embed-dim", h, "--optimizer", "adam", "--lr", "0.001",
                       "--max-tokens", "1500", "--criterion", "perspe_label_smoothed_cross_entropy",
                       "--perturb-range", "1", "--perturb-unit", "phrase", "--max-update", "20", "--num-workers", "1",
                       "--log-format", "simple", "--log-interval", "1", "--disable-validation", "--no-save",
                       "--save-dir", checks.path("perspe_ckpt"),  # --no-save still makes the folder: not in the cwd
                       *checks.dev_flags], checks.path("perspe.log"))
    losses = re.findall(r"train_inner \| .* loss=([\d.]+)", out)
    return status, losses, None, None


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], epilog=__doc__.split("\n\n", 1)[1],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", choices=["cuda", "cpu"], default="cuda",
                        help="cuda (device 0), or cpu standing in for it (what the tests run)")
    parser.add_argument("--out", default=os.path.join(REPO, "work_dir", "gpu_check"), help="work folder; "
                        "gpu_check.json goes there")
    parser.add_argument("--updates", type=int, default=300, help="updates of each training")
    parser.add_argument("--size", type=int, default=128, help="units of the models (2 layers)")
    parser.add_argument("--speed", default=SPEED, help=f"benchmark_speed.py's options (default: {SPEED}); "
                        "none: no speed table")
    parser.add_argument("--no-checks", action="store_true", help="the speed table only (the checks took 300 s on "
                        "an NVIDIA H200: with a table they can outlast one 10-minute device call)")
    args = parser.parse_args(argv)
    if args.no_checks and args.speed == "none":
        parser.error("--no-checks with --speed none: nothing to run")
    import torch

    if args.device == "cuda" and not torch.cuda.is_available():
        print(f"gpu_check.py: no CUDA device here (torch {torch.__version__}): nothing checked; --device cpu runs the "
              "checks with the CPU standing in for the GPU")
        return 0
    os.makedirs(args.out, exist_ok=True)
    revision = commit()
    device = torch.cuda.get_device_name(0) if args.device == "cuda" else "CPU (standing in for a GPU)"
    t0 = time.time()
    checks = Checks(args, {"device": device, "torch": torch.__version__, "commit": revision})
    if not args.no_checks:
        checks.prepare()
        checks.loss_and_translations()
        checks.precision()
        checks.fused_fp16()
        checks.perspe()
        checks.several()
    speed = checks.speed()
    header = f"device {device}, torch {torch.__version__}, commit {revision}, {time.time() - t0:.0f} s"
    print(f"| check | result | numbers |  ({header})\n|---|---|---|")
    for row in checks.rows:
        print(f"| {row['check']} | {row['result']} | {row['numbers']} |")
    if speed:
        print(f"\nspeed: python {speed['command']}\n" + "\n".join(speed["table"]))
    checks.save(speed)
    return 1 if any(row["result"] == "FAIL" for row in checks.rows) else 0


if __name__ == "__main__":
    sys.exit(main())
