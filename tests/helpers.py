"""Small helpers shared by the tests (fairseq's own tests/utils.py is not installed)."""
import atexit
import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import torch
from fairseq import options, tasks
from fairseq.data import Dictionary

REPO = Path(__file__).resolve().parents[1]
USER_DIR = str(REPO / "fairseq_luong")
SHARED_DATA = REPO.parent / "shared" / "data"
BENCH = REPO / "scripts" / "bench"
# benchmark_speed.py at its smallest (Luong et al.'s shape written small: seconds on one thread);
# a test adds --systems, --precisions and the rest
TINY_SPEED = ["--shape", "paper", "--vocab", "300", "--sizes", "1x16", "--repeats", "1", "--updates", "2",
              "--gen-sentences", "8", "--gen-batch", "8", "--threads", "1", "--gemm-size", "512"]

LUONG_ARCHS = [
    "luong_lstm",
    "luong_base",
    "luong_global_dot",
    "luong_global_general",
    "luong_global_concat",
    "luong_global_location",
    "luong_localm",
    "luong_localp",
]


def make_dictionary(n_words=20, prefix="w"):
    d = Dictionary()
    for i in range(n_words):
        d.add_symbol(f"{prefix}{i}")
    d.finalize(padding_factor=1)
    return d


def save_dictionaries(path, sizes):
    """dict.{lang}.txt of ``sizes[lang]`` words {lang}0, {lang}1, ... in ``path``;
    returns the dictionaries by language."""
    dicts = {lang: make_dictionary(n, prefix=lang) for lang, n in sizes.items()}
    for lang, d in dicts.items():
        d.save(os.path.join(str(path), f"dict.{lang}.txt"))
    return dicts


_DICT_DIR = None


def dict_dir():
    """A data directory holding only dict.src.txt / dict.tgt.txt."""
    global _DICT_DIR
    if _DICT_DIR is None:
        _DICT_DIR = tempfile.mkdtemp(prefix="luong_dicts_")
        atexit.register(shutil.rmtree, _DICT_DIR, ignore_errors=True)
        make_dictionary().save(os.path.join(_DICT_DIR, "dict.src.txt"))
        make_dictionary(23).save(os.path.join(_DICT_DIR, "dict.tgt.txt"))
    return _DICT_DIR


def build_model(arch, *extra):
    """Build ``arch`` exactly as fairseq-train would, from command-line words."""
    parser = options.get_training_parser()
    argv = [dict_dir(), "--user-dir", USER_DIR, "--task", "translation",
            "-s", "src", "-t", "tgt", "--arch", arch, *extra]
    args = options.parse_args_and_arch(parser, argv)
    task = tasks.setup_task(args)
    model = task.build_model(args)
    return model, task, args


def random_batch(task, bsz=3, srclens=(7, 5, 3), tgtlens=(6, 4, 5), left_pad_source=True, seed=0):
    """A padded batch with sentences ending in EOS, as fairseq's collater builds it."""
    g = torch.Generator().manual_seed(seed)
    src_d, tgt_d = task.source_dictionary, task.target_dictionary

    def sents(d, lens):
        return [torch.cat([torch.randint(d.nspecial, len(d), (n - 1,), generator=g),
                           torch.tensor([d.eos()])]) for n in lens]

    srcs, tgts = sents(src_d, srclens[:bsz]), sents(tgt_d, tgtlens[:bsz])
    return collate(srcs, tgts, src_d, tgt_d, left_pad_source)


def collate(srcs, tgts, src_d, tgt_d, left_pad_source=True):
    from fairseq.data import data_utils
    src = data_utils.collate_tokens(srcs, src_d.pad(), src_d.eos(), left_pad=left_pad_source)
    prev = data_utils.collate_tokens(tgts, tgt_d.pad(), tgt_d.eos(), left_pad=False,
                                     move_eos_to_beginning=True)
    target = data_utils.collate_tokens(tgts, tgt_d.pad(), tgt_d.eos(), left_pad=False)
    return {"src_tokens": src, "src_lengths": torch.tensor([len(s) for s in srcs]),
            "prev_output_tokens": prev, "target": target}


def run(cmd, **kw):
    """Run a CLI command, failing the test with its output if it fails."""
    env = dict(os.environ, PYTHONWARNINGS="ignore", OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, **kw)
    if proc.returncode != 0:
        raise AssertionError(
            f"command failed ({proc.returncode}): {' '.join(map(str, cmd))}\n"
            f"--- stdout ---\n{proc.stdout[-4000:]}\n--- stderr ---\n{proc.stderr[-6000:]}"
        )
    return proc


def error_line(cmd, **kw):
    """Run a command that must fail with one error line after its logging and no traceback."""
    env = dict(os.environ, PYTHONWARNINGS="ignore", OMP_NUM_THREADS="1")
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, **kw)
    assert proc.returncode == 1, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    return proc.stderr.strip().splitlines()[-1]


def fairseq_cli(name, argv, stdin=None):
    """fairseq-NAME (train, generate, interactive, preprocess, validate) in this process, as
    fairseq's own tests/utils.py runs them (a process start saved per call): its cli_main
    with ``argv`` as the command line. Returns (what it printed, what it logged); an error
    is raised as the exception the command would have died of (a ``UserError`` where the
    terminal would show one line)."""
    import contextlib
    import importlib
    import io
    import logging

    from fairseq import checkpoint_utils

    module = importlib.import_module(f"fairseq_cli.{name}")
    if name in ("train", "generate", "validate", "interactive") and "--num-workers" not in argv:
        # no data-loading worker process: in this process a worker outlives the command by about
        # 5 s (it is torn down with the iterator, not at the process's exit)
        argv = [*argv, "--num-workers", "0"]
    if hasattr(checkpoint_utils.save_checkpoint, "best"):
        # fairseq keeps the best validation loss on the function: a fresh process starts without
        del checkpoint_utils.save_checkpoint.best
    out, log = io.StringIO(), io.StringIO()
    handler = logging.StreamHandler(log)
    handler.setFormatter(logging.Formatter("%(levelname)s | %(name)s | %(message)s"))
    root = logging.getLogger()
    level, saved_argv, saved_stdin = root.level, sys.argv, sys.stdin
    root.addHandler(handler)
    root.setLevel(logging.INFO)
    sys.argv = [f"fairseq-{name}", *map(str, argv)]
    if stdin is not None:
        sys.stdin = io.TextIOWrapper(io.BytesIO(stdin if isinstance(stdin, bytes) else stdin.encode()))
    try:
        with contextlib.redirect_stdout(out):
            module.cli_main()
    finally:
        sys.argv, sys.stdin = saved_argv, saved_stdin
        root.removeHandler(handler)
        root.setLevel(level)
    return out.getvalue(), log.getvalue()


def cli(name, argv, input=None):
    """fairseq-NAME in this process (fairseq_cli), with what a finished process gives: its
    ``stdout`` (what it printed) and ``stderr`` (what it logged)."""
    import types

    out, log = fairseq_cli(name, argv, stdin=input)
    return types.SimpleNamespace(stdout=out, stderr=log, returncode=0)


def cli_error(name, argv, input=None):
    """The one line fairseq-NAME prints for the error it stops with ("fairseq-NAME: error:
    MESSAGE", the excepthook's form for a UserError; tests/test_cli.py checks that form once
    on a real process)."""
    from fairseq_luong.errors import UserError

    try:
        fairseq_cli(name, argv, stdin=input)
    except UserError as err:
        return f"fairseq-{name}: error: {err}"
    raise AssertionError(f"fairseq-{name} {' '.join(map(str, argv))} did not stop with an error")


def bin_path(name):
    return str(Path(sys.executable).parent / name)


WMT_SAMPLE = SHARED_DATA / "wmt_sample_en_de"


def make_wmt14_release(out, n_train=300, n_test=20, vocab_size=None):
    """Files in the format of Luong et al.'s WMT'14 release (the Stanford NMT page), made
    from ``../shared/data/wmt_sample_en_de``: train.{en,de} (the first ``n_train`` pairs),
    newstest2012..2015.{en,de} (consecutive blocks of ``n_test`` lines of its
    newstest2012), vocab.50K.{en,de} (<unk>, <s>, </s>, then the training words by
    frequency; filled up to ``vocab_size`` lines with made-up words when given, for
    realistic output-layer costs) and dict.en-de (one "english german" pair a line: the
    words spelled alike on both sides)."""
    from collections import Counter

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    words = {}
    for lang in ("en", "de"):
        with open(WMT_SAMPLE / f"train.{lang}", encoding="utf-8") as f:
            train = [next(f) for _ in range(n_train)]
        (out / f"train.{lang}").write_text("".join(train), encoding="utf-8")
        with open(WMT_SAMPLE / f"newstest2012.{lang}", encoding="utf-8") as f:
            test = [next(f) for _ in range(4 * n_test)]
        for i, year in enumerate((2012, 2013, 2014, 2015)):
            (out / f"newstest{year}.{lang}").write_text(
                "".join(test[i * n_test:(i + 1) * n_test]), encoding="utf-8")
        counts = Counter(w for line in train for w in line.split())
        vocab = ["<unk>", "<s>", "</s>"] + [w for w, _ in counts.most_common()]
        if vocab_size:
            vocab += [f"{lang}_filler{i}" for i in range(vocab_size + 3 - len(vocab))]
        (out / f"vocab.50K.{lang}").write_text("\n".join(vocab) + "\n", encoding="utf-8")
        words[lang] = counts
    common = sorted(w for w in words["en"] if w in words["de"] and w.isalpha())
    (out / "dict.en-de").write_text("".join(f"{w} {w}\n" for w in common), encoding="utf-8")
    return out


WORDS = ("one two three four five six seven eight nine ten eleven twelve thirteen fourteen "
         "fifteen sixteen seventeen eighteen nineteen twenty thirty forty fifty cats dogs").split()


def write_word_corpus(root):
    """Word-level pairs (the target: the source's words capitalised): train/valid/test.{en,de}."""
    g = torch.Generator().manual_seed(5)
    for split, n in (("train", 150), ("valid", 5), ("test", 6)):
        lines = [" ".join(WORDS[i] for i in torch.randint(len(WORDS), (int(k),), generator=g))
                 for k in torch.randint(2, 7, (n,), generator=g)]
        (root / f"{split}.en").write_text("\n".join(lines) + "\n", encoding="utf-8")
        (root / f"{split}.de").write_text("\n".join(s.title() for s in lines) + "\n", encoding="utf-8")


def build_piece_corpus(root):
    """Word-level pairs in ``root/raw`` (write_word_corpus: the target is the source
    capitalised), a joint SentencePiece model of 60 pieces (``root/spm.model``), the pieces in
    ``root/pieces`` binarized with one dictionary in ``root/bin``, and target phrase ids for
    translation_chunks (one phrase per word; </s> its own). Returns ``root``."""
    import sentencepiece as spm
    from fairseq.data import indexed_dataset

    root = Path(root)
    (root / "raw").mkdir()
    (root / "pieces").mkdir()
    write_word_corpus(root / "raw")
    spm.SentencePieceTrainer.train(input=f"{root}/raw/train.en,{root}/raw/train.de", model_prefix=str(root / "spm"),
                                   vocab_size=60, character_coverage=1.0, minloglevel=2)
    sp = spm.SentencePieceProcessor(model_file=str(root / "spm.model"))
    for split in ("train", "valid", "test"):
        for lang in ("en", "de"):
            lines = (root / "raw" / f"{split}.{lang}").read_text(encoding="utf-8").splitlines()
            (root / "pieces" / f"{split}.{lang}").write_text(
                "".join(" ".join(sp.encode(line, out_type=str)) + "\n" for line in lines), encoding="utf-8")
    cli("preprocess", ["-s", "en", "-t", "de", "--trainpref", root / "pieces/train", "--validpref",
                       root / "pieces/valid", "--testpref", root / "pieces/test", "--destdir", root / "bin",
                       "--joined-dictionary", "--workers", "1"])
    chunks = indexed_dataset.make_builder(f"{root}/bin/train.en-de.de.chunks.bin", impl="mmap", vocab_size=1000)
    for line in (root / "pieces/train.de").read_text(encoding="utf-8").splitlines():
        words = [0] * len(line.split())
        for i, piece in enumerate(line.split()[1:], 1):
            words[i] = words[i - 1] + piece.startswith("\u2581")
        chunks.add_item(torch.tensor(words + [words[-1] + 1]))
    chunks.finalize(f"{root}/bin/train.en-de.de.chunks.idx")
    return root


def build_diagonal_model(root):
    """A crafted checkpoint with a known attention, on raw word-level data in ``root``.

    Data: ``root/raw`` (write_word_corpus), ``root/bin`` (fairseq-preprocess --dataset-impl
    raw, vocabularies cut to 12 words, so <unk> occurs). Model ``root/crafted.pt``:
    luong_localm, D = 0, --reverse-source, trained one update: local-m's p_t = t (section
    3.2) with a window of one position, so the step that predicts target word t attends
    with weight 1 to source position min(t, S - 1) (S = words + EOS) in the original order;
    output bias +50 on <unk> and -30 on EOS, so every hypothesis word is <unk> until the
    length limit.
    """
    (root / "raw").mkdir()
    write_word_corpus(root / "raw")
    # in this process (a fixture's commands are not under test: two process starts saved)
    cli("preprocess", ["-s", "en", "-t", "de", "--trainpref", root / "raw/train",
                       "--validpref", root / "raw/valid", "--testpref", root / "raw/test",
                       "--destdir", root / "bin", "--dataset-impl", "raw", "--nwordssrc", "12",
                       "--nwordstgt", "12", "--workers", "1"])
    tiny = ["--encoder-embed-dim", "8", "--encoder-hidden-size", "8", "--decoder-embed-dim", "8",
            "--decoder-hidden-size", "8"]
    cli("train", [root / "bin", "--dataset-impl", "raw", "--user-dir", USER_DIR,
                  "--arch", "luong_localm", *tiny, "--local-window", "0", "--reverse-source",
                  "--optimizer", "adam", "--lr", "0.001", "--max-tokens", "1000", "--max-update", "1",
                  "--disable-validation", "--no-epoch-checkpoints", "--save-dir", root / "ckpt"])
    import fairseq_luong  # noqa: F401  (allowlists what fairseq checkpoints hold)

    state = torch.load(root / "ckpt" / "checkpoint_last.pt", weights_only=True)
    eos, unk = 2, 3  # fairseq's Dictionary: <s>, <pad>, </s>, <unk>
    state["model"]["decoder.W_s.bias"][unk] += 50.0
    state["model"]["decoder.W_s.bias"][eos] -= 30.0  # EOS only where the length limit forces it
    torch.save(state, root / "crafted.pt")
    return root


# perSPE data path: lines that broke it before the one normalisation, with the
# Japanese each must become. (Japanese, English, normalised Japanese)
ODD_LINES = [
    ("ハ\u309aンを食へ\u3099る。", "i eat bread .", "パンを食べる。"),  # NFD kana
    ("私は\r学生です。", "i am a\r student .", "私は 学生です。"),  # a stray \r
    ("\u3000彼女は\u3000医者です。\u3000", "she is a doctor .", "彼女は 医者です。"),  # U+3000
    ("彼は\x07来\x00なかった。\x1c", "he did n't come .\x0b", "彼は 来 なかった。"),  # controls
    ("左\t右\x85上\u2028下", "left\tright up down", "左 右 上 下"),  # tab, NEL, U+2028
    ("\ufeffこれは\u200bペンです。", "this is a pen .", "これはペンです。"),  # BOM, ZWSP
    ("ﾃﾆｽとＤＮＡ１２３を調べる。", "i study tennis and dna 123 .", "テニスとDNA123を調べる。"),
    ("今日は晴れです。\r", "it is sunny today .\r", "今日は晴れです。"),  # CRLF
    ("\u3000\x07", "nothing .", ""),  # nothing left
]


def write_aspec_format(dest, data_dir, sizes, odd_lines=True):
    """ASPEC-JE-format files (train/train-1.txt, dev/dev.txt, test/test.txt) from the
    line-aligned {split}.{en,ja} of ``data_dir`` (small_parallel_enja: its Japanese
    words are joined again), the first ``sizes[split]`` pairs of each split, with
    :data:`ODD_LINES` in train and dev when ``odd_lines``. Returns the line counts."""
    dest = Path(dest)
    counts = {}
    for split, n in sizes.items():
        with open(Path(data_dir) / f"{split}.ja", encoding="utf-8") as fja, \
                open(Path(data_dir) / f"{split}.en", encoding="utf-8") as fen:
            pairs = [(ja.rstrip("\n").replace(" ", ""), en.rstrip("\n"))
                     for _, ja, en in zip(range(n), fja, fen)]
        if odd_lines and split != "test":
            pairs[1:1] = [(ja, en) for ja, en, _ in ODD_LINES]
        name = {"train": "train/train-1.txt", "dev": "dev/dev.txt", "test": "test/test.txt"}[split]
        path = dest / name
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "w", encoding="utf-8", newline="") as f:
            for i, (ja, en) in enumerate(pairs):
                head = f"0.{900 - i % 900:03d} ||| " if split == "train" else ""
                f.write(f"{head}A-A{i // 10:04d} ||| {i % 10 + 1} ||| {ja} ||| {en}\n")
        counts[split] = len(pairs)
    return counts


def fused_lstm_cell_on_the_cpu(input_gates, hidden_gates, cx, input_bias=None, hidden_bias=None):
    """aten::_thnn_fused_lstm_cell (CUDA only) on the CPU: its argument checks (RNN.cu's
    checkSizes: the gates 2-D and of one size; a bias 1-D of 4H, and both biases or neither; one
    dtype), its arithmetic and its three outputs: h, c and the workspace its backward reads, the
    activated gates [sigmoid(i), sigmoid(f), tanh(g), sigmoid(o)] (rows x 4H)."""
    assert input_gates.dim() == 2 and input_gates.shape == hidden_gates.shape
    assert input_gates.dtype == hidden_gates.dtype == cx.dtype  # one scalar type: the kernel reads them as one
    assert cx.numel() == input_gates.numel() // 4
    assert (input_bias is None) == (hidden_bias is None)
    gates = input_gates + hidden_gates
    if input_bias is not None:
        assert input_bias.shape == hidden_bias.shape == (input_gates.size(1),)
        gates = gates + input_bias + hidden_bias
    i, f, g, o = gates.chunk(4, 1)
    i, f, g, o = torch.sigmoid(i), torch.sigmoid(f), torch.tanh(g), torch.sigmoid(o)
    c = f * cx + i * g
    return o * torch.tanh(c), c, torch.cat((i, f, g, o), 1)


def fused_lstm_cell_backward_on_the_cpu(grad_hy, grad_cy, cx, cy, workspace, has_bias):
    """aten::_thnn_fused_lstm_cell_backward_impl (CUDA only) on the CPU: RNN.cu's size checks and
    arithmetic (tanh(c_t) recomputed from cy; grad_cy may be None), returning the gradients of the
    gates' pre-activations (rows x 4H), of c_{t-1} and of the bias (has_bias: their row sum)."""
    assert grad_hy is not None or grad_cy is not None
    rows, H = cx.shape
    for t in (grad_hy, grad_cy, cy):
        assert t is None or t.shape == (rows, H)
    assert workspace.dim() == 2 and workspace.numel() == rows * H * 4
    i, f, g, o = workspace.chunk(4, 1)
    tanh_c = torch.tanh(cy)
    go = torch.zeros_like(cx) if grad_hy is None else grad_hy
    gc = go * o * (1 - tanh_c * tanh_c) + (0 if grad_cy is None else grad_cy)
    grad_gates = torch.cat((gc * g * i * (1 - i), gc * cx * f * (1 - f), gc * i * (1 - g * g),
                            go * tanh_c * o * (1 - o)), 1)
    return grad_gates, gc * f, grad_gates.sum(0) if has_bias else None


def load_file(path):
    """A module of the checkout that runs as a script (scripts/bench/machine.py,
    examples/common/freshness.py, ...), as its own folder first on the path has it: by its file
    name, once."""
    name = Path(path).stem
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, REPO / path)
        sys.modules[name] = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(sys.modules[name])
    return sys.modules[name]


def load_bench(name):
    """A script of scripts/bench as its own folder first on the path has it (the scripts it imports
    too: machine, bench_device, benchmark_speed)."""
    for dep in ("machine", "bench_device", "benchmark_speed", name):
        load_file(BENCH.relative_to(REPO) / f"{dep}.py")
    return sys.modules[name]
