#!/usr/bin/env python3
"""Cost of local-p vs global attention as the source grows (Luong et al. 2015, section 3.2).

For each source length it times, in the same run and alternating the systems, (a) one
incremental decoder step for a batch of sentences (encoder and first step excluded),
(b) one teacher-forced training step of the decoder (forward + backward, 20 target
words, encoder excluded) and (c) beam-5 generation of a fixed number of target words
per sentence with fairseq's SequenceGenerator (encoder included), for
``luong_global_general`` and ``luong_localp`` (general score) of equal size, and for
local-p forced to each of its two paths: ``gather`` (the 2D+1 window gathered and
scored: O(D) per step) and ``dense`` (the whole memory scored, all but the window
masked). ``luong_localp`` as shipped takes the dense path up to
``luong_attention.DENSE_UP_TO`` windows of source and gathers beyond; the table shows
where each path wins, and each system's time relative to global attention.

Usage: python scripts/bench/benchmark_attention.py [--lengths 15 21 42 84 400 1600] [--hidden 256]
"""
import argparse
import contextlib
import os
import statistics
import tempfile
import time

import torch

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # scripts/bench/..


def build(arch, hidden, layers, vocab, window):
    from fairseq import options, tasks
    from fairseq.data import Dictionary

    ddir = tempfile.mkdtemp(prefix="bench_dicts_")
    d = Dictionary()
    for i in range(vocab):
        d.add_symbol(f"w{i}")
    d.save(os.path.join(ddir, "dict.src.txt"))
    d.save(os.path.join(ddir, "dict.tgt.txt"))
    argv = [ddir, "--user-dir", os.path.join(REPO, "fairseq_luong"), "--task", "translation",
            "-s", "src", "-t", "tgt", "--arch", arch,
            "--encoder-embed-dim", str(hidden), "--encoder-hidden-size", str(hidden),
            "--decoder-embed-dim", str(hidden), "--decoder-hidden-size", str(hidden),
            "--encoder-layers", str(layers), "--decoder-layers", str(layers),
            "--local-window", str(window), "--max-source-positions", "100000"]
    args = options.parse_args_and_arch(options.get_training_parser(), argv)
    task = tasks.setup_task(args)
    torch.manual_seed(0)
    model = task.build_model(args).eval()
    model.decoder.make_generation_fast_(need_attn=False)  # as fairseq-generate without --print-alignment
    return model, task


def src_batch(task, bsz, srclen, seed=0):
    g = torch.Generator().manual_seed(seed)
    d = task.source_dictionary
    src = torch.randint(d.nspecial, len(d), (bsz, srclen), generator=g)
    src[:, -1] = d.eos()
    return src, torch.full((bsz,), srclen, dtype=torch.long)


@torch.no_grad()
def time_decoder_step(model, task, srclen, bsz, steps):
    src, lengths = src_batch(task, bsz, srclen)
    enc = model.encoder(src, lengths)
    state = {}
    prev = torch.full((bsz, 1), task.target_dictionary.eos(), dtype=torch.long)
    model.decoder(prev, encoder_out=enc, incremental_state=state)  # first step: keys cached
    t0 = time.perf_counter()
    for t in range(steps):
        prev = torch.cat([prev, torch.full((bsz, 1), 5 + t % 7, dtype=torch.long)], 1)
        model.decoder(prev, encoder_out=enc, incremental_state=state)
    return (time.perf_counter() - t0) / steps


def time_training_step(model, task, srclen, bsz, tgtlen=20):
    src, lengths = src_batch(task, bsz, srclen)
    enc = model.encoder(src, lengths)
    enc = {k: (v.detach().requires_grad_(v.is_floating_point()) if v.is_floating_point() else v)
           for k, v in enc.items()}
    g = torch.Generator().manual_seed(2)
    prev = torch.randint(4, len(task.target_dictionary), (bsz, tgtlen), generator=g)
    model.train()
    t0 = time.perf_counter()
    features, _ = model.decoder(prev, encoder_out=enc, features_only=True)
    features.pow(2).sum().backward()
    elapsed = time.perf_counter() - t0
    model.eval()
    model.zero_grad(set_to_none=True)
    return elapsed


@contextlib.contextmanager
def local_path(path):
    """Force local attention's dense or gather path (None: as shipped)."""
    from fairseq_luong.modules import luong_attention

    saved = luong_attention.DENSE_UP_TO
    if path is not None:
        luong_attention.DENSE_UP_TO = {"dense": 10**9, "gather": 0}[path]
    try:
        yield
    finally:
        luong_attention.DENSE_UP_TO = saved


@torch.no_grad()
def time_generation(model, task, srclen, n_sent, out_len):
    from fairseq.sequence_generator import SequenceGenerator

    gen = SequenceGenerator([model], task.target_dictionary, beam_size=5,
                            max_len_a=0, max_len_b=out_len, min_len=out_len)
    src, lengths = src_batch(task, n_sent, srclen, seed=1)
    t0 = time.perf_counter()
    for i in range(n_sent):
        gen.forward({"net_input": {"src_tokens": src[i:i + 1], "src_lengths": lengths[i:i + 1]}})
    return (time.perf_counter() - t0) / n_sent


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lengths", type=int, nargs="+", default=[15, 21, 42, 84, 400, 1600])
    parser.add_argument("--hidden", type=int, default=256)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--vocab", type=int, default=8000)
    parser.add_argument("--window", type=int, default=10, help="D of local-p")
    parser.add_argument("--batch", type=int, default=32, help="sentences per decoder step")
    parser.add_argument("--steps", type=int, default=30, help="timed decoder steps")
    parser.add_argument("--sentences", type=int, default=4, help="sentences generated per length")
    parser.add_argument("--out-len", type=int, default=30, help="target words generated")
    parser.add_argument("--repeats", type=int, default=3, help="alternating repetitions (median)")
    parser.add_argument("--threads", type=int, default=torch.get_num_threads())
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    models = {name: build(name, args.hidden, args.layers, args.vocab, args.window)
              for name in ("luong_global_general", "luong_localp")}
    # name: (model, forced local path)
    systems = {"luong_global_general": (models["luong_global_general"], None),
               "luong_localp": (models["luong_localp"], None),
               "luong_localp (gather)": (models["luong_localp"], "gather"),
               "luong_localp (dense)": (models["luong_localp"], "dense")}
    print(f"# {args.layers} x {args.hidden} LSTM, vocab {args.vocab}, D = {args.window}, "
          f"{args.threads} threads, {args.batch} sentences per step; medians of {args.repeats} "
          "alternating runs; ratios to global attention")
    print("| S | system | decoder step ms | ratio | train step ms | ratio | beam-5 s/sent | ratio |")
    print("|" + "---|" * 8)
    # warm-up: every path forward and backward once (a path's first backward took 1 s, 136x
    # global's, at S = 10 on one thread: one-off set-up that --repeats 1 would have timed)
    for name, ((model, task), path) in systems.items():
        with local_path(path):
            time_decoder_step(model, task, args.lengths[0], args.batch, 3)
            time_training_step(model, task, args.lengths[0], args.batch)
    for srclen in args.lengths:
        step = {k: [] for k in systems}
        train = {k: [] for k in systems}
        gen = {k: [] for k in systems}
        for _ in range(args.repeats):
            for name, ((model, task), path) in systems.items():  # alternate the systems
                with local_path(path):
                    step[name].append(time_decoder_step(model, task, srclen, args.batch, args.steps))
                    train[name].append(time_training_step(model, task, srclen, args.batch))
                    if path is None:  # beam search: the shipped systems only
                        gen[name].append(time_generation(model, task, srclen, args.sentences, args.out_len))
        base = {key: statistics.median(col["luong_global_general"]) for key, col in
                (("step", step), ("train", train), ("gen", gen))}
        for name in systems:
            st, tr = statistics.median(step[name]), statistics.median(train[name])
            row = (f"| {srclen} | {name} | {st * 1e3:.2f} | {st / base['step']:.2f} | {tr * 1e3:.1f} "
                   f"| {tr / base['train']:.2f} |")
            if gen[name]:
                ge = statistics.median(gen[name])
                row += f" {ge:.3f} | {ge / base['gen']:.2f} |"
            else:
                row += " | |"
            print(row, flush=True)


if __name__ == "__main__":
    main()
