"""Translation whose batches also carry target phrase (chunk) ids, for perSPE.

Oka, Tanaka & Nagata (NLP2022) perturb each target phrase's positions by one
shared offset; the phrases are computed once at preparation time
(``scripts/data/chunk_japanese.py`` then ``scripts/data/project_chunks.py``) and this
task brings them into each batch as ``sample["prev_output_chunks"]``, aligned
with ``prev_output_tokens`` (:mod:`fairseq_luong.data.target_chunks_dataset`).
"""
import logging
import os
from dataclasses import dataclass, field

from fairseq import utils
from fairseq.data import data_utils, indexed_dataset
from fairseq.tasks import register_task
from fairseq.tasks.translation import TranslationConfig, TranslationTask

from ..data.target_chunks_dataset import TargetChunksDataset

logger = logging.getLogger(__name__)


@dataclass
class TranslationChunksConfig(TranslationConfig):
    chunk_name: str = field(
        default="chunks",
        metadata={
            "help": "read target chunk ids from {data}/{split}.{src}-{tgt}.{tgt}.NAME.{bin,idx} "
            "(written by scripts/data/project_chunks.py); a split without that file "
            "loads without chunk ids"
        },
    )


@register_task("translation_chunks", dataclass=TranslationChunksConfig)
class TranslationChunksTask(TranslationTask):
    """fairseq's translation task; batches of splits with a chunk file also
    hold ``prev_output_chunks`` (bsz x tgt_len, aligned with ``prev_output_tokens``,
    -1 at the BOS and at padding).
    """

    cfg: TranslationChunksConfig

    def load_dataset(self, split, epoch=1, combine=False, **kwargs):
        super().load_dataset(split, epoch=epoch, combine=combine, **kwargs)
        dataset = self.datasets[split]
        if dataset.tgt is None:
            return
        chunk_path, target_path = self.chunk_path(split, epoch)
        if chunk_path is None:
            logger.info(
                f"{split}: no target chunk ids ({target_path}.{self.cfg.chunk_name}.bin)"
            )
            return
        chunks = data_utils.load_indexed_dataset(chunk_path, None, "mmap")
        self.datasets[split] = TargetChunksDataset(dataset, chunks, chunk_path, target_path)
        logger.info(f"{split}: target chunk ids from {chunk_path}.bin")

    def chunk_path(self, split, epoch):
        """(chunk file prefix or None, binarized target prefix) as fairseq names them."""
        paths = utils.split_paths(self.cfg.data)
        if split != self.cfg.train_subset:
            paths = paths[:1]  # as TranslationTask: valid and test come from the first
        data_path = paths[(epoch - 1) % len(paths)]
        src, tgt = self.cfg.source_lang, self.cfg.target_lang
        for pair in (f"{src}-{tgt}", f"{tgt}-{src}"):
            target_path = os.path.join(data_path, f"{split}.{pair}.{tgt}")
            chunk_path = f"{target_path}.{self.cfg.chunk_name}"
            if indexed_dataset.dataset_exists(chunk_path, impl="mmap"):
                return chunk_path, target_path
        return None, os.path.join(data_path, f"{split}.{src}-{tgt}.{tgt}")
