"""What the recipes' `run.sh plan` shares (examples/common/plan_tools.py), on its
functions: model sizes counted on the meta device, the options read from a training's
command line, a binarized split's size, the disk verdict. Seconds; the plans themselves run
through the recipes in the full tier (tests/test_recipes.py, tests/test_perspe_e2e.py)."""
import shlex

import torch

from tests.helpers import load_file

pt = load_file("examples/common/plan_tools.py")

TINY = ("--arch luong_global_general --encoder-embed-dim 8 --decoder-embed-dim 8 --encoder-hidden-size 8 "
        "--decoder-hidden-size 8 --encoder-layers 1 --decoder-layers 1")


def built_on_the_cpu(args, src_vocab, tgt_vocab, tmp_path):
    """The parameters of the model fairseq-train builds from ``args``, in real memory."""
    from fairseq import options, tasks
    from fairseq.data import Dictionary

    for lang, n in (("en", src_vocab), ("de", tgt_vocab)):
        d = Dictionary()
        for i in range(n - d.nspecial):
            d.add_symbol(f"w{i}")
        d.save(str(tmp_path / f"dict.{lang}.txt"))
    parsed = options.parse_args_and_arch(options.get_training_parser(), [
        str(tmp_path), "--user-dir", pt.PLUGIN, "-s", "en", "-t", "de", "--cpu", *shlex.split(args)])
    return sum(p.numel() for p in tasks.setup_task(parsed).build_model(parsed).parameters())


def test_count_parameters_counts_what_fairseq_train_builds(tmp_path):
    """On the meta device, as many parameters as the model built in memory, whatever the
    precision and GPU count of the command line; each vocabulary and eq. 6's bias count. It
    silences fairseq's INFO lines for the call only (a training after it in the same process
    logged nothing when it did not)."""
    import logging

    counts = pt.count_parameters({"plain": TINY, "gpus": TINY + " --fp16 --distributed-world-size 2"}, 20, 30)
    assert logging.root.manager.disable == logging.NOTSET
    assert counts["plain"] == counts["gpus"] == built_on_the_cpu(TINY, 20, 30, tmp_path)
    more = pt.count_parameters({"m": TINY, "eq6": TINY + " --no-output-bias"}, 20, 40)
    # 10 more target words: their embedding (8), output row (8) and output bias each; eq. 6 has no bias
    assert more["m"] - counts["plain"] == 10 * (8 + 8 + 1) and more["m"] - more["eq6"] == 40


def test_the_options_of_a_command_line():
    words = "--lr 1.0 --max-tokens 4096 --fp16 --lr 0.5 --arch 'x y'"
    assert pt.option(words, "--lr", cast=float) == 0.5  # the last one wins, as in argparse
    assert pt.option(words, "--arch") == "x y" and pt.option(words, "--seed", 7) == 7
    assert pt.has_flag(words, "--fp16") and not pt.has_flag(words, "--bf16")
    assert pt.drop_options(shlex.split(words), {"--fp16", "--lr"}) == ["--max-tokens", "4096", "--arch", "x y"]


def test_a_binarized_splits_sentences_and_tokens(tmp_path):
    from fairseq.data import indexed_dataset

    prefix = str(tmp_path / "train.en-de.en")
    builder = indexed_dataset.make_builder(prefix + ".bin", impl="mmap", vocab_size=100)
    for line in ([5, 6, 2], [7, 8, 9, 2]):  # EOS (2) ends each sentence
        builder.add_item(torch.IntTensor(line))
    builder.finalize(prefix + ".idx")
    assert pt.binarized_sizes(prefix) == (2, 5)
    assert pt.binarized_sizes(str(tmp_path / "absent")) is None
    assert pt.size_on_disk(str(tmp_path)) == sum(p.stat().st_size for p in tmp_path.iterdir())


def test_the_disk_verdict_keeps_the_reserve_free(tmp_path):
    free = pt.free_disk(str(tmp_path / "not" / "made" / "yet"))  # its nearest existing parent's
    lines = []
    assert pt.disk_verdict(0, str(tmp_path), 0, lines) and lines[0].startswith("disk: 0.0 GB still to be written")
    lines = []
    assert not pt.disk_verdict(1, str(tmp_path), free / pt.GB + 1, lines, advice="run fewer rows")
    assert lines[1].startswith("error: the plan needs 0.0 GB but only 0.0 GB can be used: run fewer rows")
    assert (pt.hours(3 * 3600), pt.hours(3 * 86400), pt.gb(2.5e9)) == ("3.0 h", "3.0 days", "2.5 GB")
