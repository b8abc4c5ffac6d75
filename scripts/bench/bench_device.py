"""Timing, peak memory and busy time on the device a benchmark runs on (the CPU or CUDA).

A GPU runs kernels after the host has queued them: a clock read without waiting for
the device measures the queueing, not the work. ``DeviceClock.now`` synchronises first.
Peak memory is the process's resident peak on the CPU (``ru_maxrss``) and the caching
allocator's peak on CUDA (``torch.cuda.max_memory_allocated``: tensors, not the CUDA
context). ``busy_fraction`` is the share of a profiled stretch of wall time the device
was executing: on CUDA the union of kernel, memcpy and memset intervals in a
``torch.profiler`` trace; on the CPU, standing in, the union of torch operator intervals
(what is not covered is Python, fairseq and waiting). ``commit`` names the code a number
belongs to. torch is imported where it is used: a script that only refuses its options, or
names a commit, starts in a fraction of a second.
"""
import json
import os
import resource
import subprocess
import tempfile
import time

PRECISIONS = ("float32", "fp16", "bf16")  # fairseq's default, --fp16, --bf16


def dtype(precision):
    """The torch dtype of a PRECISIONS name."""
    import torch

    return {"float32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}[precision]

# trace categories that are the device working (torch.profiler's chrome trace)
BUSY_CATEGORIES = {"cuda": {"kernel", "gpu_memcpy", "gpu_memset"}, "cpu": {"cpu_op"}}


class DeviceClock:
    """The clock, memory and name of one device: "cpu" or "cuda" (device 0)."""

    def __init__(self, device):
        if device not in BUSY_CATEGORIES:
            raise ValueError(f"device {device!r}: cpu or cuda")
        self.device = device

    def sync(self):
        """Wait until the device has finished what was queued."""
        if self.device == "cuda":
            import torch

            torch.cuda.synchronize()

    def now(self):
        """Seconds, read after the device has finished (perf_counter)."""
        self.sync()
        return time.perf_counter()

    def peak_mb(self):
        if self.device == "cuda":
            import torch

            return torch.cuda.max_memory_allocated() / 2**20
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux

    def name(self, threads=None):
        import torch

        if self.device == "cuda":
            return torch.cuda.get_device_name(0)
        from machine import count, describe_cpu

        n = threads or torch.get_num_threads()
        # the CPU itself: "CPU, 2 threads" alone said nothing of which (its kind decides bf16's speed)
        return (f"CPU, {count(n, 'thread')} of {describe_cpu()} "
                f"(torch kernels {torch.backends.cpu.get_cpu_capability()})")


def union_seconds(intervals):
    """The length of the union of (start, duration) intervals, in the intervals' unit / 1e6
    (the trace's microseconds to seconds)."""
    total, end = 0.0, float("-inf")
    for start, dur in sorted(intervals):
        stop = start + dur
        if stop <= end:
            continue
        total += stop - max(start, end)
        end = stop
    return total / 1e6


def busy_seconds(trace, device):
    """Seconds the device executed something in a chrome trace (dict) of torch.profiler."""
    cats = BUSY_CATEGORIES[device]
    return union_seconds((float(e["ts"]), float(e["dur"])) for e in trace.get("traceEvents", [])
                         if e.get("ph") == "X" and e.get("cat") in cats and "dur" in e)


def busy_fraction(clock, fn):
    """Run ``fn`` once under torch.profiler; the share of its wall time the device was busy."""
    from torch.profiler import ProfilerActivity, profile

    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if clock.device == "cuda" else [])
    with profile(activities=activities) as prof:
        t0 = clock.now()
        fn()
        wall = clock.now() - t0
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "trace.json")
        prof.export_chrome_trace(path)
        with open(path, encoding="utf-8") as f:
            trace = json.load(f)
    return min(1.0, busy_seconds(trace, clock.device) / wall)


def gemm_size(device, n=None):
    """The side of gemm_peak's square products: n, else 8192 on CUDA and 4096 on the CPU
    (13 s in float32 on one thread here)."""
    return n or (8192 if device == "cuda" else 4096)


def gemm_peak(clock, precision="float32", threads=None, n=None):
    """The best rate of a large square matrix product on the device, GFLOP/s (best of 8); None
    for float16 on the CPU, where torch has no fast matrix product (about 1 GFLOP/s here) but
    the models' float16 layers run faster than that: no peak to compare them with. n: the
    matrices' size (gemm_size); precision: a PRECISIONS name."""
    import torch

    if clock.device == "cpu" and precision == "fp16":
        return None
    if threads:
        torch.set_num_threads(threads)
    n = gemm_size(clock.device, n)
    kind = dtype(precision)
    a = torch.randn(n, n, device=clock.device).to(kind)
    b = torch.randn(n, n, device=clock.device).to(kind)
    a @ b
    times = []
    for _ in range(8):
        t0 = clock.now()
        a @ b
        times.append(clock.now() - t0)
    del a, b
    if clock.device == "cuda":
        torch.cuda.empty_cache()  # the workers, other processes, need the memory
    return 2 * n**3 / min(times) / 1e9


REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _git(repo, *words):
    try:
        return subprocess.run(["git", "-C", repo, *words], capture_output=True, text=True).stdout
    except OSError:  # no git installed
        return ""


def commit(repo=REPO):
    """The checkout's short commit, marked when tracked files differ from it. On the GPU machine
    scripts/bench/gpu_session.sh passes on the commit it verified (FAIRSEQ_LUONG_COMMIT): the
    device tool's copy may hold a .git of another commit than its files (seen on 2026-11-27)."""
    return os.environ.get("FAIRSEQ_LUONG_COMMIT") or git_commit(repo)


def git_commit(repo=REPO):
    """The short commit git names for the checkout at REPO, marked when tracked files differ."""
    head = _git(repo, "rev-parse", "--short", "HEAD").strip()
    if not head:
        return "?"
    return head + (" with uncommitted changes" if _git(repo, "status", "--porcelain", "--untracked-files=no").strip()
                   else "")


def checkout_digest(repo=REPO):
    """A SHA-256 of the checkout's files as a device call carries them (tracked and untracked,
    not ignored; by path and content, not mode): the same on both machines when the GPU
    machine's copy holds this checkout's files, whatever its .git says."""
    import hashlib

    names = sorted({n for n in _git(repo, "ls-files", "-z", "-c", "-o", "--exclude-standard").split("\0")
                    if n and os.path.isfile(os.path.join(repo, n))})
    if not names:
        return "?"
    digest = hashlib.sha256()
    for name in names:
        with open(os.path.join(repo, name), "rb") as f:
            digest.update(name.encode() + b"\0" + hashlib.sha256(f.read()).digest())
    return digest.hexdigest()[:16]


def session_commit(repo=REPO):
    """The commit a GPU session names (scripts/bench/gpu_session.sh): .whl/COMMIT's, written by
    gpu_wheels.sh beside the checkout, when this copy's files are the ones it saw (their
    checkout_digest, its second line); else git's here, marked with both digests (the copy's
    .git may be another commit's: on 2026-11-27 the device tool's copy held the files of one
    commit and the .git of an older one)."""
    try:
        with open(os.path.join(repo, ".whl", "COMMIT"), encoding="utf-8") as f:
            recorded, recorded_files = (f.read().splitlines() + ["", ""])[:2]
    except OSError:
        recorded = recorded_files = ""
    here = git_commit(repo)
    if not recorded:
        return here
    digest = checkout_digest(repo)
    if digest != "?" and recorded_files == f"files {digest}":
        return recorded
    return f"{here} (files {digest}; .whl/COMMIT: {recorded}, {recorded_files})"


if __name__ == "__main__":  # scripts/bench/gpu_wheels.sh and gpu_session.sh
    import sys

    print({"--commit": commit, "--digest": checkout_digest, "--session-commit": session_commit}[sys.argv[1]]())
