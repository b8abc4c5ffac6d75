"""Label-smoothed cross-entropy whose training forward perturbs positions (perSPE).

Oka, Tanaka & Nagata (NLP2022): during training only, each target phrase
gets one random integer offset ``per`` drawn uniformly from [-k, +k], shared
by the phrase's tokens and added to their positions before the sinusoid
(eq. 3-4). Draws are fresh at every forward, so a sentence gets new offsets
each time it is seen. Validation loss and generation use plain positions.
"""
import logging
from dataclasses import dataclass, field
from typing import Dict

import torch
from fairseq.criterions import register_criterion
from fairseq.criterions.label_smoothed_cross_entropy import (
    LabelSmoothedCrossEntropyCriterion,
    LabelSmoothedCrossEntropyCriterionConfig,
)
from fairseq.dataclass import ChoiceEnum
from torch import Tensor

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
            raise ValueError(f"--perturb-range must be >= 0, got {perturb_range}")
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
            raise ValueError(
                "perspe_label_smoothed_cross_entropy needs a model with perturbable "
                "positions (--arch transformer_perspe*)"
            )
        offsets = {}
        if encoder.perturbs_positions:
            offsets["src_position_offsets"] = self.token_offsets(
                sample["net_input"]["src_tokens"]
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

    def draw(self, shape, device) -> Tensor:
        """Integers drawn uniformly from [-k, +k]."""
        k = self.perturb_range
        return torch.randint(-k, k + 1, shape, device=device)

    def token_offsets(self, tokens: Tensor) -> Tensor:
        """One offset per token, 0 at padding; bsz x len like ``tokens``."""
        return self.draw(tokens.shape, tokens.device).masked_fill(
            tokens.eq(self.padding_idx), 0
        )

    def decoder_offsets(self, sample) -> Tensor:
        """Offsets aligned with ``prev_output_tokens``; 0 for BOS and padding."""
        prev = sample["net_input"]["prev_output_tokens"]  # bsz x tgt_len
        if self.perturb_unit == "token":
            offsets = self.draw(prev.shape, prev.device)  # bsz x tgt_len
        else:
            chunks = sample.get("target_chunks")  # bsz x tgt_len, -1 at padding
            if chunks is None:
                raise ValueError(
                    "--perturb-unit phrase needs target chunk ids in each batch: use "
                    "--task translation_chunks with chunk files from "
                    "scripts/project_chunks.py (or --perturb-unit token)"
                )
            if chunks.shape != prev.shape:
                raise ValueError(
                    f"target_chunks {tuple(chunks.shape)} and prev_output_tokens "
                    f"{tuple(prev.shape)} differ in shape"
                )
            per_phrase = self.draw((chunks.size(0), int(chunks.max()) + 1), chunks.device)
            # bsz x n_phrases -> bsz x tgt_len, aligned with the target
            target_offsets = per_phrase.gather(1, chunks.clamp(min=0))
            target_offsets = target_offsets.masked_fill(chunks.lt(0), 0)
            # prev_output_tokens is the target shifted right by one behind a
            # leading </s> (also for left padding): token t of the target is
            # input t + 1 of the decoder.
            offsets = torch.cat(
                [target_offsets.new_zeros(prev.size(0), 1), target_offsets[:, :-1]], dim=1
            )  # bsz x tgt_len
        # the leading </s> (BOS) and padding keep their plain positions
        return offsets.masked_fill(prev.eq(self.eos_idx) | prev.eq(self.padding_idx), 0)
