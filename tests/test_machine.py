"""scripts/bench/machine.py: the machine a training or a timing ran on, in one line.

On /proc/cpuinfo texts of the three kinds of CPU this project trains on (what each kind's
first processor block holds), an unknown one and none; the command line; and
examples/iwslt15_en_vi/results.py's "trained on" column, which reads the lines recipe.sh
writes with it. recipe.sh's line itself: tests/test_recipes.py (the quick tier) and the IWSLT
rehearsal (the full tier)."""
import subprocess
import sys

import pytest
import torch

from tests.helpers import REPO, load_file

machine = load_file("scripts/bench/machine.py")


def cpuinfo(vendor, family, model, name, flags, processors=2):
    """A /proc/cpuinfo text of PROCESSORS blocks; only the first says FLAGS in full."""
    blocks = []
    for n in range(processors):
        blocks.append(f"processor\t: {n}\nvendor_id\t: {vendor}\ncpu family\t: {family}\nmodel\t\t: {model}\n"
                      f"model name\t: {name}\nflags\t\t: {flags if n == 0 else 'fpu'}\n")
    return "\n".join(blocks) + "\n"


AVX2 = "fpu sse sse2 avx f16c fma avx2"
ZEN2 = cpuinfo("AuthenticAMD", 23, 49, "AMD EPYC 7B12", AVX2)
ZEN4 = cpuinfo("AuthenticAMD", 25, 17, "AMD EPYC", AVX2 + " avx512f avx512bw avx512_bf16 avx512_vnni")
ZEN5 = cpuinfo("AuthenticAMD", 26, 2, "AMD EPYC", AVX2 + " avx512f avx512_bf16 avx512_vp2intersect")
SAPPHIRE = cpuinfo("GenuineIntel", 6, 143, "Intel(R) Xeon(R) Platinum 8481C CPU @ 2.70GHz",
                   AVX2 + " avx512f avx512_bf16 amx_bf16 amx_tile amx_int8")
SKYLAKE = cpuinfo("GenuineIntel", 6, 85, "Intel(R) Xeon(R) CPU @ 2.00GHz", AVX2 + " avx512f avx512bw")


@pytest.mark.parametrize("text,expected", [
    (ZEN2, "AMD EPYC 7B12 (family 23 model 49, Zen 2), AVX2, 2 cores"),
    (ZEN4, "AMD EPYC (family 25 model 17, Zen 4), AVX512-BF16, 2 cores"),
    (ZEN5, "AMD EPYC (family 26 model 2, Zen 5), AVX512-BF16, 2 cores"),
    (SAPPHIRE, "Intel(R) Xeon(R) Platinum 8481C CPU @ 2.70GHz (family 6 model 143, Sapphire Rapids), AMX-BF16, "
               "2 cores"),
    (SKYLAKE, "Intel(R) Xeon(R) CPU @ 2.00GHz (family 6 model 85, Skylake/Cascade Lake), AVX-512, 2 cores"),
    # a generation this file does not know: its numbers alone
    (cpuinfo("GenuineIntel", 6, 190, "Intel(R) Core(TM) i3-N305", AVX2), "Intel(R) Core(TM) i3-N305 "
                                                                        "(family 6 model 190), AVX2, 2 cores"),
    ("", "unknown CPU, no AVX2, 2 cores"),  # no /proc/cpuinfo (not Linux)
])
def test_each_kind_of_cpu_is_named_with_its_numbers_generation_and_bf16(text, expected):
    assert machine.describe_cpu(machine.cpu_info(text), cores=2) == expected


def test_only_the_first_processor_is_read():
    info = machine.cpu_info(SAPPHIRE)  # the second block's flags are "fpu" alone
    assert info["flags"] >= {"amx_bf16", "avx512_bf16"} and info["family"] == 6 and info["model"] == 143


def test_describe_names_this_cpu_and_torch():
    line = machine.describe("cpu")
    kernels = torch.backends.cpu.get_cpu_capability()
    assert line == (f"{machine.describe_cpu()}; torch {torch.__version__} (kernels {kernels}, "
                    f"{machine.count(torch.get_num_threads(), 'thread')})")


def test_count_is_plural_except_for_one():
    assert [machine.count(n, "thread") for n in (0, 1, 2, 16)] == ["0 threads", "1 thread", "2 threads", "16 threads"]


def test_the_command_line_prints_one_line_and_refuses_a_missing_gpu():
    script = REPO / "scripts" / "bench" / "machine.py"
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                          env={"PATH": "/usr/bin:/bin", "OMP_NUM_THREADS": "1", "ONEDNN_MAX_CPU_ISA": "AVX2"})
    assert proc.returncode == 0 and proc.stdout.count("\n") == 1, proc.stderr
    assert proc.stdout.startswith(machine.describe_cpu() + "; torch ") and "ONEDNN_MAX_CPU_ISA=AVX2, 1 thread)" \
        in proc.stdout
    if not torch.cuda.is_available():
        proc = subprocess.run([sys.executable, str(script), "--device", "cuda"], capture_output=True, text=True)
        assert proc.returncode == 1 and proc.stderr == (
            "machine.py: error: --device cuda: torch sees no CUDA device here\n")


def test_the_iwslt_table_names_each_machine_a_training_ran_on(tmp_path):
    """results.py's "trained on": each machine of the log's starts once, in order; a log from
    before the recipes wrote them says so."""
    sys.path.insert(0, str(REPO / "examples" / "iwslt15_en_vi"))
    try:
        import results
    finally:
        sys.path.pop(0)
    log = tmp_path / "train.log"
    a, b = "AMD EPYC (family 25 model 17, Zen 4), AVX512-BF16, 2 cores; torch 2.13.0+cpu (kernels AVX512, 2 threads)", \
        "Intel(R) Xeon(R) Platinum 8481C (family 6 model 143, Sapphire Rapids), AMX-BF16, 2 cores; torch 2.13.0+cpu " \
        "(kernels AVX512, 2 threads)"
    log.write_text(f"== 2026-12-06 03:21:40 fairseq-train data-bin --arch lstm\n== 2026-12-06 03:21:41 machine: {a}\n"
                   "2026-12-06 03:25:03 | INFO | train_inner | epoch 001:    100 / 726 loss=9.792\n"
                   f"== 2026-12-07 01:00:00 machine: {b}\n== 2026-12-07 04:00:00 machine: {a}\n"
                   "a fairseq line that says machine: but is not recipe.sh's\n", encoding="utf-8")
    assert results.machines(log) == [a, b]
    log.write_text("2026-12-04 10:00:00 | INFO | train_inner | epoch 001:    100 / 726 loss=9.792\n", encoding="utf-8")
    assert results.machines(log) == []
