#!/usr/bin/env python3
"""Does ``torch.compile`` speed up the decoder's per-step work on CPU? (issue 5)

Times the part of a training step that input feeding keeps inside the step loop, the
stacked LSTM layers (``fairseq_luong.modules.luong_decoder.lstm_layer_step``: one gate GEMM
on [input; h] and the LSTM cell per layer and step), forward
+ backward over T steps, three ways, alternating, medians of --repeats:

* eager: what the decoder runs (``lstm_layer_step`` with fused training weights: layer 0's
  hoisted embedding gates, rows x 4H, and above it the layer's bias, 4H). On CUDA, in one
  precision, that is PyTorch's fused LSTM cell kernel (``aten::_thnn_fused_lstm_cell``, what
  ``nn.LSTMCell`` and fairseq's ``lstm`` run there; the plugin's since b38fd11), the bias added
  by a GEMM on the layer's input and h multiplied by the weight's other half;
* cell not fused: ``eager_layer_step``, the cell in nine elementwise kernels after one GEMM on
  [input; h], what the decoder runs on the CPU (there it is eager's row, so CUDA only);
* fused cell, one GEMM: the fused kernel with one GEMM on [input; h] as its hidden gates and,
  above layer 0, the bias broadcast over the rows (a stride-0 view) as its input gates: one
  GEMM a layer and step fewer than eager, one cat more (CUDA only);
* compile cell: ``torch.compile`` of ``lstm_cell_update`` alone (it fuses the
  elementwise gate arithmetic into one kernel);
* compile layer step: ``torch.compile`` of ``lstm_layer_step`` (GEMM + cell; under compile the
  plugin leaves the fused kernel out: torch.compile has no meta function for it without biases);
* compile layer step, reduce-overhead: the same with ``mode="reduce-overhead"``, which on
  CUDA replays each step as a CUDA graph (one launch instead of one per kernel: issue 38's
  "CUDA graphs"; on the CPU it compiles as the row above);
* deferred weight gradient: the cell not fused, but the backward computes each layer's gate-weight
  gradient in one GEMM over all steps (cat(inputs)^T @ cat(gate gradients)) instead of one
  per step (issue 38's "recurrent weight gradient once per layer"): T - 1 fewer launches a
  layer on a GPU. On this CPU at 2 x 256 it was 0.93x eager (one prototype run), so the plugin
  does not do it unless a GPU shows it pays.

``--dtype bf16``
runs the weights and activations in bfloat16, as ``fairseq-train --bf16`` does. Compilation
time is excluded (two warm-up runs), so this is the best case for compile; a variant that
fails to compile or run, or computes other numbers than eager, is reported in its row, not
timed (one variant's failure does not cost the others' rows on a GPU lent for minutes).
Usage: python scripts/bench/benchmark_compile.py [--layers 4 --hidden 1000 --rows 250 --steps 16]
       [--device cpu|cuda] [--dtype float32|bf16]
"""
import argparse
import os
import statistics

import torch
from bench_device import DTYPES, DeviceClock

from fairseq_luong.modules.luong_decoder import eager_layer_step, fused_lstm_cell, lstm_cell_update, lstm_layer_step

# A variant's loss and gradients against eager's in float32 on the same inputs, each tensor as
# ||variant - eager32|| / ||eager32||: at most LIMIT_FLOOR, or OWN_ROUNDING times eager's own
# difference in --dtype (bfloat16's 8-bit mantissa; an elementwise test fails any two kernel orders
# there: on an H200 at 4 x 1000 every bf16 variant "differed" by up to 128 in some element)
LIMIT_FLOOR = {"float32": 1e-4, "bf16": 1e-2}
OWN_ROUNDING = 4


def relative_difference(got, want):
    """The worst tensor's ||got - want|| / ||want|| (want in float32)."""
    return max(((x.float() - y).norm() / y.norm().clamp_min(1e-30)).item() for x, y in zip(got, want))


class _GateProduct(torch.autograd.Function):
    """gates + inp @ W whose backward leaves W's gradient to the layer's first step: its backward
    runs last (every later step's output depends on it), and computes the whole sum at once."""

    @staticmethod
    def forward(ctx, gates, inp, weight, bucket, first):
        ctx.save_for_backward(inp, weight)
        ctx.bucket, ctx.first, ctx.gates_shape = bucket, first, gates.shape
        return torch.addmm(gates, inp, weight)  # rows x 4H

    @staticmethod
    def backward(ctx, grad):
        inp, weight = ctx.saved_tensors
        ctx.bucket.append((inp, grad))
        grad_weight = None
        if ctx.first:  # (in + H) x sum(rows) @ sum(rows) x 4H: one GEMM for every step of the layer
            grad_weight = torch.cat([i for i, _ in ctx.bucket]).t().mm(torch.cat([g for _, g in ctx.bucket]))
            ctx.bucket.clear()
        grad_gates = grad if grad.shape == ctx.gates_shape else grad.sum(0)  # a broadcast bias: 4H
        return grad_gates, grad.mm(weight.t()), grad_weight, None, None


class DeferredWeightGradient:
    """``lstm_layer_step``'s signature and numbers, the weight gradient deferred (_GateProduct);
    ``start()`` before each forward pass."""

    def start(self):
        self.buckets = {}

    def __call__(self, gates, below, h, c, weights):
        first = id(weights[0]) not in self.buckets  # the layer's first step of this pass
        bucket = self.buckets.setdefault(id(weights[0]), [])
        return lstm_cell_update(_GateProduct.apply(gates, torch.cat((below, h), 1), weights[0], bucket, first), c)


def layer_step_fused_one_gemm(gates, below, h, c, weights):
    """``lstm_layer_step``'s numbers in PyTorch's fused kernel (CUDA only) with one GEMM: the
    hidden gates are [below; h] @ W (rows x 4H); the input gates are layer 0's hoisted gates, or a
    layer's bias (4H) as a rows x 4H view of stride 0 (the kernel indexes by strides)."""
    hidden_gates = torch.cat((below, h), 1).mm(weights[0])  # rows x 4H
    return fused_lstm_cell(gates.expand_as(hidden_gates), hidden_gates, c)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--hidden", type=int, default=1000)
    parser.add_argument("--rows", type=int, default=250, help="sentences in the batch")
    parser.add_argument("--steps", type=int, default=16, help="target steps")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--threads", type=int, default=os.cpu_count())
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    parser.add_argument("--dtype", choices=["float32", "bf16"], default="float32")
    args = parser.parse_args(argv)
    if args.device == "cuda" and not torch.cuda.is_available():
        parser.error(f"--device cuda: no CUDA device here (torch {torch.__version__})")
    torch.set_num_threads(args.threads)
    L, H, R, T = args.layers, args.hidden, args.rows, args.steps
    clock = DeviceClock(args.device)
    on = dict(device=args.device, dtype=DTYPES[args.dtype])

    torch.manual_seed(0)
    W = [((torch.randn(2 * H, 4 * H) * 0.01).to(**on).requires_grad_(),) for _ in range(L)]  # fused
    b = [torch.zeros(4 * H, **on, requires_grad=True) for _ in range(L)]
    xg = torch.randn(T, R, 4 * H).to(**on)  # layer 0's hoisted embedding gates: T x R x 4H
    # the same numbers in float32: the reference
    W32 = [(w.detach().float().requires_grad_(),) for (w,) in W]
    b32 = [x.detach().float().requires_grad_() for x in b]
    xg32 = xg.float()
    cell_c = torch.compile(lstm_cell_update, dynamic=False)

    def layer_step_cell_compiled(gates, below, h, c, weights):
        gates = torch.addmm(gates, torch.cat((below, h), 1), weights[0])  # as lstm_layer_step
        return cell_c(gates, c)

    variants = {"eager": lstm_layer_step, "cell not fused": eager_layer_step,
                "fused cell, one GEMM": layer_step_fused_one_gemm, "compile cell": layer_step_cell_compiled,
                "compile layer step": torch.compile(lstm_layer_step, dynamic=False),
                "compile layer step, reduce-overhead": torch.compile(lstm_layer_step, dynamic=False,
                                                                     mode="reduce-overhead"),
                "deferred weight gradient": DeferredWeightGradient()}

    def run(fn, W=W, b=b, xg=xg):
        """Forward and backward of T steps through L layers; the loss."""
        if hasattr(fn, "start"):
            fn.start()
        on = dict(device=xg.device, dtype=xg.dtype)
        hs = [torch.zeros(R, H, **on) for _ in range(L)]
        cs = [torch.zeros(R, H, **on) for _ in range(L)]
        feed = torch.zeros(R, H, **on)  # the input-fed h~_{t-1}
        loss = 0
        for t in range(T):
            below = feed
            for i in range(L):
                gates = xg[t] if i == 0 else b[i]  # rows x 4H, or 4H: as the decoder calls it
                hs[i], cs[i] = fn(gates, below, hs[i], cs[i], W[i])
                below = hs[i]
            feed = torch.tanh(hs[-1])  # stands in for attention + W_c
            loss = loss + feed.sum()
        loss.backward()
        return loss

    def loss_and_gradients(fn, W=W, b=b, xg=xg):
        params = [w for (w,) in W] + b[1:]  # layer 0's bias is in its hoisted gates
        for p in params:
            p.grad = None
        return [run(fn, W, b, xg).detach()] + [p.grad.clone() for p in params]

    failed = {}
    if args.device != "cuda":
        failed["cell not fused"] = "on the CPU this is eager (the fused kernel is CUDA only)"
        failed["fused cell, one GEMM"] = "needs --device cuda (PyTorch has the fused LSTM cell kernel for CUDA only)"
    for k, fn in variants.items():
        if k in failed:
            continue
        try:
            run(fn)
            run(fn)  # compile, warm up
        except Exception as e:  # a variant torch cannot compile or run here: its row says why
            if k == "eager":
                raise
            failed[k] = f"{type(e).__name__}: {str(e).splitlines()[0][:160] if str(e) else ''}"
    # a speed-up counts only for the same numbers: each variant's loss and gradients against eager's
    # in float32, within a few times eager's own rounding in --dtype
    want = loss_and_gradients(variants["eager"], W32, b32, xg32)
    own = relative_difference(loss_and_gradients(variants["eager"]), want)  # 0 in float32
    limit = max(LIMIT_FLOOR[args.dtype], OWN_ROUNDING * own)
    worst = 0.0
    for k, fn in variants.items():
        if k in failed or k == "eager":  # eager is the reference
            continue
        diff = relative_difference(loss_and_gradients(fn), want)
        if not diff <= limit:  # NaN too
            failed[k] = (f"computes other numbers than eager (relative difference {diff:.3g} from eager in float32, "
                         f"limit {limit:.3g}), not timed")
            continue
        worst = max(worst, diff)
    timed = {k: fn for k, fn in variants.items() if k not in failed}
    times = {k: [] for k in timed}
    for _ in range(args.repeats):
        for k, fn in timed.items():  # alternate
            t0 = clock.now()
            run(fn)
            times[k].append(clock.now() - t0)
    base = statistics.median(times["eager"])
    print(f"# {L} x {H}, {R} rows, {T} steps, forward + backward, {args.dtype}, {clock.name(args.threads)}, "
          f"torch {torch.__version__}, medians of {args.repeats} alternating repetitions")
    print(f"# every variant timed computes eager's loss and gradients: relative difference from eager in float32 "
          f"at most {worst:.3g} (eager in {args.dtype}: {own:.3g}; limit {limit:.3g})")
    print("| variant | seconds | speed vs eager |\n|---|---|---|")
    for k in variants:
        if k in failed:
            print(f"| {k} | failed: {failed[k]} | - |")
            continue
        m = statistics.median(times[k])
        print(f"| {k} | {m:.3f} | {base / m:.2f}x |")


if __name__ == "__main__":
    main()
