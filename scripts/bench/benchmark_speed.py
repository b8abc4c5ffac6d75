#!/usr/bin/env python3
"""Training and translation speed against fairseq's built-in ``lstm``, side by side.

In ONE run and alternating the systems, for each model size and precision:

* training: target tokens/s over the same batches, each update fairseq's own
  ``Trainer.train_step`` as ``fairseq-train`` runs it (label-smoothed cross entropy,
  forward + backward + Adam step; ``--fp16``/``--bf16`` with fairseq's master weights and
  loss scaling), and peak memory; fairseq ``lstm`` trains with fairseq's
  ``label_smoothed_cross_entropy``, our models with ``fused_label_smoothed_cross_entropy``
  (same loss, output layer fused in), and ``luong_global_general+fairseq_loss`` shows our
  model with fairseq's criterion, to separate what the decoder gains from what the
  criterion gains;
* translation: sentences/s with fairseq's SequenceGenerator (beam 5) on the test set,
  every hypothesis forced to the same length so that untrained models do equal work,
  the models halved (``--fp16``) or in bfloat16 (``--bf16``) as fairseq-generate has them;

for fairseq ``lstm`` (the reference: Luong global-general attention with input
feeding), ``luong_global_general`` (same sizes), the same without input feeding and
``luong_localp``, ``rnnsearch`` (one bidirectional GRU layer; its ratio is to fairseq's
``lstm`` with one bidirectional encoder layer and one decoder layer, ``lstm_bi1``). Each
measurement runs in a fresh process (so peak memory is per system); the table shows medians
of ``--repeats`` alternating repetitions, each system's ratio to ``lstm`` of the same size
and precision, and the achieved fraction of the device's matrix-multiply peak in that
precision (a large GEMM measured here; model FLOPs counted analytically per target token,
training = 3 x forward).

Data (``--shape``):
  multi30k  Multi30k En-De (``--data``), SentencePiece 8K joint vocabulary, shared
            embeddings, ``--max-tokens 4000``; beam search in batches of 64
  paper     Luong et al.'s shape, synthetic (written here, nothing to download): a 50K
            joint vocabulary (``--vocab``), batches of 128 sentences of 25-35 words,
            beam search in batches of 128, hypotheses of 30 tokens; sizes default to 4x1000
  numbers   the synthetic number corpus of ``bash run.sh`` (scripts/data/make_number_corpus.py,
            written here: 30,000 training pairs, 2,000 test pairs, a joint vocabulary of 96
            symbols), run.sh's batches
            (``--max-tokens 3000``; beam search in batches of 64), hypotheses of 20 tokens; sizes
            default to 4x16, where each operation's fixed cost rules over its arithmetic (the
            regime of a GPU's kernel launches)

End to end (``--cli``): each measurement is fairseq's own command in the worker's process,
as a user runs it: ``fairseq-train`` for ``--updates`` updates after as many untimed (its
logged words/s over the timed ones: data loading, logging and everything else of the loop
included), then ``fairseq-generate`` (beam 5) of the whole test set with the checkpoint it
saved (its logged sentences/s), hypotheses forced to the same length as above. Our systems
run with ``--user-dir fairseq_luong``, fairseq's ``lstm`` without.

Devices (``--device``): ``cpu`` (the default) or ``cuda`` (device 0). On CUDA the clock is
read after ``torch.cuda.synchronize()``, peak memory is ``torch.cuda.max_memory_allocated``
and the GPU is named in the table. ``--busy`` (on by default on CUDA) adds the share of
wall time the device is busy, from a ``torch.profiler`` trace of ``--busy-steps`` extra
updates and one extra beam batch: on CUDA the time kernels run, on the CPU the time
inside torch operators (``bench_device.py``).

Usage: python scripts/bench/benchmark_speed.py [--sizes 2x256 4x1000] [--repeats 3]
       [--device cuda] [--precisions float32 fp16 bf16] [--shape paper|numbers] [--busy] [--cli]
       [--before PATH]   # also each of our systems from the checkout at PATH, as NAME@before
This takes long (13 min on the project's 2 CPU cores for docs/speed.md's first command,
55 min with every system and the upper bounds it had until 9944ee3); it is a benchmark,
not a test.
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys

from bench_device import PRECISIONS, DeviceClock, busy_fraction, commit, dtype, gemm_peak, gemm_size

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
}
TRAIN_ONLY = {"luong_global_general+fairseq_loss"}  # same translation as another


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


# the batches of each --shape: fairseq's --max-tokens / --batch-size in training, the beam
# search's batch of sentences and its forced hypothesis length, the sizes run by default
SHAPES = {
    "multi30k": {"max_tokens": 4000, "max_sentences": None, "gen_batch": 64, "out_len": 20,
                 "sizes": ["2x256", "4x1000"]},
    "paper": {"max_tokens": None, "max_sentences": 128, "gen_batch": 128, "out_len": 30,
              "sizes": ["4x1000"]},
    "numbers": {"max_tokens": 3000, "max_sentences": None, "gen_batch": 64, "out_len": 20,
                "sizes": ["4x16"]},
}
PAPER_LENGTHS = (25, 35)  # words per source sentence (uniform), EOS not counted
BUSY_MEANS = {"cuda": "the GPU runs kernels", "cpu": "the CPU is inside torch operators"}
WARMUP = 2  # untimed updates (and one untimed beam batch) before the clock starts


def beam_batches(sentences, batch):
    """Batches a beam worker translates: one of warm-up, then enough for ``sentences``."""
    return 1 + -(-sentences // batch)


def train_batches(updates, busy_steps):
    """Batches a training worker takes: warm-up, timed and profiled updates."""
    return WARMUP + updates + busy_steps


def parse_size(size):
    """"2x256" -> (2, 256); None when SIZE is not LAYERSxHIDDEN."""
    m = re.fullmatch(r"([1-9]\d*)x([1-9]\d*)", size)
    return (int(m.group(1)), int(m.group(2))) if m else None


def shape_flags(shape):
    """fairseq's batch options of a --shape (the workers parse them)."""
    spec = SHAPES[shape]
    return (["--max-tokens", str(spec["max_tokens"])] if spec["max_tokens"] else []) + \
        (["--batch-size", str(spec["max_sentences"])] if spec["max_sentences"] else [])


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
                                   minloglevel=2, hard_vocab_limit=False)  # a small --data holds fewer pieces
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


def make_numbers(work):
    """run.sh's synthetic number corpus (30,000 training pairs, seed 1; a test set of 2,000, four
    times run.sh's, so that the end-to-end beam rate is not a few batches'), binarized with one
    joint dictionary as run.sh does (cached)."""
    bin_dir = os.path.join(work, "numbers", "bin")
    if os.path.exists(os.path.join(bin_dir, "test.en-de.de.bin")):
        return bin_dir
    raw = os.path.join(work, "numbers", "raw")
    subprocess.run([sys.executable, os.path.join(REPO, "scripts", "data", "make_number_corpus.py"), "--out", raw,
                    "--test", "2000"], check=True, capture_output=True)
    subprocess.run([os.path.join(os.path.dirname(sys.executable), "fairseq-preprocess"), "-s", "en", "-t", "de",
                    "--joined-dictionary", "--workers", "2", "--destdir", bin_dir,
                    *[arg for split in ("train", "valid", "test")
                      for arg in (f"--{split}pref", os.path.join(raw, split))]],
                   check=True, capture_output=True)
    return bin_dir


def make_paper_shape(work, vocab, n_train, n_test, seed=1):
    """Luong et al.'s shape, synthetic: a joint dictionary of ``vocab`` symbols (fairseq's
    four specials among them), source sentences of 25-35 words drawn from a Zipf
    distribution over the words, each target 0-3 words shorter or longer; fairseq's binary
    format, cached by its parameters."""
    bin_dir = os.path.join(work, f"paper_v{vocab}_train{n_train}_test{n_test}_seed{seed}")
    done = os.path.join(bin_dir, "done")
    if os.path.exists(done):
        return bin_dir
    import numpy as np
    import torch
    from fairseq.data import Dictionary, indexed_dataset

    d = Dictionary()
    for i in range(vocab - len(d)):
        d.add_symbol(f"w{i}", n=vocab - i)  # decreasing counts: the Zipf rank order
    os.makedirs(bin_dir, exist_ok=True)
    for lang in ("en", "de"):
        d.save(os.path.join(bin_dir, f"dict.{lang}.txt"))
    rng = np.random.default_rng(seed)
    words = np.arange(d.nspecial, len(d))
    p = 1.0 / np.arange(1, len(words) + 1)  # Zipf: frequency ~ 1 / rank
    p /= p.sum()
    for split, n in (("train", n_train), ("test", n_test)):
        src_len = rng.integers(PAPER_LENGTHS[0], PAPER_LENGTHS[1] + 1, n)  # n
        tgt_len = src_len + rng.integers(-3, 4, n)  # n
        for lang, lengths in (("en", src_len), ("de", tgt_len)):
            prefix = os.path.join(bin_dir, f"{split}.en-de.{lang}")
            builder = indexed_dataset.make_builder(prefix + ".bin", "mmap", vocab_size=len(d))
            tokens = rng.choice(words, int(lengths.sum()), p=p)  # every sentence's words, concatenated
            start = 0
            for length in lengths:
                sentence = list(tokens[start:start + length]) + [d.eos()]  # length + 1 (EOS)
                builder.add_item(torch.tensor(sentence, dtype=torch.int64))
                start += length
            builder.finalize(prefix + ".idx")
    with open(done, "w", encoding="utf-8") as f:
        f.write(f"{vocab} {n_train} {n_test} {seed}\n")
    return bin_dir


# ---------------------------------------------------------------- workers


PLUGIN_REPO = REPO  # the checkout whose fairseq_luong a worker loads (--before: another one)
PRECISION_FLAGS = {"float32": [], "fp16": ["--fp16"], "bf16": ["--bf16"]}


def load(spec, criterion=FAIRSEQ_LOSS):
    """fairseq's config, task and model of a worker's system, built as fairseq-train builds them."""
    from fairseq import options, tasks
    from fairseq.dataclass.utils import convert_namespace_to_omegaconf

    argv = [spec["bin"], "--user-dir", os.path.join(PLUGIN_REPO, "fairseq_luong"), "--task", "translation",
            "--arch", spec["arch"], *spec["flags"], *shape_flags(spec["shape"]), "--criterion", criterion,
            "--label-smoothing", "0.1", "--seed", "1", "--optimizer", "adam", "--lr", "0.001",
            "--distributed-world-size", "1", "--num-workers", "0", *PRECISION_FLAGS[spec["precision"]],
            *(["--cpu"] if spec["device"] == "cpu" else [])]
    cfg = convert_namespace_to_omegaconf(options.parse_args_and_arch(options.get_training_parser(), argv))
    try:  # what fairseq-train's call_main does with the plugin: --bf16 / --fp16 made runnable
        from fairseq_fixes.precision import fix_precision_flags
    except ImportError:  # a --before checkout older than that patch
        pass
    else:
        fix_precision_flags(cfg)
    import torch

    task = tasks.setup_task(cfg.task)
    torch.manual_seed(1)
    return cfg, task, task.build_model(cfg.model)


def batches(task, spec, split, n, max_sentences=None, multiple=8, shuffle=True):
    """The first ``n`` batches of ``split`` (the same for every system)."""
    shape = SHAPES[spec["shape"]]
    task.load_dataset(split)
    itr = task.get_batch_iterator(task.dataset(split), max_tokens=shape["max_tokens"],
                                  max_sentences=max_sentences or shape["max_sentences"], seed=1,
                                  max_positions=(1024, 1024), ignore_invalid_inputs=True,
                                  required_batch_size_multiple=multiple)
    out = []
    for sample in itr.next_epoch_itr(shuffle=shuffle):
        if len(out) == n:
            break
        out.append(sample)
    return out


def warm_trainer(cfg, task, model, criterion, warmup):
    """fairseq's Trainer of a worker's system (it moves and converts the model as fairseq-train
    does), at epoch 1, after a train_step on each of the ``warmup`` batches (untimed)."""
    from fairseq.trainer import Trainer

    trainer = Trainer(cfg, task, model, criterion)
    trainer.begin_epoch(1)
    for sample in warmup:
        trainer.train_step([sample])
    return trainer


def worker_train(spec):
    """Target tokens/s of fairseq's Trainer.train_step over ``updates`` batches after WARMUP."""
    clock = DeviceClock(spec["device"])
    cfg, task, model = load(spec, spec["criterion"])
    criterion = task.build_criterion(cfg.criterion)
    n, n_busy = spec["updates"], spec["busy_steps"]
    samples = batches(task, spec, "train", train_batches(n, n_busy))
    timed, profiled = samples[WARMUP:WARMUP + n], samples[WARMUP + n:]
    trainer = warm_trainer(cfg, task, model, criterion, samples[:WARMUP])
    t0 = clock.now()
    for sample in timed:
        trainer.train_step([sample])
    elapsed = clock.now() - t0
    result = {"tokens_per_s": sum(s["ntokens"] for s in timed) / elapsed, "peak_mb": clock.peak_mb()}
    if n_busy:
        result["busy"] = busy_fraction(clock, lambda: [trainer.train_step([s]) for s in profiled])
    return result


def worker_generate(spec):
    """Beam-5 sentences/s of fairseq's SequenceGenerator over about ``sentences`` test sentences,
    after one batch of warm-up (profiled again for --busy)."""
    import torch
    from fairseq import utils
    from fairseq.sequence_generator import SequenceGenerator

    clock = DeviceClock(spec["device"])
    _, task, model = load(spec)
    if spec["precision"] != "float32":  # fairseq-generate halves models for --fp16, the plugin
        model.to(dtype(spec["precision"]))  # converts them to bfloat16 for --bf16
    model.to(spec["device"])
    model.eval()
    model.make_generation_fast_(need_attn=False)  # as fairseq-generate without --print-alignment
    gen = SequenceGenerator([model], task.target_dictionary, beam_size=5,
                            max_len_a=0, max_len_b=spec["out_len"], min_len=spec["out_len"])
    samples = batches(task, spec, "test", beam_batches(spec["sentences"], spec["gen_batch"]),
                      max_sentences=spec["gen_batch"], multiple=1, shuffle=False)
    if spec["device"] == "cuda":
        samples = [utils.move_to_cuda(s) for s in samples]
    warm, timed = samples[0], samples[1:]
    with torch.no_grad():
        gen.forward(warm)
        t0 = clock.now()
        for sample in timed:
            gen.forward(sample)
        elapsed = clock.now() - t0
        result = {"sentences_per_s": sum(s["nsentences"] for s in timed) / elapsed, "peak_mb": clock.peak_mb()}
        if spec["busy_steps"]:
            result["busy"] = busy_fraction(clock, lambda: gen.forward(warm))
    return result


def user_dir(spec):
    """``--user-dir`` of our systems (fairseq's ``lstm`` runs as fairseq has it)."""
    return [] if spec["arch"] == "lstm" else ["--user-dir", os.path.join(PLUGIN_REPO, "fairseq_luong")]


def cli_argv(spec, save_dir):
    """fairseq-train's command line for a worker's system (``load``'s options, as a user gives them)."""
    return [spec["bin"], *user_dir(spec), "--task", "translation", "--arch", spec["arch"], *spec["flags"],
            *shape_flags(spec["shape"]), "--criterion", spec["criterion"], "--label-smoothing", "0.1", "--seed", "1",
            "--optimizer", "adam", "--lr", "0.001", "--num-workers", "0", *PRECISION_FLAGS[spec["precision"]],
            *(["--cpu"] if spec["device"] == "cpu" else []), "--save-dir", save_dir]


class LogRecords:
    """The messages fairseq's commands log while it is installed (``logging`` handler)."""

    def __enter__(self):
        import logging

        self.messages, self.handler = [], logging.Handler()
        self.handler.emit = lambda record: self.messages.append(record.getMessage())
        logging.getLogger().addHandler(self.handler)
        return self

    def __exit__(self, *exc):
        import logging

        logging.getLogger().removeHandler(self.handler)


def run_cli(module, argv):
    """fairseq's command ``module`` (fairseq_cli.train, .generate) with ``argv``, in this process;
    the messages it logged."""
    import importlib

    command = importlib.import_module(module)
    old = sys.argv
    sys.argv = [module.split(".")[-1]] + argv
    try:
        with LogRecords() as log:
            command.cli_main()
    finally:
        sys.argv = old
    return log.messages


def worker_train_cli(spec):
    """fairseq-train's own words/s (target tokens/s) over ``updates`` updates after as many untimed:
    its log's intervals of the timed half, the whole loop of fairseq-train included."""
    import shutil

    updates = spec["updates"]
    save_dir = spec["save_dir"]
    shutil.rmtree(save_dir, ignore_errors=True)  # fairseq-train would resume the last repetition's
    messages = run_cli("fairseq_cli.train", cli_argv(spec, save_dir) + [
        "--max-update", str(2 * updates), "--log-interval", str(updates), "--log-format", "simple",
        "--disable-validation", "--no-epoch-checkpoints", "--save-interval-updates", "0"])
    wps = [float(m) for line in messages if "num_updates=" in line for m in re.findall(r"\bwps=([\d.]+)", line)]
    if len(wps) < 2:
        raise RuntimeError(f"fairseq-train logged {len(wps)} intervals of words/s, not 2: {messages[-5:]}")
    return {"tokens_per_s": wps[1], "peak_mb": DeviceClock(spec["device"]).peak_mb()}


def worker_generate_cli(spec):
    """fairseq-generate's own sentences/s (beam 5, the whole test set) with the checkpoint the
    training worker saved."""
    checkpoint = os.path.join(spec["save_dir"], "checkpoint_last.pt")
    if spec["arch"] == "lstm":  # fairseq alone loads its checkpoints only if torch is told their one class
        import argparse as namespace_module  # (torch >= 2.6 loads with weights_only; the plugin allowlists it)

        import torch

        torch.serialization.add_safe_globals([namespace_module.Namespace])
    argv = [spec["bin"], *user_dir(spec), "--path", checkpoint, "--gen-subset", "test", "--beam", "5",
        "--batch-size", str(spec["gen_batch"]),
        "--max-len-a", "0", "--max-len-b", str(spec["out_len"]), "--min-len", str(spec["out_len"]),
        "--num-workers", "0", "--quiet", *PRECISION_FLAGS[spec["precision"]],
        *(["--cpu"] if spec["device"] == "cpu" else [])]
    messages = run_cli("fairseq_cli.generate", argv)
    rates = [float(m) for line in messages for m in re.findall(r"\(([\d.]+) sentences/s", line)]
    if not rates:
        raise RuntimeError(f"fairseq-generate logged no sentences/s: {messages[-5:]}")
    return {"sentences_per_s": rates[-1], "peak_mb": DeviceClock(spec["device"]).peak_mb()}


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
            "repo": before if "@" in name else REPO,
            "flags": extra + size_flags(base_name(name), layers, hidden), **opts}
    proc = subprocess.run([sys.executable, os.path.abspath(__file__), "--worker", json.dumps(spec)],
                          capture_output=True, text=True,
                          env=dict(os.environ, PYTHONWARNINGS="ignore"))
    if proc.returncode != 0:
        raise SystemExit(f"error: worker {kind} {name} {layers}x{hidden} {opts['precision']} failed:\n"
                         f"{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def run_worker_main(spec):
    import torch

    global PLUGIN_REPO
    PLUGIN_REPO = spec["repo"]
    torch.set_num_threads(spec["threads"])
    if spec.get("cli"):
        res = worker_train_cli(spec) if spec["kind"] == "train" else worker_generate_cli(spec)
    else:
        res = worker_train(spec) if spec["kind"] == "train" else worker_generate(spec)
    print(json.dumps(res))


def parse(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], epilog=__doc__.split("\n\n", 1)[1],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", default=DEFAULT_DATA, help="Multi30k En-De raw text folder (--shape multi30k)")
    parser.add_argument("--work", default=os.path.join(REPO, "work_dir", "bench_speed"))
    parser.add_argument("--shape", choices=list(SHAPES), default="multi30k",
                        help="multi30k: real data; paper: Luong et al.'s shape, synthetic")
    parser.add_argument("--vocab", type=int, default=50000, help="joint vocabulary of --shape paper")
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cpu", help="cuda: device 0")
    parser.add_argument("--precisions", nargs="+", choices=PRECISIONS, default=["float32"],
                        help="fairseq's float32, --fp16, --bf16: each a block of the table")
    parser.add_argument("--sizes", nargs="+", help="LAYERSxHIDDEN (default: the shape's)")
    parser.add_argument("--systems", nargs="+", choices=list(SYSTEMS), default=list(SYSTEMS),
                        help="default: all")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--updates", type=int, nargs="+", default=[12, 4],
                        help=f"timed training updates per size (after {WARMUP} warm-up updates)")
    parser.add_argument("--gen-sentences", type=int, nargs="+", default=[384, 128],
                        help="test sentences translated per size")
    parser.add_argument("--out-len", type=int, help="forced hypothesis length (default: the shape's)")
    parser.add_argument("--gen-batch", type=int, help="sentences per beam-search batch (default: the shape's)")
    parser.add_argument("--busy", action=argparse.BooleanOptionalAction,
                        help="also the share of wall time the device is busy (default: on CUDA)")
    parser.add_argument("--busy-steps", type=int, default=2, help="updates profiled for --busy")
    parser.add_argument("--threads", type=int, default=os.cpu_count())
    parser.add_argument("--gemm-size", type=int, help="the square GEMM of %% GEMM peak (default 8192 on CUDA, 4096 "
                        "on the CPU); smaller is quicker and gives a lower peak")
    parser.add_argument("--skip-train", action="store_true", help="translation columns only")
    parser.add_argument("--cli", action="store_true", help="end to end: fairseq-train's and fairseq-generate's own "
                        "rates, each command in the worker's process as a user runs it (the module docstring)")
    parser.add_argument("--before", metavar="PATH",
                        help="also run each of our systems from the fairseq_luong checkout "
                        "at PATH (e.g. a git worktree of the commit before a change) as NAME@before, "
                        "alternated with the others in the same run")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        return args
    # every ratio is against its reference in the same run: refused now, not after the measurements
    missing = sorted({REFERENCE.get(n, "lstm") for n in args.systems} - set(args.systems))
    if missing:
        parser.error(f"--systems {' '.join(args.systems)}: add {' '.join(missing)}, the reference the ratios are "
                     "measured against in the same run")
    if args.device == "cuda":
        import torch

        if not torch.cuda.is_available():
            parser.error(f"--device cuda: torch {torch.__version__} sees no CUDA device here")
    if args.cli and (args.busy or args.skip_train):
        parser.error("--cli: fairseq-generate translates with the checkpoint fairseq-train saved, and neither "
                     "command is profiled: leave out --busy and --skip-train")
    if args.shape == "paper" and args.vocab < 100:
        parser.error(f"--vocab {args.vocab}: at least 100 (fairseq's four special symbols among them)")
    args.sizes = args.sizes or SHAPES[args.shape]["sizes"]
    for size in args.sizes:
        if parse_size(size) is None:
            parser.error(f"--sizes {size}: LAYERSxHIDDEN, e.g. 4x1000")
    args.out_len = args.out_len or SHAPES[args.shape]["out_len"]
    args.gen_batch = args.gen_batch or SHAPES[args.shape]["gen_batch"]
    busy = args.device == "cuda" and not args.cli if args.busy is None else args.busy
    args.busy_steps = args.busy_steps if busy else 0
    if args.before:
        if not os.path.isdir(os.path.join(args.before, "fairseq_luong")):
            parser.error(f"--before {args.before}: no fairseq_luong/ there")
        args.systems = [x for n in args.systems
                        for x in ([n, n + "@before"] if has_arch(args.before, SYSTEMS[n][0]) else [n])]
    return args


def before_name(path):
    """What the ``NAME@before`` rows run: PATH and its COMMIT file (a copy without .git, such as
    ``git archive`` of an older commit carried to a GPU machine, says there which commit it is),
    else the commit of the checkout at PATH."""
    marker = os.path.join(path, "COMMIT")
    if os.path.isfile(marker):
        with open(marker, encoding="utf-8") as f:
            return f"{path} ({f.readline().strip()})"
    return f"{path} (commit {commit(path)})"


def main(argv=None):
    args = parse(argv)
    if args.worker:
        return run_worker_main(json.loads(args.worker))
    import torch

    if args.shape == "paper":
        batch = SHAPES["paper"]["max_sentences"]
        # exact multiples of the batch: every batch full (fairseq's batch_by_size cuts the sorted sentences)
        n_train = batch * (train_batches(max(args.updates), args.busy_steps) + 1)
        n_test = args.gen_batch * beam_batches(max(args.gen_sentences), args.gen_batch)
        bin_dir = make_paper_shape(args.work, args.vocab, n_train, n_test)
    elif args.shape == "numbers":
        bin_dir = make_numbers(args.work)
    else:
        bin_dir = prepare_data(args.data, args.work)
    vocab, src_per_tgt, src_len = data_stats(bin_dir)
    clock = DeviceClock(args.device)
    peaks = {p: gemm_peak(clock, p, args.threads, args.gemm_size) for p in args.precisions}
    busy = args.busy_steps > 0
    print(f"# device {clock.name(args.threads)}, torch {torch.__version__}, commit {commit()}; shape {args.shape}: "
          f"vocab {vocab}, {src_per_tgt:.2f} source tokens per target token; medians of {args.repeats} "
          f"alternating repetitions; GEMM peak at start (GFLOP/s, best of 8, measured again after each size: "
          f"% GEMM peak uses the best) " + show(peaks)
          + (f"; busy: the share of wall time {BUSY_MEANS[args.device]} over {args.busy_steps} profiled "
             f"update{'s' if args.busy_steps != 1 else ''} / one beam batch" if busy else "")
          + (f"; @before: {before_name(args.before)}" if args.before else "")
          + ("; end to end: fairseq-train's and fairseq-generate's own rates (--cli)" if args.cli else ""), flush=True)
    columns = ["size", "precision", "system", "loss", "train tok/s", "ratio", "ratio range", "train peak MB",
               "% GEMM peak"] + (["train busy"] if busy else []) + \
        ["beam-5 sent/s", "ratio", "ratio range", "gen peak MB"] + (["gen busy"] if busy else [])
    print("| " + " | ".join(columns) + " |")
    print("|" + "---|" * len(columns))
    for k, size in enumerate(args.sizes):
        layers, hidden = parse_size(size)
        updates = args.updates[min(k, len(args.updates) - 1)]
        sentences = args.gen_sentences[min(k, len(args.gen_sentences) - 1)]
        for precision in args.precisions:
            common = {"threads": args.threads, "before": args.before, "device": args.device,
                      "precision": precision, "shape": args.shape, "busy_steps": args.busy_steps, "cli": args.cli}
            train = {n: [] for n in args.systems}
            gen = {n: [] for n in args.systems}
            for _ in range(args.repeats):
                for name in args.systems:  # alternate the systems
                    # --cli: the checkpoint fairseq-train saves is the one fairseq-generate reads
                    saved = {"save_dir": os.path.join(args.work, "cli", f"{name}_{size}_{precision}")}
                    if not args.skip_train:
                        train[name].append(run_worker("train", bin_dir, name, layers, hidden,
                                                      {"updates": updates, **saved, **common}))
                    if base_name(name) not in TRAIN_ONLY:
                        gen[name].append(run_worker("generate", bin_dir, name, layers, hidden,
                                                    {"sentences": sentences, "out_len": args.out_len,
                                                     "gen_batch": args.gen_batch, **saved, **common}))
            again = gemm_peak(clock, precision, args.threads, args.gemm_size)
            peaks[precision] = again and max(peaks[precision], again)
            for name in args.systems:
                print(f"| {size} | {precision} | {name} | "
                      + row_cells(name, train, gen, busy, layers, hidden, vocab, src_per_tgt, src_len,
                                  peaks[precision]) + " |", flush=True)
    size = gemm_size(clock.device, args.gemm_size)
    print(f"# GEMM peak of {size} x {size} products, best seen (GFLOP/s): " + show(peaks))


def show(peaks):
    return ", ".join(f"{p} {v:.0f}" if v else f"{p} - (no fast GEMM kernel on the CPU)" for p, v in peaks.items())


def row_cells(name, train, gen, busy, layers, hidden, vocab, src_per_tgt, src_len, peak):
    """One system's cells: medians over the repetitions, ratios to its reference system."""
    def med(runs, key):
        return statistics.median(r[key] for r in runs)

    def spread(runs, key, base):
        """min-max over repetitions of each repetition's ratio to the reference's same repetition"""
        ratios = [r[key] / b[key] for r, b in zip(runs, base)]
        return f"{min(ratios):.2f}-{max(ratios):.2f}"

    def busy_cell(runs):
        return [f"{100 * med(runs, 'busy'):.0f}%"] if busy else []

    ref = REFERENCE.get(base_name(name), "lstm")
    if train[name]:
        tps = med(train[name], "tokens_per_s")
        flops = flops_per_target_token(base_name(name), layers, hidden, vocab, src_per_tgt, src_len)
        training = [f"{tps:.0f}", f"{tps / med(train[ref], 'tokens_per_s'):.2f}",
                    spread(train[name], "tokens_per_s", train[ref]), f"{med(train[name], 'peak_mb'):.0f}",
                    f"{100 * tps * 3 * flops / 1e9 / peak:.0f}%" if flops and peak else "-"] + busy_cell(train[name])
    else:
        training = ["-"] + [""] * (4 + busy)
    if gen[name]:
        sps = med(gen[name], "sentences_per_s")
        generation = [f"{sps:.1f}", f"{sps / med(gen[ref], 'sentences_per_s'):.2f}",
                      spread(gen[name], "sentences_per_s", gen[ref]), f"{med(gen[name], 'peak_mb'):.0f}"] + \
            busy_cell(gen[name])
    else:
        generation = ["(same model)"] + [""] * (3 + busy)
    loss = {FUSED_LOSS: "fused", FAIRSEQ_LOSS: "fairseq"}[SYSTEMS[base_name(name)][2]]
    return " | ".join([loss] + training + generation)


if __name__ == "__main__":
    main()
