#!/usr/bin/env python3
"""Training and translation speed against fairseq's built-in ``lstm``, side by side.

On real data (Multi30k En-De, SentencePiece 8K joint vocabulary, shared embeddings,
``--max-tokens 4000``), in ONE run and alternating the systems, for each model size:

* training: target tokens/s over the same batches (label-smoothed cross entropy,
  forward + backward + Adam step), and the process's peak resident memory; fairseq
  ``lstm`` trains with fairseq's ``label_smoothed_cross_entropy``, our models with
  ``fused_label_smoothed_cross_entropy`` (same loss, output layer fused in), and
  ``luong_global_general+fairseq_loss`` shows our model with fairseq's criterion, to
  separate what the decoder gains from what the criterion gains;
* translation: sentences/s with fairseq's SequenceGenerator (beam 5, batch 64) on the
  test set, every hypothesis forced to the same length so that untrained models do
  equal work;

for fairseq ``lstm`` (the reference: Luong global-general attention with input
feeding), ``luong_global_general`` (same sizes), the same without input feeding and
``luong_localp``, ``rnnsearch`` (one bidirectional GRU layer; its ratio is to fairseq's
``lstm`` with one bidirectional encoder layer and one decoder layer, ``lstm_bi1``), and
upper bounds from ``speed_bounds.py`` (``bound_feed``: a training
step or beam step costing only the encoder, the output layer, the search and the GEMMs
the recurrence forces; ``bound_no_feed``: the same training without input feeding;
``bound_free_decoder``: beam search with a decoder that costs nothing): their ratio is
the most any implementation could reach here. Each measurement runs in a fresh process
(so peak memory is per system); the table shows medians of ``--repeats`` alternating
repetitions, each system's ratio to ``lstm``, and the achieved fraction of this machine's
matrix-multiply peak (measured here with a large float32 GEMM; model FLOPs counted
analytically per target token, training = 3 x forward).

Usage: python scripts/bench/benchmark_speed.py [--sizes 2x256 4x1000] [--repeats 3]
       [--before PATH]   # also each of our systems from the checkout at PATH, as NAME@before
This takes long (about 55 min with the options docs/speed.md gives); it is a benchmark, not a test.
"""
import argparse
import json
import os
import re
import resource
import statistics
import subprocess
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # scripts/bench/..
DEFAULT_DATA = os.path.join(os.path.dirname(REPO), "shared", "data", "multi30k_en_de")

FAIRSEQ_LOSS = "label_smoothed_cross_entropy"
FUSED_LOSS = "fused_label_smoothed_cross_entropy"
SYSTEMS = {
    # name: (arch, extra flags, training criterion); sizes are added per run
    "lstm": ("lstm", ["--decoder-attention", "1"], FAIRSEQ_LOSS),
    "luong_global_general": ("luong_global_general", [], FUSED_LOSS),
    # the same model trained with fairseq's criterion: what the model alone gains
    "luong_global_general+fairseq_loss": ("luong_global_general", [], FAIRSEQ_LOSS),
    "luong_global_general_no_feed": ("luong_global_general", ["--no-input-feed"], FUSED_LOSS),
    "luong_localp": ("luong_localp", [], FUSED_LOSS),
    # RNNsearch (one bidirectional GRU layer) against the nearest fairseq built-in: lstm with
    # a one-layer bidirectional encoder, one decoder layer, attention and input feeding
    "lstm_bi1": ("lstm", ["--decoder-attention", "1", "--encoder-bidirectional"], FAIRSEQ_LOSS),
    "rnnsearch": ("rnnsearch", [], FUSED_LOSS),
    # upper bounds (scripts/bench/speed_bounds.py): training = the encoder + only the GEMMs the
    # recurrence forces, with / without input feeding; translation = beam search with a
    # decoder that costs nothing
    "bound_feed": ("luong_global_general", [], None),
    "bound_no_feed": ("luong_global_general", ["--no-input-feed"], None),
    "bound_free_decoder": ("luong_global_general", [], None),  # translation only
}
# what a bound row's beam search keeps of the decoder: the forced GEMMs, or nothing
BOUNDS = {"bound_feed": "gemms", "bound_no_feed": "gemms", "bound_free_decoder": "free"}
TRAIN_ONLY = {"luong_global_general+fairseq_loss", "bound_no_feed"}  # same translation as another
GEN_ONLY = {"bound_free_decoder"}


ONE_LAYER = {"lstm_bi1", "rnnsearch"}  # systems that run with one layer whatever the size's
# each row's ratio is to fairseq's lstm of the same size, except RNNsearch's: to lstm_bi1
REFERENCE = {"rnnsearch": "lstm_bi1"}


def size_flags(name, layers, hidden):
    arch = SYSTEMS[name][0]
    layers = 1 if name in ONE_LAYER else layers
    flags = ["--encoder-embed-dim", str(hidden), "--encoder-hidden-size", str(hidden),
             "--decoder-embed-dim", str(hidden), "--decoder-hidden-size", str(hidden),
             "--share-all-embeddings", "--dropout", "0.2"]
    if arch == "rnnsearch":  # one bidirectional layer; W_o tied to the embeddings
        return flags + ["--attention-dim", str(hidden), "--maxout-dim", str(hidden)]
    flags += ["--encoder-layers", str(layers), "--decoder-layers", str(layers)]
    if arch == "lstm":
        flags += ["--decoder-out-embed-dim", str(hidden)]
    return flags


# ---------------------------------------------------------------- data


def prepare_data(data, work):
    """SentencePiece 8K joint model, encoded splits, fairseq-preprocess (cached)."""
    bin_dir = os.path.join(work, "bin")
    if os.path.exists(os.path.join(bin_dir, "train.en-de.de.bin")):
        return bin_dir
    import sentencepiece as spm

    os.makedirs(work, exist_ok=True)
    for split in ("train", "valid", "test"):
        for lang in ("en", "de"):
            path = os.path.join(data, f"{split}.{lang}")
            if not os.path.exists(path):
                raise SystemExit(f"error: {path}: not found (--data points at Multi30k En-De)")
    joint = os.path.join(work, "spm_train.txt")
    with open(joint, "w", encoding="utf-8") as out:
        for lang in ("en", "de"):
            with open(os.path.join(data, f"train.{lang}"), encoding="utf-8") as f:
                out.writelines(f)
    prefix = os.path.join(work, "spm8k")
    spm.SentencePieceTrainer.train(input=joint, model_prefix=prefix, vocab_size=8000,
                                   character_coverage=1.0, model_type="unigram", num_threads=2,
                                   minloglevel=2)
    sp = spm.SentencePieceProcessor(model_file=prefix + ".model")
    for split in ("train", "valid", "test"):
        for lang in ("en", "de"):
            with open(os.path.join(data, f"{split}.{lang}"), encoding="utf-8") as f, \
                    open(os.path.join(work, f"{split}.sp.{lang}"), "w", encoding="utf-8") as out:
                for line in f:
                    out.write(" ".join(sp.encode(line.strip(), out_type=str)) + "\n")
    subprocess.run([os.path.join(os.path.dirname(sys.executable), "fairseq-preprocess"),
                    "-s", "en", "-t", "de", "--joined-dictionary", "--workers", "2",
                    "--trainpref", os.path.join(work, "train.sp"),
                    "--validpref", os.path.join(work, "valid.sp"),
                    "--testpref", os.path.join(work, "test.sp"), "--destdir", bin_dir],
                   check=True, capture_output=True)
    return bin_dir


# ---------------------------------------------------------------- workers


PLUGIN_REPO = REPO  # the checkout whose fairseq_luong a worker loads (--before: another one)


def load(bin_dir, arch, flags, criterion=FAIRSEQ_LOSS):
    from fairseq import options, tasks

    argv = [bin_dir, "--user-dir", os.path.join(PLUGIN_REPO, "fairseq_luong"), "--task", "translation",
            "--arch", arch, *flags, "--max-tokens", "4000", "--criterion",
            criterion, "--label-smoothing", "0.1", "--seed", "1"]
    args = options.parse_args_and_arch(options.get_training_parser(), argv)
    task = tasks.setup_task(args)
    import torch

    torch.manual_seed(1)
    model = task.build_model(args)
    return args, task, model


def setup_training(bin_dir, arch, flags, criterion, n_batches):
    """The model, its criterion, an Adam optimizer and the first ``n_batches`` training
    batches (the same for every system); ``criterion`` None (a bound row): the fused one."""
    import torch

    args, task, model = load(bin_dir, arch, flags, criterion or FUSED_LOSS)
    criterion = task.build_criterion(args)
    task.load_dataset("train")
    itr = task.get_batch_iterator(task.dataset("train"), max_tokens=4000, seed=1,
                                  max_positions=(1024, 1024), ignore_invalid_inputs=True)
    batches = itr.next_epoch_itr(shuffle=True)
    samples = [next(batches) for _ in range(n_batches)]
    model.train()
    return model, criterion, torch.optim.Adam(model.parameters(), lr=1e-3), samples


def train_step(model, criterion, opt, sample):
    loss, _, _ = criterion(model, sample)
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()


def worker_train(bin_dir, arch, flags, criterion, updates, warmup, bound=False):
    model, criterion, opt, samples = setup_training(bin_dir, arch, flags, criterion,
                                                    warmup + updates)
    if bound:
        from speed_bounds import train_gemm_bound

        return {"tokens_per_s": train_gemm_bound(model, samples[warmup:], model.decoder.input_feed),
                "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}
    tokens, elapsed = 0, 0.0
    for i, sample in enumerate(samples):
        t0 = time.perf_counter()
        train_step(model, criterion, opt, sample)
        if i >= warmup:
            elapsed += time.perf_counter() - t0
            tokens += sample["ntokens"]
    return {"tokens_per_s": tokens / elapsed,
            "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}


def worker_generate(bin_dir, arch, flags, sentences, out_len, bound=False):
    import torch
    from fairseq.sequence_generator import SequenceGenerator

    args, task, model = load(bin_dir, arch, flags)
    if bound:
        from speed_bounds import generate_search_bound

        model = generate_search_bound(model, decoder_gemms=bound == "gemms")
    model.eval()
    model.make_generation_fast_(need_attn=False)  # as fairseq-generate without --print-alignment
    task.load_dataset("test")
    itr = task.get_batch_iterator(task.dataset("test"), max_sentences=64, max_positions=(1024, 1024),
                                  ignore_invalid_inputs=True, required_batch_size_multiple=1)
    gen = SequenceGenerator([model], task.target_dictionary, beam_size=5,
                            max_len_a=0, max_len_b=out_len, min_len=out_len)
    done, elapsed = 0, 0.0
    with torch.no_grad():
        for i, sample in enumerate(itr.next_epoch_itr(shuffle=False)):
            if done >= sentences:
                break
            t0 = time.perf_counter()
            gen.forward(sample)
            if i > 0:  # the first batch warms up
                elapsed += time.perf_counter() - t0
                done += sample["nsentences"]
    return {"sentences_per_s": done / elapsed,
            "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}


# ---------------------------------------------------------------- FLOPs


def flops_per_target_token(arch_name, layers, hidden, vocab, src_per_tgt, src_len):
    """Forward FLOPs per target token (multiply-add = 2), encoder amortised per target token;
    None for systems without a FLOP count here (the one-layer bidirectional pair)."""
    if arch_name in ONE_LAYER:
        return None
    H, E = hidden, hidden
    enc = src_per_tgt * layers * 2 * 4 * H * (E + H)
    feed = 0 if arch_name.endswith("no_feed") else H
    dec = 2 * 4 * H * (E + feed + H) + (layers - 1) * 2 * 4 * H * (2 * H)
    window = 21 if arch_name == "luong_localp" else src_len
    attn = 2 * 2 * window * H + 2 * H * 2 * H  # scores + context + W_c[c; h]
    attn += src_per_tgt * 2 * H * H  # W_a h̄_s once per source token (general)
    if arch_name == "luong_localp":
        attn += 2 * H * H + 2 * H
    out = 2 * H * vocab
    return enc + dec + attn + out


def gemm_peak(threads):
    import torch

    torch.set_num_threads(threads)
    a, b = torch.randn(4096, 4096), torch.randn(4096, 4096)
    a @ b
    times = []
    for _ in range(8):
        t0 = time.perf_counter()
        a @ b
        times.append(time.perf_counter() - t0)
    return 2 * 4096**3 / min(times) / 1e9  # a peak: the best of 8


def data_stats(bin_dir):
    from fairseq.data import Dictionary, data_utils

    d = Dictionary.load(os.path.join(bin_dir, "dict.en.txt"))
    src = data_utils.load_indexed_dataset(os.path.join(bin_dir, "train.en-de.en"), d)
    tgt = data_utils.load_indexed_dataset(os.path.join(bin_dir, "train.en-de.de"), d)
    s, t = float(src.sizes.sum()), float(tgt.sizes.sum())
    return len(d), s / t, s / len(src.sizes)


# ---------------------------------------------------------------- driver


def base_name(name):
    """The SYSTEMS entry of a row: ``NAME@before`` is NAME from the --before checkout."""
    return name.split("@")[0]


def has_arch(checkout, arch):
    """Whether the fairseq_luong of ``checkout`` registers ``arch``: fairseq's own archs (``lstm``)
    and archs added since that checkout run once, not also as NAME@before."""
    # @register_model_architecture("model", "ARCH"), or @register_model("ARCH", ...) (a model's name
    # is also an arch of its defaults)
    pattern = re.compile(r'register_model_architecture\(\s*"[^"]+",\s*"{0}"\s*\)|register_model\(\s*"{0}"'
                         .format(re.escape(arch)))
    models = os.path.join(checkout, "fairseq_luong", "models")
    for name in sorted(os.listdir(models)):
        if name.endswith(".py"):
            with open(os.path.join(models, name), encoding="utf-8") as f:
                if pattern.search(f.read()):
                    return True
    return False


def run_worker(kind, bin_dir, name, layers, hidden, opts):
    arch, extra, criterion = SYSTEMS[base_name(name)]
    opts = dict(opts)
    before = opts.pop("before", None)
    spec = {"kind": kind, "bin": bin_dir, "arch": arch, "criterion": criterion,
            "bound": BOUNDS.get(name, False), "repo": before if "@" in name else REPO,
            "flags": extra + size_flags(base_name(name), layers, hidden), **opts}
    proc = subprocess.run([sys.executable, os.path.abspath(__file__), "--worker", json.dumps(spec)],
                          capture_output=True, text=True,
                          env=dict(os.environ, PYTHONWARNINGS="ignore"))
    if proc.returncode != 0:
        raise SystemExit(f"error: worker {kind} {name} {layers}x{hidden} failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", default=DEFAULT_DATA, help="Multi30k En-De raw text folder")
    parser.add_argument("--work", default=os.path.join(REPO, "work_dir", "bench_speed"))
    parser.add_argument("--sizes", nargs="+", default=["2x256", "4x1000"], help="LAYERSxHIDDEN")
    parser.add_argument("--systems", nargs="+", default=list(SYSTEMS), choices=list(SYSTEMS))
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--updates", type=int, nargs="+", default=[12, 4],
                        help="timed training updates per size (after 2 warm-up updates)")
    parser.add_argument("--gen-sentences", type=int, nargs="+", default=[384, 128],
                        help="test sentences translated per size")
    parser.add_argument("--out-len", type=int, default=20, help="forced hypothesis length")
    parser.add_argument("--threads", type=int, default=os.cpu_count())
    parser.add_argument("--skip-train", action="store_true", help="translation columns only")
    parser.add_argument("--before", metavar="PATH",
                        help="also run each of our (non-bound) systems from the fairseq_luong checkout "
                        "at PATH (e.g. a git worktree of the commit before a change) as NAME@before, "
                        "alternated with the others in the same run")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)

    if args.worker:
        import torch

        spec = json.loads(args.worker)
        global PLUGIN_REPO
        PLUGIN_REPO = spec["repo"]
        torch.set_num_threads(spec["threads"])
        if spec["kind"] == "train":
            res = worker_train(spec["bin"], spec["arch"], spec["flags"], spec["criterion"],
                               spec["updates"], 2, bound=spec["bound"])
        else:
            res = worker_generate(spec["bin"], spec["arch"], spec["flags"], spec["sentences"],
                                  spec["out_len"], bound=spec["bound"])
        print(json.dumps(res))
        return

    if args.before:
        if not os.path.isdir(os.path.join(args.before, "fairseq_luong")):
            raise SystemExit(f"error: --before {args.before}: no fairseq_luong/ there")
        args.systems = [x for n in args.systems
                        for x in ([n, n + "@before"] if n not in BOUNDS
                                  and has_arch(args.before, SYSTEMS[n][0]) else [n])]
    bin_dir = prepare_data(args.data, args.work)
    vocab, src_per_tgt, src_len = data_stats(bin_dir)
    peak = gemm_peak(args.threads)
    print(f"# GEMM peak at start {peak:.0f} GFLOP/s (4096^3 float32, {args.threads} threads, best "
          f"of 8, measured again after each size: % GEMM peak uses the best); vocab {vocab}; "
          f"{src_per_tgt:.2f} source tokens per target token; medians of {args.repeats} "
          f"alternating repetitions", flush=True)
    print("| size | system | loss | train tok/s | ratio | ratio range | train peak MB | "
          "% GEMM peak | beam-5 sent/s | ratio | ratio range | gen peak MB |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for k, size in enumerate(args.sizes):
        layers, hidden = (int(x) for x in size.split("x"))
        updates = args.updates[min(k, len(args.updates) - 1)]
        sentences = args.gen_sentences[min(k, len(args.gen_sentences) - 1)]
        train = {n: [] for n in args.systems}
        gen = {n: [] for n in args.systems}
        for _ in range(args.repeats):
            for name in args.systems:  # alternate the systems
                if not args.skip_train and base_name(name) not in GEN_ONLY:
                    train[name].append(run_worker("train", bin_dir, name, layers, hidden,
                                                  {"updates": updates, "threads": args.threads,
                                                   "before": args.before}))
                if base_name(name) not in TRAIN_ONLY:
                    gen[name].append(run_worker("generate", bin_dir, name, layers, hidden,
                                                {"sentences": sentences, "out_len": args.out_len,
                                                 "threads": args.threads, "before": args.before}))

        peak = max(peak, gemm_peak(args.threads))  # again after the size: the best seen

        def med(runs, key):
            return statistics.median(r[key] for r in runs)

        def spread(runs, key, base):
            """min-max over repetitions of each repetition's ratio to lstm's same repetition"""
            ratios = [r[key] / b[key] for r, b in zip(runs, base)]
            return f"{min(ratios):.2f}-{max(ratios):.2f}"

        for name in args.systems:
            ref = REFERENCE.get(base_name(name), "lstm")
            if train[name]:
                tps = med(train[name], "tokens_per_s")
                flops = flops_per_target_token(base_name(name), layers, hidden, vocab, src_per_tgt, src_len)
                ref = REFERENCE.get(base_name(name), "lstm")
                training = (f"{tps:.0f} | {tps / med(train[ref], 'tokens_per_s'):.2f} | "
                            f"{spread(train[name], 'tokens_per_s', train[ref])} | "
                            f"{med(train[name], 'peak_mb'):.0f} | "
                            + (f"{100 * tps * 3 * flops / 1e9 / peak:.0f}%" if flops else "-"))
            else:
                training = "- | | | | "
            if gen[name]:
                sps = med(gen[name], "sentences_per_s")
                generation = (f"{sps:.1f} | {sps / med(gen[ref], 'sentences_per_s'):.2f} | "
                              f"{spread(gen[name], 'sentences_per_s', gen[ref])} | "
                              f"{med(gen[name], 'peak_mb'):.0f}")
            else:
                generation = "(same model) | | | "
            loss = ("(bound)" if name in BOUNDS
                    else {FUSED_LOSS: "fused", FAIRSEQ_LOSS: "fairseq"}[SYSTEMS[base_name(name)][2]])
            print(f"| {size} | {name} | {loss} | {training} | {generation} |", flush=True)
    print(f"# GEMM peak, best seen: {peak:.0f} GFLOP/s")


if __name__ == "__main__":
    main()
