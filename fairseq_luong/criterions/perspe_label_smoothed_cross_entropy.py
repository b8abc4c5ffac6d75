"""Label-smoothed cross-entropy whose training forward perturbs positions (perSPE).

Oka, Tanaka & Nagata (NLP2022): during training only, each target phrase
gets one random integer offset ``per`` drawn uniformly from [-k, +k], shared
by the phrase's tokens and added to their positions before the sinusoid
(eq. 3-4). The criterion only decides what is drawn and for which side: the
draw is :func:`phrase_offsets` beside the perturbed sinusoid, and the phrase
ids arrive aligned with ``prev_output_tokens`` from the task's collater
(``sample["prev_output_chunks"]``). Draws are fresh at every forward, so a
sentence gets new offsets each time it is seen. Validation loss and
generation use plain positions.
"""
import logging
from dataclasses import dataclass, field
from typing import Dict

from fairseq.criterions import register_criterion
from fairseq.criterions.label_smoothed_cross_entropy import (
    LabelSmoothedCrossEntropyCriterion,
    LabelSmoothedCrossEntropyCriterionConfig,
)
from fairseq.dataclass import ChoiceEnum
from torch import Tensor

from ..errors import ConfigError
from ..modules.perspe.positions import phrase_offsets, token_phrase_ids

logger = logging.getLogger(__name__)

PERTURB_UNIT_CHOICES = ChoiceEnum(["phrase", "token"])


@dataclass
class PerSPELabelSmoothedCrossEntropyCriterionConfig(LabelSmoothedCrossEntropyCriterionConfig):
    perturb_range: int = field(
        default=1,
        metadata={"help": "k: offsets are drawn uniformly from the integers in [-k, +k]"},
    )
    perturb_unit: PERTURB_UNIT_CHOICES = field(
        default="phrase",
        metadata={
            "help": "phrase: one offset per target phrase (needs --task translation_chunks "
            "and chunk files); token: one offset per token. Source tokens of a "
            "--encoder-pos perspe model always get one offset each (no source phrases)"
        },
    )


@register_criterion(
    "perspe_label_smoothed_cross_entropy",
    dataclass=PerSPELabelSmoothedCrossEntropyCriterionConfig,
)
class PerSPELabelSmoothedCrossEntropyCriterion(LabelSmoothedCrossEntropyCriterion):
    def __init__(
        self,
        task,
        sentence_avg,
        label_smoothing,
        ignore_prefix_size=0,
        report_accuracy=False,
        perturb_range=1,
        perturb_unit="phrase",
    ):
        super().__init__(task, sentence_avg, label_smoothing, ignore_prefix_size, report_accuracy)
        if perturb_range < 0:
            raise ConfigError(f"--perturb-range must be >= 0, got {perturb_range}")
        self.perturb_range = perturb_range
        self.perturb_unit = str(perturb_unit)
        self.eos_idx = task.target_dictionary.eos()
        self._warned_no_perspe = False

    def forward(self, model, sample, reduce=True):
        if model.training:
            offsets = self.position_offsets(model, sample)
            if offsets:
                sample = {**sample, "net_input": {**sample["net_input"], **offsets}}
        return super().forward(model, sample, reduce=reduce)

    def position_offsets(self, model, sample) -> Dict[str, Tensor]:
        """Offsets for each perspe side of ``model``, as forward keyword arguments."""
        encoder, decoder = model.encoder, model.decoder
        if not hasattr(decoder, "perturbs_positions"):
            raise ConfigError(
                "perspe_label_smoothed_cross_entropy needs a model with perturbable "
                "positions (--arch transformer_perspe*)"
            )
        offsets = {}
        if encoder.perturbs_positions:
            offsets["src_position_offsets"] = self.token_offsets(
                sample["net_input"]["src_tokens"], encoder.padding_idx
            )
        if decoder.perturbs_positions:
            offsets["tgt_position_offsets"] = self.decoder_offsets(sample)
        if not offsets and not self._warned_no_perspe:
            logger.warning(
                "no side of the model is perspe (--encoder-pos/--decoder-pos): "
                "training is plain label-smoothed cross-entropy"
            )
            self._warned_no_perspe = True
        return offsets

    def token_offsets(self, tokens: Tensor, *plain: int) -> Tensor:
        """One offset per token of ``tokens``, 0 at the ``plain`` symbols."""
        return phrase_offsets(token_phrase_ids(tokens, *plain), self.perturb_range)

    def decoder_offsets(self, sample) -> Tensor:
        """Offsets aligned with ``prev_output_tokens``; 0 for BOS and padding."""
        prev = sample["net_input"]["prev_output_tokens"]  # bsz x tgt_len
        if self.perturb_unit == "token":
            # the leading </s> is the BOS (with --num-batch-buckets the target's own
            # </s> is fed too, before padding): </s> inputs keep plain positions
            return self.token_offsets(prev, self.padding_idx, self.eos_idx)
        chunks = sample.get("prev_output_chunks")  # bsz x tgt_len, -1 at BOS and padding
        if chunks is None:
            raise ConfigError(
                "--perturb-unit phrase needs target chunk ids in each batch: use "
                "--task translation_chunks with chunk files from "
                "scripts/data/project_chunks.py (or --perturb-unit token)"
            )
        if chunks.shape != prev.shape:
            raise ValueError(
                f"prev_output_chunks {tuple(chunks.shape)} and prev_output_tokens "
                f"{tuple(prev.shape)} differ in shape"
            )
        return phrase_offsets(chunks, self.perturb_range)
