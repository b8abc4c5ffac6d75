"""Beam search's reorder of the encoder's output and the decoders' cached state.

fairseq's beam search calls ``reorder_encoder_out`` and ``reorder_incremental_state`` with
``new_order`` at every step: row i continues the hypothesis of row ``new_order[i]``. Most of
what they hold is a function of the row's source sentence alone: the encoder's memory, mask
and final states, the attention's keys (bsz x srclen x C: the bulk of it). Every beam row of
a sentence holds a copy of its sentence's, and between two steps at which a sentence
finishes (the batch then shrinks) each row picks one of its own sentence's hypotheses: the
index_select copies those tensors onto themselves. On 2 CPU cores at the IWSLT'15 recipe's
shapes that copy is about 8 % of beam search's time (cProfile, beam 5, at 8aff761).

``reorder_rows`` therefore keeps the per-sentence tensors as they are when every row keeps
its sentence, which it reads from ``SENTENCE`` (bsz, int64: the batch index of the row's
source sentence, set by the encoder and carried along). Only on the CPU: the check reads
``new_order`` on the host, which on a GPU would stall the step's launches (a synchronisation
per step, what ``tests/test_op_counts.py`` forbids), where the copy itself is cheap.
"""
from typing import Collection, Dict, Mapping, Optional

import torch
from torch import Tensor

SENTENCE = "sentence"  # bsz, int64: which source sentence of the batch each row holds


def sentence_rows(bsz: int, device: torch.device) -> Tensor:
    """An encoder's ``SENTENCE``: row b holds sentence b."""
    return torch.arange(bsz, device=device)


def reads_order_on_host(new_order: Tensor) -> bool:
    """Whether ``reorder_rows`` may read ``new_order``'s values (free on the CPU only)."""
    return new_order.device.type == "cpu"


def rows_keep_their_sentence(state: Mapping[str, Optional[Tensor]], new_order: Tensor) -> bool:
    """Whether ``new_order`` moves every row of ``state`` only among its sentence's rows."""
    sentence = state.get(SENTENCE)
    if sentence is None or new_order.numel() != sentence.numel() or not reads_order_on_host(new_order):
        return False
    return torch.equal(sentence.index_select(0, new_order), sentence)


def reorder_rows(state: Mapping[str, Optional[Tensor]], new_order: Tensor,
                 per_sentence: Collection[str], batch_dims: Optional[Dict[str, int]] = None):
    """``state``'s tensors index-selected by ``new_order`` along their batch dimension (0, or
    ``batch_dims[key]``), except the ``per_sentence`` ones (and ``SENTENCE``) when every row
    keeps its sentence: those are returned as they are (the same values)."""
    batch_dims = batch_dims or {}
    keep = rows_keep_their_sentence(state, new_order)
    return {
        key: value if value is None or (keep and (key in per_sentence or key == SENTENCE))
        else value.index_select(batch_dims.get(key, 0), new_order)
        for key, value in state.items()
    }
