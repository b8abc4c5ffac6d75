"""translation_chunks: chunk ids ride through fairseq's batching, keyed by sample id."""

import pytest
import torch
from fairseq import options, tasks
from fairseq.data import indexed_dataset

from fairseq_luong.data.target_chunks_dataset import ChunkLengthError, TargetChunksDataset
from tests.helpers import USER_DIR, cli_error, save_dictionaries

N_SENTENCES = 41


def write_dataset(prefix, rows, vocab_size):
    builder = indexed_dataset.make_builder(f"{prefix}.bin", impl="mmap", vocab_size=vocab_size)
    for row in rows:
        builder.add_item(torch.tensor(row, dtype=torch.int64))
    builder.finalize(f"{prefix}.idx")


def random_chunks(n_tokens, g):
    """Nondecreasing phrase ids 0, 0, 1, ... for n_tokens - 1 pieces, then </s>'s own id."""
    starts = torch.rand(n_tokens - 1, generator=g) < 0.4
    if n_tokens > 1:
        starts[0] = False
    ids = torch.cumsum(starts.long(), 0).tolist()
    return ids + [(ids[-1] + 1) if ids else 0]


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    """Binarized en-ja train/valid splits; train has chunk ids, valid has none."""
    path = tmp_path_factory.mktemp("perspe_task_data")
    g = torch.Generator().manual_seed(0)
    dicts = save_dictionaries(path, {"en": 25, "ja": 25})
    chunks = {}
    for split, n in (("train", N_SENTENCES), ("valid", 7)):
        for lang in ("en", "ja"):
            d = dicts[lang]
            lengths = torch.randint(1, 15, (n,), generator=g).tolist()
            rows = [torch.randint(d.nspecial, len(d), (k,), generator=g).tolist() + [d.eos()]
                    for k in lengths]
            write_dataset(path / f"{split}.en-ja.{lang}", rows, len(d))
            if lang == "ja":
                chunks[split] = [random_chunks(len(r), g) for r in rows]
    write_dataset(path / "train.en-ja.ja.chunks", chunks["train"], 100)
    return path, chunks["train"]


def setup(data_dir, *extra):
    parser = options.get_training_parser()
    args = options.parse_args_and_arch(parser, [
        str(data_dir), "--user-dir", USER_DIR, "--task", "translation_chunks",
        "-s", "en", "-t", "ja", "--arch", "transformer_perspe_tiny", *extra])
    return tasks.setup_task(args)


def batches(task, split, max_positions=(12, 12)):
    task.load_dataset(split, combine=True)
    itr = task.get_batch_iterator(
        task.dataset(split), max_tokens=40, max_positions=max_positions,
        ignore_invalid_inputs=True, seed=3)
    return list(itr.next_epoch_itr(shuffle=True))


@pytest.mark.parametrize("extra", [[], ["--left-pad-target"],
                                   ["--num-batch-buckets", "3"],
                                   ["--left-pad-target", "--num-batch-buckets", "3"]])
def test_chunk_ids_follow_their_sentences_through_batching(data, extra):
    """Also with --num-batch-buckets, which stopped with numpy 2 (fairseq_fixes/batching.py)."""
    path, chunks = data
    task = setup(path, *extra)
    seen = set()
    for batch in batches(task, "train"):
        prev, ids = batch["net_input"]["prev_output_tokens"], batch["prev_output_chunks"]
        target = batch["target"]  # bsz x tgt_len, like prev and ids
        assert ids.shape == prev.shape == target.shape
        real = target.ne(task.target_dictionary.pad())
        for row, sample_id in enumerate(batch["id"].tolist()):
            # the phrase of each target token, placed like the target ...
            want = torch.full_like(target[row], -1)
            want[real[row]] = torch.tensor(chunks[sample_id])
            # ... and of each decoder input: input j holds target token j - 1
            # (fairseq's shift), and the BOS has no phrase
            assert ids[row].tolist() == [-1] + want[:-1].tolist()
            fed = real[row, :-1] & prev[row, 1:].ne(1)  # target tokens fed to the decoder
            assert fed.sum() >= len(chunks[sample_id]) - 1
            assert torch.equal(prev[row, 1:][fed], target[row, :-1][fed])
            if "--num-batch-buckets" not in extra:  # buckets feed the final </s> too
                assert ids[row][prev[row].ne(1)].tolist() == [-1] + chunks[sample_id][:-1]
            seen.add(sample_id)
    # length filtering dropped the long ones, shuffling and sorting kept the rest
    assert 0 < len(seen) < N_SENTENCES


def test_split_without_chunk_file_loads_plain(data):
    path, _ = data
    task = setup(path)
    for batch in batches(task, "valid"):
        assert "prev_output_chunks" not in batch and batch["target"] is not None


def test_length_mismatch_names_sentence_and_file(data, tmp_path):
    path, chunks = data
    for f in path.iterdir():
        (tmp_path / f.name).symlink_to(f)
    (tmp_path / "train.en-ja.ja.chunks.bin").unlink()
    (tmp_path / "train.en-ja.ja.chunks.idx").unlink()
    bad = [list(c) for c in chunks]
    bad[17] = bad[17] + [0]
    write_dataset(tmp_path / "train.en-ja.ja.chunks", bad, 100)
    task = setup(tmp_path)
    with pytest.raises(ChunkLengthError, match=r"chunks\.bin: sentence 17 \(line 18 .*"
                                               rf"{len(bad[17])} chunk ids but {len(chunks[17])} target"):
        task.load_dataset("train")


def test_chunk_file_for_fewer_sentences_is_one_line_in_fairseq_train(data, tmp_path):
    """Chunk ids for 35 of the 41 target lines: fairseq-train printed this error under a
    traceback."""
    path, chunks = data
    for f in path.iterdir():
        if ".chunks." not in f.name:
            (tmp_path / f.name).symlink_to(f)
    write_dataset(tmp_path / "train.en-ja.ja.chunks", chunks[:35], 100)
    # in this process (tests/test_cli.py checks the one-line form on a real process once)
    err = cli_error("train", [str(tmp_path), "--user-dir", USER_DIR, "--task", "translation_chunks",
                              "-s", "en", "-t", "ja", "--arch", "transformer_perspe_tiny", "--optimizer", "adam",
                              "--lr", "0.001", "--max-tokens", "500", "--max-update", "1", "--disable-validation",
                              "--save-dir", str(tmp_path / "ckpt")])
    assert err == (f"fairseq-train: error: {tmp_path}/train.en-ja.ja.chunks.idx holds chunk ids for 35 sentences, but "
                   f"the target {tmp_path}/train.en-ja.ja has {N_SENTENCES}; make the chunk file from the same pieces "
                   "file you binarized (scripts/data/project_chunks.py)")


def test_wrapper_exposes_what_fairseq_reads(data):
    path, _ = data
    task = setup(path)
    task.load_dataset("train")
    ds = task.dataset("train")
    assert isinstance(ds, TargetChunksDataset)
    assert len(ds.src_sizes) == len(ds.tgt_sizes) == len(ds) == N_SENTENCES
