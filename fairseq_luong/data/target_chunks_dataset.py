"""A language-pair dataset whose batches also carry the phrase id of each decoder input.

Each target token (SentencePiece piece, plus the final ``</s>``) has the id of
the phrase it belongs to, 0, 1, 2, ... within its sentence, as written by
``scripts/data/project_chunks.py`` into ``{split}.{src}-{tgt}.{tgt}.chunks.{bin,idx}``.
The wrapper looks the ids up by sample id after fairseq has collated the
batch, so shuffling, length filtering, bucketing and the collater's sort by
source length all carry over unchanged, and shifts them exactly as fairseq's
collater shifts the target into ``prev_output_tokens``: this is the one place
where phrase ids meet decoder positions.
"""
import numpy as np
import torch
from fairseq.data import BaseWrapperDataset, BucketPadLengthDataset

from ..errors import UserError

PAD_CHUNK = -1  # the chunk id of the BOS and of padding in a batch


class ChunkLengthError(UserError, ValueError):
    """Chunk ids and target tokens disagree in number for some sentence."""


def check_chunk_lengths(chunk_sizes, tgt_sizes, chunk_path, target_path):
    """Raise, naming the first sentence, unless each sentence has one id per token."""
    chunk_sizes, tgt_sizes = np.asarray(chunk_sizes), np.asarray(tgt_sizes)
    if len(chunk_sizes) != len(tgt_sizes):
        raise ChunkLengthError(
            f"{chunk_path}.idx holds chunk ids for {len(chunk_sizes)} sentences, "
            f"but the target {target_path} has {len(tgt_sizes)}; make the chunk file "
            f"from the same pieces file you binarized (scripts/data/project_chunks.py)"
        )
    bad = np.flatnonzero(chunk_sizes != tgt_sizes)
    if len(bad) > 0:
        i = int(bad[0])
        raise ChunkLengthError(
            f"{chunk_path}.bin: sentence {i} (line {i + 1} of the text both were made "
            f"from) has {chunk_sizes[i]} chunk ids but {tgt_sizes[i]} target tokens "
            f"(pieces + </s>) in {target_path}; {len(bad)} sentence(s) differ. Make "
            f"the chunk file from the same pieces file you binarized "
            f"(scripts/data/project_chunks.py)"
        )


class TargetChunksDataset(BaseWrapperDataset):
    """A ``LanguagePairDataset`` whose batches also hold ``prev_output_chunks``.

    ``batch["prev_output_chunks"]`` is bsz x tgt_len, aligned with
    ``batch["net_input"]["prev_output_tokens"]`` (the same rows, the same left
    or right padding): the phrase id of the target token each decoder input
    holds, and ``PAD_CHUNK`` (-1) at the leading ``</s>`` (BOS) and at padding,
    which keep their plain positions.

    Args:
        dataset (LanguagePairDataset): the wrapped dataset, with a target
        chunks (FairseqDataset): chunk ids for sentence i at index i
        chunk_path (str): file prefix of ``chunks``, for error messages
        target_path (str): file prefix of the binarized target, likewise
    """

    def __init__(self, dataset, chunks, chunk_path, target_path):
        super().__init__(dataset)
        tgt = dataset.tgt
        while isinstance(tgt, BucketPadLengthDataset):  # --num-batch-buckets
            tgt = tgt.dataset
        check_chunk_lengths(chunks.sizes, tgt.sizes, chunk_path, target_path)
        self.chunks = chunks
        self.chunk_path = chunk_path
        # what fairseq's tools read off a LanguagePairDataset
        self.src, self.tgt = dataset.src, dataset.tgt
        self.src_dict, self.tgt_dict = dataset.src_dict, dataset.tgt_dict
        self.src_sizes, self.tgt_sizes = dataset.src_sizes, dataset.tgt_sizes
        self.left_pad_source = dataset.left_pad_source
        self.left_pad_target = dataset.left_pad_target

    def collater(self, samples, pad_to_length=None):
        batch = self.dataset.collater(samples, pad_to_length=pad_to_length)
        prev = batch.get("net_input", {}).get("prev_output_tokens") if batch else None
        if prev is None:  # no target, or no input feeding
            return batch
        target = batch["target"]  # bsz x tgt_len
        if prev.shape != target.shape:
            raise ValueError(
                f"prev_output_tokens {tuple(prev.shape)} and target {tuple(target.shape)} "
                f"differ in shape; translation_chunks needs fairseq's own shifted target"
            )
        chunks = torch.full_like(target, PAD_CHUNK)  # bsz x tgt_len, aligned with target
        n_tokens = target.ne(self.tgt_dict.pad()).sum(dim=1).tolist()  # bsz
        for row, sample_id in enumerate(batch["id"].tolist()):
            ids = self.chunks[sample_id]  # one id per target token, </s> included
            n = len(ids)
            if n != n_tokens[row]:
                raise ChunkLengthError(
                    f"{self.chunk_path}.bin: sentence {sample_id} has {n} chunk ids "
                    f"but {n_tokens[row]} target tokens in this batch"
                )
            # the real tokens sit at the end of a left-padded row (as
            # fairseq/data/language_pair_dataset.py offsets its alignments)
            start = target.size(1) - n if self.left_pad_target else 0
            chunks[row, start:start + n] = ids
        # fairseq's collater shifts each target right by one behind a </s> (the
        # BOS): column j of prev_output_tokens holds column j - 1 of the target,
        # for left and right padding alike; the BOS column has no phrase.
        batch["prev_output_chunks"] = torch.cat(
            [chunks.new_full((chunks.size(0), 1), PAD_CHUNK), chunks[:, :-1]], dim=1
        )  # bsz x tgt_len, aligned with prev_output_tokens
        return batch
