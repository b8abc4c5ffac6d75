"""What the recipes' `run.sh plan` shares: model sizes, GPUs, disk, a data set's size.

Imported by examples/*/plan.py (not a command), which their run.sh runs with this folder on
``PYTHONPATH``. Model sizes come from building each model
exactly as fairseq-train would (its command-line options, the plugin's --user-dir), on
PyTorch's meta device: the parameters are counted, no memory is taken.
"""
import os
import shlex
import shutil
import tempfile

# the fairseq_luong folder (--user-dir): this file is examples/common/plan_tools.py
PLUGIN = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "fairseq_luong")
GB = 1e9


def gpus():
    """(count, [names]) of the CUDA devices PyTorch sees here."""
    import torch

    if not torch.cuda.is_available():
        return 0, []
    return torch.cuda.device_count(), [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]


def count_parameters(models, src_vocab, tgt_vocab, src="en", tgt="de", task="translation"):
    """{name: parameters} of models given as {name: fairseq-train options (a shell-quoted
    string)}, built as fairseq-train builds them, with dictionaries of src_vocab / tgt_vocab
    entries (fairseq's 4 special symbols included)."""
    import logging

    silenced = logging.root.manager.disable
    logging.disable(logging.INFO)  # fairseq's INFO lines would bury the plan (for this call only)
    try:
        return _count_parameters(models, src_vocab, tgt_vocab, src, tgt, task)
    finally:
        logging.disable(silenced)


def _count_parameters(models, src_vocab, tgt_vocab, src, tgt, task):
    import torch
    from fairseq import options, tasks
    from fairseq.data import Dictionary

    import fairseq_luong  # noqa: F401  (the archs)

    counts = {}
    with tempfile.TemporaryDirectory() as d:
        for lang, n in ((src, src_vocab), (tgt, tgt_vocab)):
            dictionary = Dictionary()
            for i in range(n - dictionary.nspecial):
                dictionary.add_symbol(f"w{i}")
            dictionary.save(os.path.join(d, f"dict.{lang}.txt"))
        for name, args in models.items():
            words = [w for w in shlex.split(args) if w]
            words = drop_options(words, {"--distributed-world-size", "--task", "--fp16", "--bf16", "--amp"})
            parser = options.get_training_parser()
            parsed = options.parse_args_and_arch(parser, [d, "--user-dir", PLUGIN,
                                                          "-s", src, "-t", tgt, "--task", task, "--cpu"] + words)
            t = tasks.setup_task(parsed)
            with torch.device("meta"):
                model = t.build_model(parsed)
            counts[name] = sum(p.numel() for p in model.parameters())
    return counts


def drop_options(words, names):
    """``words`` without the options in ``names`` (and the value of those that take one)."""
    flags = {"--fp16", "--bf16", "--amp", "--cpu"}
    out, skip = [], False
    for w in words:
        if skip:
            skip = False
            continue
        if w in names:
            skip = w not in flags
            continue
        out.append(w)
    return out


def option(words, name, default=None, cast=str):
    """The last value of option ``name`` in the shell-quoted ``words``."""
    words = shlex.split(words) if isinstance(words, str) else words
    value = default
    for i, w in enumerate(words[:-1]):
        if w == name:
            value = cast(words[i + 1])
    return value


def has_flag(words, name):
    return name in (shlex.split(words) if isinstance(words, str) else words)


def size_on_disk(path):
    """Bytes under ``path`` (0 when absent)."""
    if os.path.isfile(path):
        return os.path.getsize(path)
    total = 0
    for root, _, files in os.walk(path):
        for f in files:
            try:
                total += os.path.getsize(os.path.join(root, f))
            except OSError:
                pass
    return total


def free_disk(path):
    """Free bytes on the file system that holds ``path`` (or its nearest existing parent)."""
    while not os.path.exists(path):
        path = os.path.dirname(path) or "."
    return shutil.disk_usage(path).free


def binarized_sizes(prefix):
    """(sentences, tokens without EOS) of a fairseq binarized split (PREFIX.idx/.bin), or None."""
    if not os.path.exists(prefix + ".idx"):
        return None
    from fairseq.data import data_utils

    dataset = data_utils.load_indexed_dataset(prefix, None, "mmap")
    sizes = dataset.sizes
    return len(sizes), int(sizes.sum()) - len(sizes)


def gb(n):
    return f"{n / GB:.1f} GB"


def hours(seconds):
    if seconds >= 2 * 86400:
        return f"{seconds / 86400:.1f} days"
    return f"{seconds / 3600:.1f} h"


def disk_verdict(needed, work, reserve_gb, lines,
                 advice="free disk, choose another --work-dir, or run fewer rows"):
    """Append the disk lines to ``lines``; True when ``needed`` bytes (still to be written)
    fit into the free disk of ``work`` minus ``reserve_gb`` (the recipe's --reserve)."""
    free = free_disk(work)
    room = free - reserve_gb * GB
    lines.append(f"disk: {gb(needed)} still to be written; {gb(free)} free on {work}'s file system"
                 + (f", {reserve_gb} GB of it kept free (--reserve)" if reserve_gb else ""))
    if needed > room:
        lines.append(f"error: the plan needs {gb(needed)} but only {gb(max(room, 0))} can be used: {advice}")
        return False
    return True
