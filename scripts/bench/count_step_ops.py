#!/usr/bin/env python3
"""Operations per decoder step: what a GPU pays a kernel launch for, counted on any machine.

On a GPU every ATen operation that computes something launches at least one kernel, and at
Luong et al.'s size (4 x 1000, 128 sentences) a step's arithmetic is so short that launches
can bound the speed. This counts, with a TorchDispatchMode, the ATen operations that are not
views (``OpOverload.is_view``: no kernel) in

* a training step, forward and backward: the count for targets of T + 1 steps minus the
  count for T steps (the same sources, so the encoder and everything done once cancel):
  what one more target step costs;
* a beam-search step: one incremental ``forward_decoder`` call after the first
  (fairseq's SequenceGenerator calls it once per step, beam 5), the output layer and
  log-softmax included;

for fairseq's ``lstm`` (Luong global-general attention with input feeding) and our models,
built as ``benchmark_speed.py`` builds its systems, at ``--layers`` layers (the counts do
not depend on the hidden size; tiny models here). On the CPU the same operations run as
library calls, so the count says nothing of CPU speed.

Usage: python scripts/bench/count_step_ops.py [--layers 4] [--systems lstm luong_global_general ...]
"""
import argparse
import os
import sys
from collections import Counter

import torch
from benchmark_speed import ONE_LAYER, REPO, SYSTEMS, TRAIN_ONLY, size_flags
from torch.utils._python_dispatch import TorchDispatchMode

USER_DIR = os.path.join(REPO, "fairseq_luong")
# benchmark_speed.py's systems that are models of their own (not a criterion variant)
MODELS = [name for name in SYSTEMS if name not in TRAIN_ONLY]


class CountOps(TorchDispatchMode):
    """Counts the ATen operations that compute (views excluded), by name."""

    def __init__(self):
        super().__init__()
        self.ops = Counter()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if not func.is_view:
            self.ops[func.overloadpacket.__name__] += 1
        return func(*args, **(kwargs or {}))


def build(bin_dir, name, layers, hidden=16):
    from fairseq import options, tasks

    arch, extra, _ = SYSTEMS[name]  # built as benchmark_speed.py builds it
    args = options.parse_args_and_arch(options.get_training_parser(), [
        bin_dir, "--user-dir", USER_DIR, "--task", "translation", "--arch", arch, *extra,
        *size_flags(name, layers, hidden), "--criterion", "cross_entropy", "--cpu", "-s", "en", "-t", "de"])
    task = tasks.setup_task(args)
    torch.manual_seed(1)
    return task, task.build_model(args)


def training_ops(model, task, bsz, src_len, tgt_len):
    """Operations of one forward + backward over targets of ``tgt_len`` steps (loss: a sum)."""
    g = torch.Generator().manual_seed(0)
    n = len(task.source_dictionary)
    src = torch.randint(4, n, (bsz, src_len), generator=g)
    prev = torch.randint(4, n, (bsz, tgt_len), generator=g)
    model.train()
    model.zero_grad(set_to_none=True)
    with CountOps() as counter:
        out, _ = model(src, torch.full((bsz,), src_len), prev)
        out.float().sum().backward()
    return counter.ops


def beam_step_ops(model, task, bsz, src_len, beam=5):
    """Operations of one incremental forward_decoder call (step 3) of fairseq's beam search."""
    from fairseq.sequence_generator import EnsembleModel

    g = torch.Generator().manual_seed(0)
    n = len(task.source_dictionary)
    src = torch.randint(4, n, (bsz, src_len), generator=g)
    model.eval()
    ensemble = EnsembleModel([model])
    with torch.no_grad():
        enc = ensemble.forward_encoder({"src_tokens": src, "src_lengths": torch.full((bsz,), src_len)})
        order = torch.arange(bsz).view(-1, 1).repeat(1, beam).view(-1)  # bsz * beam
        enc = ensemble.reorder_encoder_out(enc, order)
        state = torch.jit.annotate(dict, {})
        states = [state]
        tokens = torch.full((bsz * beam, 1), task.target_dictionary.eos())
        for step in range(3):
            if step == 2:
                with CountOps() as counter:
                    ensemble.forward_decoder(tokens, enc, states)
                return counter.ops
            ensemble.forward_decoder(tokens, enc, states)
            ensemble.reorder_incremental_state(states, order)  # the search reorders every step
            tokens = torch.cat([tokens, torch.randint(4, n, (bsz * beam, 1), generator=g)], 1)


def dictionary_dir(path, words=50):
    from fairseq.data import Dictionary

    d = Dictionary()
    for i in range(words):
        d.add_symbol(f"w{i}")
    os.makedirs(path, exist_ok=True)
    for lang in ("en", "de"):
        d.save(os.path.join(path, f"dict.{lang}.txt"))
    return path


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], epilog=__doc__.split("\n\n", 1)[1],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--layers", type=int, default=4, help="encoder and decoder layers (RNNsearch: 1)")
    parser.add_argument("--systems", nargs="+", choices=MODELS, default=MODELS)
    parser.add_argument("--steps", type=int, default=6, help="T: the shorter target's length")
    parser.add_argument("--top", type=int, default=0, help="also the N most frequent operations of each")
    args = parser.parse_args(argv)
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        bin_dir = dictionary_dir(tmp)
        print(f"| system | layers | ops per training step (fwd + bwd) | ops per beam step | GEMMs per training "
              f"step | GEMMs per beam step |  (ATen operations that are not views; torch {torch.__version__})")
        print("|---|---|---|---|---|---|")
        for name in args.systems:
            task, model = build(bin_dir, name, args.layers)
            train = training_ops(model, task, 4, 7, args.steps + 1)
            train.subtract(training_ops(model, task, 4, 7, args.steps))
            beam = beam_step_ops(model, task, 2, 7)
            gemms = ("mm", "addmm", "bmm", "baddbmm", "matmul", "linear")
            layers = 1 if name in ONE_LAYER else args.layers
            print(f"| {name} | {layers} | {sum(train.values())} | {sum(beam.values())} | "
                  f"{sum(train[k] for k in gemms)} | {sum(beam[k] for k in gemms)} |", flush=True)
            if args.top:
                print("|  | most frequent | " + ", ".join(f"{k} {v}" for k, v in train.most_common(args.top))
                      + " | " + ", ".join(f"{k} {v}" for k, v in beam.most_common(args.top)) + " | | |")


if __name__ == "__main__":
    sys.exit(main())
