"""The machine a training or a timing ran on, in one line.

A training is reproducible bit for bit only on the same kind of CPU, and a timing means
something only beside the machine that made it, so every benchmark table and every start of a
recipe's training names it (``describe``). The kind that matters on the CPU is what bfloat16
runs on (``cpu_kind``): AMX tiles (``AMX-BF16``), AVX-512 with bf16 dot products
(``AVX512-BF16``), AVX-512 without them, or AVX2 alone (bf16 emulated), read from the flags of
``/proc/cpuinfo``; beside it, what torch's own kernels dispatch to
(``torch.backends.cpu.get_cpu_capability()``: ``ATEN_CPU_CAPABILITY`` can hold it lower) and
``ONEDNN_MAX_CPU_ISA`` when it is set. Model names such as "AMD EPYC" leave the generation
out, so the family and model numbers are given too, with the generation where it is known.

    python scripts/bench/machine.py [--device auto|cpu|cuda]

Not part of the plugin that fairseq loads; torch is imported only by ``describe``.
"""
import argparse
import os

# (vendor_id, cpu family) -> [(first model, last model, generation)]: the server parts seen
# on this project's machines and their neighbours; any other prints its numbers alone
GENERATIONS = {
    ("AuthenticAMD", 23): [(0x30, 0x3F, "Zen 2")],
    ("AuthenticAMD", 25): [(0x00, 0x0F, "Zen 3"), (0x10, 0x1F, "Zen 4"), (0xA0, 0xAF, "Zen 4c")],
    ("AuthenticAMD", 26): [(0x00, 0xFF, "Zen 5")],
    ("GenuineIntel", 6): [(0x55, 0x55, "Skylake/Cascade Lake"), (0x6A, 0x6A, "Ice Lake"),
                          (0x8F, 0x8F, "Sapphire Rapids"), (0xCF, 0xCF, "Emerald Rapids"),
                          (0xAD, 0xAD, "Granite Rapids")],
}


def cpu_info(text=None):
    """{vendor, family, model, name, flags} of the first processor in /proc/cpuinfo's TEXT
    (read when not given); fields it lacks are None (flags: an empty set)."""
    if text is None:
        try:
            with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
                text = f.read()
        except OSError:
            text = ""
    fields = {}
    for line in text.splitlines():
        if not line.strip():
            if fields:
                break  # the first processor's block ends
            continue
        key, _, value = line.partition(":")
        fields.setdefault(key.strip(), value.strip())

    def number(key):
        try:
            return int(fields[key])
        except (KeyError, ValueError):
            return None

    return dict(vendor=fields.get("vendor_id"), family=number("cpu family"), model=number("model"),
                name=fields.get("model name"), flags=set(fields.get("flags", "").split()))


def cpu_kind(flags):
    """What bfloat16 runs on, from the CPU's flags: 'AMX-BF16', 'AVX512-BF16', 'AVX-512',
    'AVX2' or 'no AVX2'."""
    if "amx_bf16" in flags:
        return "AMX-BF16"
    if "avx512_bf16" in flags:
        return "AVX512-BF16"
    if "avx512f" in flags:
        return "AVX-512"
    return "AVX2" if "avx2" in flags else "no AVX2"


def generation(info):
    """The generation of INFO's family and model ('Zen 4'), or None where unknown."""
    for first, last, name in GENERATIONS.get((info["vendor"], info["family"]), ()):
        if info["model"] is not None and first <= info["model"] <= last:
            return name
    return None


def describe_cpu(info=None, cores=None):
    """'AMD EPYC (family 25 model 17, Zen 4), AVX512-BF16, 2 cores' for INFO (cpu_info())."""
    info = info or cpu_info()
    if cores is None:
        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    numbers = [f"family {info['family']} model {info['model']}"] if None not in (info["family"], info["model"]) else []
    numbers += [generation(info)] if generation(info) else []
    where = f" ({', '.join(numbers)})" if numbers else ""
    return f"{info['name'] or 'unknown CPU'}{where}, {cpu_kind(info['flags'])}, {count(cores, 'core')}"


def count(n, noun):
    """'1 thread', '2 threads': N and NOUN, plural where N is not 1 (the headers that name a machine)."""
    return f"{n} {noun}{'s' if n != 1 else ''}"


def describe(device="cpu"):
    """The machine in one line: on the CPU, the CPU (describe_cpu), then torch's version, the
    kernels it dispatches to and its threads; on CUDA, the GPU and CUDA's version first.
    DEVICE 'auto': CUDA where torch sees a GPU (where fairseq-train without --cpu runs)."""
    import torch

    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"

    kernels = torch.backends.cpu.get_cpu_capability()
    onednn = os.environ.get("ONEDNN_MAX_CPU_ISA")
    threads = torch.get_num_threads()
    cpu = (f"{describe_cpu()}; torch {torch.__version__} (kernels {kernels}"
           f"{f', ONEDNN_MAX_CPU_ISA={onednn}' if onednn else ''}, {count(threads, 'thread')})")
    if device == "cuda":
        if not torch.cuda.is_available():
            raise SystemExit("machine.py: error: --device cuda: torch sees no CUDA device here")
        return f"{torch.cuda.get_device_name(0)}, CUDA {torch.version.cuda}; host {cpu}"
    return cpu


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto",
                        help="cuda: device 0; auto: cuda where torch sees a GPU (default)")
    args = parser.parse_args(argv)
    print(describe(args.device))


if __name__ == "__main__":
    main()
