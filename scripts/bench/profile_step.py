#!/usr/bin/env python3
"""Where a training step's time goes: torch.profiler over a few batches.

Builds the system as ``benchmark_speed.py``'s training worker does (its data: run that once
to binarize, or give ``--bin``; its model flags, criterion and fairseq's Trainer.train_step),
and groups the profiler's self CPU time of the steps into matrix products, the encoder's
LSTM kernel, and the rest (top operators listed), for one system at one size, in float32
on the CPU.

Usage: python scripts/bench/profile_step.py [--system luong_global_general] [--size 2x256]
"""
import argparse
import os
import time

import benchmark_speed as bench
import torch

GEMM = {"aten::mm", "aten::addmm", "aten::addmm_", "aten::bmm", "aten::baddbmm", "aten::matmul"}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--system", default="luong_global_general",
                        choices=[name for name in bench.SYSTEMS if name not in bench.BOUNDS])
    parser.add_argument("--size", default="2x256")
    parser.add_argument("--shape", choices=list(bench.SHAPES), default="multi30k",
                        help="the batches, as benchmark_speed.py's --shape (paper: 128 sentences)")
    parser.add_argument("--updates", type=int, default=3)
    parser.add_argument("--top", type=int, default=12)
    parser.add_argument("--threads", type=int, default=os.cpu_count())
    parser.add_argument("--work", default=os.path.join(bench.REPO, "work_dir", "bench_speed"))
    parser.add_argument("--bin", help="binarized data (default: WORK/bin, benchmark_speed.py's Multi30k; "
                                      "its --shape paper data is WORK/paper_v...)")
    args = parser.parse_args(argv)
    if bench.parse_size(args.size) is None:
        parser.error(f"--size {args.size}: LAYERSxHIDDEN, e.g. 2x256")
    torch.set_num_threads(args.threads)
    layers, hidden = bench.parse_size(args.size)
    bin_dir = args.bin or os.path.join(args.work, "bin")
    if not os.path.exists(os.path.join(bin_dir, "dict.en.txt")):
        raise SystemExit(f"error: {bin_dir} not found: run scripts/bench/benchmark_speed.py once first, "
                         "or give its data with --bin")
    arch, extra, criterion = bench.SYSTEMS[args.system]
    spec = {"bin": bin_dir, "arch": arch, "flags": extra + bench.size_flags(args.system, layers, hidden),
            "shape": args.shape, "precision": "float32", "device": "cpu"}
    cfg, task, model = bench.load(spec, criterion)
    samples = bench.batches(task, spec, "train", bench.WARMUP + args.updates)
    # as benchmark_speed.py's training worker
    trainer = bench.warm_trainer(cfg, task, model, task.build_criterion(cfg.criterion), samples[:bench.WARMUP])
    t0 = time.perf_counter()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        for sample in samples[bench.WARMUP:]:
            trainer.train_step([sample])
    wall = time.perf_counter() - t0
    events = prof.key_averages()
    total = sum(e.self_cpu_time_total for e in events) / 1e6
    groups = {"matrix products": 0.0, "sequence LSTM kernel (oneDNN)": 0.0, "everything else": 0.0}
    for e in events:
        sec = e.self_cpu_time_total / 1e6
        if e.key in GEMM:
            groups["matrix products"] += sec
        elif "rnn" in e.key.lower():  # oneDNN's sequence LSTM (mkldnn_rnn_layer...)
            groups["sequence LSTM kernel (oneDNN)"] += sec
        else:
            groups["everything else"] += sec
    tokens = sum(s["ntokens"] for s in samples[bench.WARMUP:])
    print(f"# {args.system} {args.size}, {args.updates} steps, {tokens} target tokens, {args.threads} threads, "
          f"{wall:.2f} s wall under the profiler, {total:.2f} s self CPU time")
    print("| group | s | share |\n|---|---|---|")
    for k, v in groups.items():
        print(f"| {k} | {v:.2f} | {100 * v / total:.0f}% |")
    print("\n| top operator (self CPU) | s | share | calls |\n|---|---|---|---|")
    for e in sorted(events, key=lambda e: -e.self_cpu_time_total)[: args.top]:
        print(f"| {e.key} | {e.self_cpu_time_total / 1e6:.2f} | "
              f"{100 * e.self_cpu_time_total / 1e6 / total:.1f}% | {e.count} |")


if __name__ == "__main__":
    main()
