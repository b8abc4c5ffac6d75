"""scripts/bench/gpu_session.sh, the one command of a GPU session, and the wheels it installs
(scripts/bench/gpu_wheels.sh): what can be checked without a GPU. The GPU machine has the
packages of scripts/bench/gpu_machine_packages.txt; the wheels must bring every other one that a
gpu_check.py run imports."""
import importlib.metadata
import json
import os
import re
import subprocess
import sys
import sysconfig
import tarfile

import pytest
import torch

from tests.helpers import BENCH, REPO, load_bench

ENV = dict(os.environ, PYTHONWARNINGS="ignore", OMP_NUM_THREADS="1")
# what gpu_check.py's commands import: fairseq's four commands with the plugin as --user-dir, and
# the scripts it runs; prints {module: file} of every module then loaded
IMPORTS = r"""
import argparse, json, os, sys
repo = sys.argv[1]
sys.path[:0] = [repo, os.path.join(repo, "scripts", "bench"), os.path.join(repo, "scripts", "data")]
import fairseq_cli.generate, fairseq_cli.preprocess, fairseq_cli.train, fairseq_cli.validate
from fairseq import utils
utils.import_user_module(argparse.Namespace(user_dir=os.path.join(repo, "fairseq_luong")))
import benchmark_speed, gpu_check, make_number_corpus, project_chunks
print(json.dumps({name: getattr(m, "__file__", None) for name, m in list(sys.modules.items())}))
"""
# a sitecustomize that writes, as each Python process ends, the modules it loaded
TRACER = r"""
import atexit, json, os, sys
def _dump():
    with open(os.path.join(os.environ["IMPORT_TRACE"], f"{os.getpid()}.json"), "w") as f:
        json.dump({n: getattr(m, "__file__", None) for n, m in list(sys.modules.items())}, f)
atexit.register(_dump)
"""


def canonical(name):
    return re.sub(r"[-_.]+", "-", name).lower()


def pins():
    """gpu_wheels.sh's NAME==VERSION pins, by canonical name."""
    out = subprocess.run(["bash", str(BENCH / "gpu_wheels.sh"), "--list"], capture_output=True, text=True,
                         check=True).stdout
    return dict((canonical(line.split("==")[0]), line.split("==")[1]) for line in out.split())


def on_the_gpu_machine():
    lines = (BENCH / "gpu_machine_packages.txt").read_text().splitlines()
    return {canonical(line) for line in lines if line.strip() and not line.startswith("#")}


def distributions(modules):
    """The distributions (canonical names) that MODULES ({name: file}) were loaded from: neither the
    standard library nor this checkout's own files; UNKNOWN(...) for a module of neither."""
    owners = importlib.metadata.packages_distributions()
    ours = canonical(importlib.metadata.metadata("fairseq_luong")["Name"])
    stdlib = tuple({sysconfig.get_paths()[k] for k in ("stdlib", "platstdlib")})
    found = set()
    for name, path in modules.items():
        if name.split(".")[0] in sys.stdlib_module_names or name in ("__main__", "sitecustomize") or not path:
            continue
        if "site-packages" in path:  # by the folder or file it came from (scipy's extensions have bare names)
            top = path.split("site-packages" + os.sep, 1)[1].split(os.sep)[0].split(".")[0]
        elif not os.path.isabs(path):  # torch.ops, torch.classes: a file name only
            top = name.split(".")[0]
        elif path.startswith(str(REPO)) or path.startswith(stdlib):  # fairseq_luong, scripts/, tests/
            continue
        else:
            top = None
        if top and top.startswith("__editable__"):  # this checkout, installed in editable mode
            continue
        found |= {canonical(d) for d in owners.get(top, [])} - {ours} or {f"UNKNOWN({name}: {path})"}
    return found


def test_help_and_one_line_without_cuda(tmp_path):
    """--help says how to run it; without CUDA it stops in one line, status 1, before writing
    anything (the device call's $OUT stays empty)."""
    proc = subprocess.run(["bash", str(BENCH / "gpu_session.sh"), "--help"], capture_output=True, text=True)
    assert proc.returncode == 0 and "--cpu-stand-in" in proc.stdout and "--budget" in proc.stdout
    assert "set -euo" not in proc.stdout
    if torch.cuda.is_available():
        pytest.skip("a CUDA device here")
    out = tmp_path / "out"
    proc = subprocess.run(["bash", str(BENCH / "gpu_session.sh")], capture_output=True, text=True,
                          env=dict(ENV, OUT=str(out)), cwd=tmp_path)
    lines = (proc.stdout + proc.stderr).splitlines()
    assert proc.returncode == 1 and len(lines) == 1, lines
    assert lines[0].startswith("gpu_session.sh: no CUDA device here (torch ") and "--cpu-stand-in" in lines[0]
    assert not out.exists()


def test_the_wheel_pins_are_what_setup_installs_here():
    """Each wheel carried to the GPU machine is the version scripts/setup.sh installed here (the
    tests ran with it)."""
    pinned = pins()
    assert set(pinned) == {"ve-fairseq", "hydra-core", "omegaconf", "antlr4-python3-runtime", "bitarray",
                           "sacremoses"}
    for name, version in pinned.items():
        assert importlib.metadata.version(name) == version, name


def test_the_wheels_bring_what_the_gpu_machine_lacks():
    """Every distribution that fairseq's commands with --user-dir fairseq_luong and gpu_check.py's
    scripts import is on the GPU machine or among the wheels; and no wheel is carried for nothing
    (sacremoses: the recipes' tokenizer, not gpu_check's)."""
    proc = subprocess.run([sys.executable, "-c", IMPORTS, str(REPO)], capture_output=True, text=True, env=ENV)
    assert proc.returncode == 0, proc.stderr[-3000:]
    needed = distributions(json.loads(proc.stdout.splitlines()[-1]))
    assert {"ve-fairseq", "hydra-core", "omegaconf", "bitarray", "torch"} <= needed  # the trace sees them
    pinned, machine = set(pins()), on_the_gpu_machine()
    assert needed - machine - pinned == set()
    assert pinned - needed == {"sacremoses"}


def test_gpu_check_finds_fairseqs_commands_on_path_and_the_commit_without_git(tmp_path, monkeypatch):
    """With fairseq installed by pip --target (the GPU machine), its commands are not beside the
    Python but in the target's bin/, which gpu_session.sh puts on PATH; a copy without .git takes
    the commit gpu_session.sh passes on."""
    bench_device, gpu_check = load_bench("bench_device"), load_bench("gpu_check")
    (tmp_path / "bin").mkdir()
    tool = tmp_path / "bin" / "fairseq-train"
    tool.write_text("#!/bin/sh\n")
    tool.chmod(0o755)
    assert gpu_check.bin_path("fairseq-train") == os.path.join(os.path.dirname(sys.executable), "fairseq-train")
    monkeypatch.setattr(sys, "executable", str(tmp_path / "python3"))
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}")
    assert gpu_check.bin_path("fairseq-train") == str(tool)
    assert bench_device.commit(str(tmp_path)) == "?"  # no .git
    monkeypatch.setenv("FAIRSEQ_LUONG_COMMIT", "abc1234")  # what gpu_session.sh verified wins over git's
    assert bench_device.commit(str(tmp_path)) == bench_device.commit() == "abc1234"


def test_the_session_names_the_commit_whose_files_it_has(tmp_path):
    """gpu_session.sh names .whl/COMMIT's commit (bench_device.session_commit) only when the
    copy's files are the ones gpu_wheels.sh saw (their digest), whatever the copy's .git says:
    on 2026-11-27 the device tool's copy held the files of one commit and the .git of an older
    one. (The session's log line with it: test_the_session_runs_with_the_cpu_standing_in.)"""
    bench_device = load_bench("bench_device")
    copy = tmp_path / "copy"
    subprocess.run(["git", "clone", "-q", "--no-checkout", str(REPO), str(copy)], check=True)
    for name in subprocess.run(["git", "-C", str(REPO), "ls-files", "-co", "--exclude-standard"],
                               capture_output=True, text=True, check=True).stdout.splitlines():
        if (REPO / name).is_file():  # the files a device call carries ...
            (copy / name).parent.mkdir(parents=True, exist_ok=True)
            (copy / name).write_bytes((REPO / name).read_bytes())
    subprocess.run(["git", "-C", str(copy), "reset", "-q", "HEAD~1"], check=True)  # ... under an older .git
    older = subprocess.run(["git", "-C", str(copy), "rev-parse", "--short", "HEAD"], capture_output=True,
                           text=True).stdout.strip()
    assert bench_device.session_commit(str(copy)) == f"{older} with uncommitted changes"  # no .whl/COMMIT: git's
    (copy / ".whl").mkdir()
    digest = bench_device.checkout_digest(str(copy))
    assert re.fullmatch(r"[0-9a-f]{16}", digest) and digest == bench_device.checkout_digest(str(REPO))
    (copy / ".whl" / "COMMIT").write_text(f"abc1234\nfiles {digest}\n")
    assert bench_device.session_commit(str(copy)) == "abc1234"
    (copy / ".whl" / "COMMIT").write_text("abc1234\nfiles 0123456789abcdef\n")
    assert bench_device.session_commit(str(copy)) == (f"{older} with uncommitted changes (files {digest}; "
                                                      ".whl/COMMIT: abc1234, files 0123456789abcdef)")


@pytest.mark.full
def test_the_session_runs_with_the_cpu_standing_in(tmp_path):
    """gpu_session.sh --cpu-stand-in end to end (about 2 min on 2 cores): every check of
    gpu_check.py passes and its speed table follows (a tiny one), so its plumbing cannot rot
    before a GPU runs it; the results are at most 8 files under $OUT, and each module that any
    of its Python processes loaded comes from the GPU machine's packages or the wheels."""
    trace, out = tmp_path / "trace", tmp_path / "out"
    trace.mkdir()
    (tmp_path / "tracer").mkdir()
    (tmp_path / "tracer" / "sitecustomize.py").write_text(TRACER)
    env = dict(ENV, OUT=str(out), IMPORT_TRACE=str(trace), PYTHONPATH=str(tmp_path / "tracer"))
    # the default --budget (520 s) fits a GPU; the stand-in took 612 s beside three trainings on 2 cores
    proc = subprocess.run(["bash", str(BENCH / "gpu_session.sh"), "--cpu-stand-in", "--budget", "3600",
                           "--work", str(tmp_path / "work")], capture_output=True, text=True, env=env)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    files = sorted(p.name for p in out.iterdir())
    assert files == ["gpu_check.json", "gpu_check.md", "gpu_check_logs.tar.gz", "gpu_session.log", "machine.txt"]
    assert all((out / f).stat().st_size < 16 * 2**20 for f in files)
    # gpu_check.py's every check, on the CPU where the two sides are the same device
    rows = json.loads((out / "gpu_check.json").read_text())["rows"]
    assert {r["check"]: r["result"] for r in rows} == {
        "loss on CPU and device (float32)": "PASS", "translations on CPU and device": "PASS",
        "--fp16 training against float32": "PASS", "--bf16 training against float32": "PASS",
        "fused criterion in float16": "PASS", "perSPE batches through the pinned-memory loader": "PASS",
        "one process per GPU (torchrun, nccl)": "n/a", "speed table (benchmark_speed.py)": "PASS"}, rows
    log = (out / "gpu_session.log").read_text()
    assert "fairseq_luong registered" in log and "100 of 100 test translations identical" in log
    assert re.search(r"^date: .*; commit: (.*)$", log, re.M).group(1) == load_bench("bench_device").session_commit()
    assert (out / "gpu_check.md").read_text().startswith("| check | result | numbers |  (device CPU (standing in for "
                                                          "a GPU)")
    # then benchmark_speed.py's table on the same device, with the command that made it
    table = json.loads((out / "gpu_check.json").read_text())["speed"]
    assert table["command"].startswith("scripts/bench/benchmark_speed.py --shape paper") and " --device cpu " in (
        table["command"])
    assert [line.split(" | ")[1:3] for line in table["table"] if line.startswith("| 1x16")] == [["bf16", "lstm"]]
    assert "\n".join(table["table"]) in log
    with tarfile.open(out / "gpu_check_logs.tar.gz") as tar:
        assert {"./float32_cpu.log", "./generate_cpu.log", "./speed.log"} <= set(tar.getnames())
    # the imports of every process: gpu_check.py, fairseq's commands, benchmark_speed.py's workers
    dumps = [json.loads(p.read_text()) for p in trace.iterdir()]
    assert len(dumps) >= 10
    needed = set().union(*(distributions(d) for d in dumps))
    assert needed - on_the_gpu_machine() - set(pins()) == set()


@pytest.mark.full
def test_the_session_stopped_by_its_budget_keeps_what_it_did(tmp_path):
    """--budget stops gpu_check.py (status 124) and the logs written so far still come back: every
    log in the work folder, whatever step the budget reached (the whole stand-in takes over 100 s
    on 2 cores, so 20 s always stops it; its first log comes after the data are prepared, about
    8 s on a quiet machine, but beside a study preparing them once took more than 25 s, so the logs
    are compared with what was written, not with a fixed step, and a budget that stopped it before
    any log is doubled, at most three times: 80 s wrote nothing only where the whole takes far more
    than 160 s)."""
    for budget in (20, 40, 80, 160):
        out, work = tmp_path / str(budget) / "out", tmp_path / str(budget) / "work"
        proc = subprocess.run(["bash", str(BENCH / "gpu_session.sh"), "--cpu-stand-in", "--budget", str(budget),
                               "--work", str(work)], capture_output=True, text=True, env=dict(ENV, OUT=str(out)))
        assert proc.returncode == 124, proc.stdout[-3000:]
        assert f"gpu_session.sh: gpu_check.py stopped after {budget} s (--budget)" in proc.stdout
        written = sorted(f"./{p.relative_to(work)}" for p in work.rglob("*.log"))
        if written:
            break
    with tarfile.open(out / "gpu_check_logs.tar.gz") as tar:
        assert written and sorted(tar.getnames()) == written
    # gpu_check.json holds every check the log reported finished (written after each), if any
    reported = re.findall(r"^\[gpu_check\] (.+): (PASS|FAIL|n/a) \(", proc.stdout, re.M)
    rows = json.loads((out / "gpu_check.json").read_text())["rows"] if (out / "gpu_check.json").exists() else []
    assert [(r["check"], r["result"]) for r in rows] == reported


def test_gpu_check_writes_its_json_after_each_check(tmp_path):
    """gpu_check.py's gpu_check.json is written as each check finishes, not only at the end: a
    device call's time limit or gpu_session.sh's --budget stopped the checks on an H200 (2026-11-28)
    and took their rows with them."""
    gpu_check = load_bench("gpu_check")
    args = gpu_check.argparse.Namespace(out=str(tmp_path), device="cpu")
    checks = gpu_check.Checks(args, {"device": "CPU", "torch": torch.__version__, "commit": "abc1234"})
    checks.add("first check", True, "1.0 against 1.0")
    on_disk = json.loads((tmp_path / "gpu_check.json").read_text())
    assert on_disk == {"device": "CPU", "torch": torch.__version__, "commit": "abc1234",
                       "rows": [{"check": "first check", "result": "PASS", "numbers": "1.0 against 1.0"}],
                       "speed": None}
    checks.add("second check", False, "2.0 against 1.0")
    assert [r["result"] for r in json.loads((tmp_path / "gpu_check.json").read_text())["rows"]] == ["PASS", "FAIL"]
    checks.save({"command": "benchmark_speed.py", "table": ["| a |"]})
    assert json.loads((tmp_path / "gpu_check.json").read_text())["speed"]["table"] == ["| a |"]


def test_translations_on_two_devices_may_differ_only_where_their_scores_tie():
    """gpu_check's translations row: on an H200 (2026-11-27) 99 of 100 float32 translations were
    identical to the CPU's, and the one that differed was a tie (the two best scores 2.7e-6
    apart); a translation that differs with a clearly better score on one side, the same
    translation scored differently, or a missing one fail."""
    gpu_check = load_bench("gpu_check")
    cpu = {i: (-1.0 - i / 100, f"words {i}") for i in range(100)}
    assert gpu_check.compare_translations(cpu, dict(cpu))[0]
    tie = {**cpu, 57: (cpu[57][0] - 3e-6, "other words")}
    ok, numbers = gpu_check.compare_translations(cpu, tie)
    assert ok and numbers.startswith("99 of 100 test translations identical") and "(sentence 57)" in numbers
    assert not gpu_check.compare_translations(cpu, {**cpu, 57: (cpu[57][0] + 0.2, "other words")})[0]
    assert not gpu_check.compare_translations(cpu, {**cpu, 3: (cpu[3][0] + 0.01, cpu[3][1])})[0]
    assert not gpu_check.compare_translations(cpu, {i: cpu[i] for i in range(99)})[0]


def test_the_precision_checks_limit_is_float32s_own_drift_between_devices():
    """gpu_check's --fp16/--bf16 rows: within 1 % of float32 on the device, or within twice the
    distance float32 itself ends at between the CPU and the device (the same training with other
    rounding), where that is more; the CPU standing in (no second float32 run) keeps 1 %."""
    gpu_check = load_bench("gpu_check")
    assert gpu_check.precision_limit([3.1498], [3.1498]) == 0.01
    assert gpu_check.precision_limit(None, [3.1498]) == 0.01
    assert gpu_check.precision_limit([3.1500], [3.1498]) == 0.01  # a drift of 0.006 %: 1 % stands
    assert gpu_check.precision_limit([3.1498], [3.1886]) == pytest.approx(2 * 0.0388 / 3.1886)  # 2.4 %
