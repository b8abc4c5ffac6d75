#!/usr/bin/env python3
"""Where a training step's time goes: torch.profiler over a few Multi30k batches.

Uses ``benchmark_speed.py``'s data and models (run that once to binarize), groups the
profiler's self CPU time into matrix products, the encoder's LSTM kernel, and the rest
(top operators listed), for one system at one size.

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
    parser.add_argument("--system", default="luong_global_general", choices=list(bench.SYSTEMS))
    parser.add_argument("--size", default="2x256")
    parser.add_argument("--updates", type=int, default=3)
    parser.add_argument("--top", type=int, default=12)
    parser.add_argument("--work", default=os.path.join(bench.REPO, "work_dir", "bench_speed"))
    args = parser.parse_args(argv)
    torch.set_num_threads(os.cpu_count())
    layers, hidden = (int(x) for x in args.size.split("x"))
    arch, extra, criterion = bench.SYSTEMS[args.system]
    bin_dir = os.path.join(args.work, "bin")
    if not os.path.exists(os.path.join(bin_dir, "dict.en.txt")):
        raise SystemExit(f"error: {bin_dir} not found: run scripts/bench/benchmark_speed.py once first")
    model, crit, opt, samples = bench.setup_training(
        bin_dir, arch, extra + bench.size_flags(args.system, layers, hidden), criterion, 2 + args.updates)
    for sample in samples[:2]:
        bench.train_step(model, crit, opt, sample)  # warm up
    t0 = time.perf_counter()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        for sample in samples[2:]:
            bench.train_step(model, crit, opt, sample)
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
    tokens = sum(s["ntokens"] for s in samples[2:])
    print(f"# {args.system} {args.size}, {args.updates} steps, {tokens} target tokens, "
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
