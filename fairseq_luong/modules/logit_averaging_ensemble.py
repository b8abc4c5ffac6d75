"""The ensemble of Luong et al. (2015): the models' scores averaged BEFORE the softmax.

fairseq's ``EnsembleModel`` (what ``fairseq-generate --path a.pt:b.pt`` uses) averages
the models' probabilities: p(y_t) = 1/M sum_m softmax(z_m), with z_m = W_s h~_t of model
m (eq. 6). The authors' code averaged the scores: p(y_t) = softmax(1/M sum_m z_m), a
normalised geometric mean of the models' distributions. ``LogitAveragingEnsemble`` does
that; attention is averaged as fairseq does. Give it to fairseq's SequenceGenerator in
place of the model list (``scripts/eval/compare_ensembles.py`` compares both). The models
must share the target dictionary and normalise with a plain softmax.
"""
from typing import Dict, List, Optional

import torch
from fairseq.sequence_generator import EnsembleModel
from torch import Tensor


class LogitAveragingEnsemble(EnsembleModel):
    @torch.jit.export
    def forward_decoder(self, tokens, encoder_outs: List[Dict[str, List[Tensor]]],
                        incremental_states: List[Dict[str, Dict[str, Optional[Tensor]]]],
                        temperature: float = 1.0):
        if self.models_size == 1:
            return super().forward_decoder(tokens, encoder_outs, incremental_states, temperature)
        logits: List[Tensor] = []
        attns: List[Tensor] = []
        for i, model in enumerate(self.models):
            encoder_out = encoder_outs[i] if self.has_encoder() else None
            state = incremental_states[i] if self.has_incremental_states() else None
            decoder_out = model.decoder.forward(tokens, encoder_out=encoder_out, incremental_state=state)
            logits.append(decoder_out[0][:, -1:, :] / temperature)  # bsz x 1 x V: z_m
            extra = decoder_out[1] if len(decoder_out) > 1 else None
            attn = extra.get("attn") if isinstance(extra, dict) else extra
            attn = attn[0] if isinstance(attn, list) else attn
            if attn is not None:
                attns.append(attn[:, -1, :])  # bsz x srclen
        mean = torch.stack(logits).mean(0)  # 1/M sum_m z_m: bsz x 1 x V
        log_probs = self.models[0].get_normalized_probs((mean, None), log_probs=True, sample=None)[:, -1, :]
        avg_attn = torch.stack(attns).mean(0) if attns else None
        return log_probs, avg_attn
