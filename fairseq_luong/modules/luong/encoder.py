"""Stacked LSTM encoder of Luong, Pham & Manning (2015), section 2, with source reversal.

The LSTM runs on copies of the sentences with the real tokens first and the
padding after them (and, with ``reverse_source``, the words reversed); its
outputs are then put back at each token's ORIGINAL padded position, whatever
the padding side. Everything downstream (attention, local windows, alignments
printed by fairseq) therefore sees the source in its original order and layout.
"""
from typing import Dict, Optional, Tuple

import torch
import torch.nn as nn
from fairseq.models import FairseqEncoder
from torch import Tensor

from ..dropout import Dropout
from ..layers import LSTM
from ..steps.beam_rows import SENTENCE, reorder_rows, sentence_rows


def source_order(
    src_tokens: Tensor, pad: int, eos: int, reverse: bool
) -> Tuple[Tensor, Tensor, Tensor]:
    """Where each token of the LSTM's input comes from.

    Returns ``order`` (bsz x srclen): the LSTM reads ``src_tokens.gather(1,
    order)``, i.e. slot j holds original padded position ``order[b, j]``. Real
    tokens come first (right padding, as ``pack_padded_sequence`` needs); with
    ``reverse`` the words are reversed and a final EOS stays last (the
    paper's "reverse" reverses the sentence, not its terminator). ``order`` is
    a permutation of 0..srclen-1 in every row. Also returns each sentence's
    length (incl. EOS) and the padded index of its first token, computed from
    the padding mask (never from the padding side).
    """
    bsz, srclen = src_tokens.size()
    real = src_tokens.ne(pad)  # bsz x srclen
    length = real.sum(1)  # bsz
    if bool((length == 0).any()):
        raise ValueError("a source sentence in the batch has no tokens (not even EOS)")
    start = real.int().argmax(1)  # bsz: first real position
    j = torch.arange(srclen, device=src_tokens.device).unsqueeze(0)  # 1 x srclen
    if reverse:
        last_tok = src_tokens.gather(1, (start + length - 1).unsqueeze(1)).squeeze(1)
        n_words = (length - last_tok.eq(eos).long()).unsqueeze(1)  # bsz x 1
        within = torch.where(j < n_words, n_words - 1 - j, j)
    else:
        within = j.expand(bsz, -1)
    # pad slots j >= length take the padded positions outside [start, start + length)
    k = j - length.unsqueeze(1)
    pad_pos = torch.where(k < start.unsqueeze(1), k, k + length.unsqueeze(1))
    order = torch.where(j < length.unsqueeze(1), start.unsqueeze(1) + within, pad_pos)
    return order, length, start


class LuongEncoder(FairseqEncoder):
    """Embeddings -> dropout -> stacked (optionally bidirectional) LSTM, dropout between
    layers (Luong et al. 2015, section 4.1; Zaremba et al. 2015).

    The top layer's outputs, the attention memory h̄_s, are not dropped out (neither the
    paper nor the authors' code does); ``memory_dropout`` > 0 drops them as fairseq's
    ``lstm`` does.

    ``encoder_out`` is a dict of batch-first tensors (all reordered by
    ``reorder_encoder_out``):

    * ``encoder_out``: bsz x srclen x C, h̄_s at original padded positions
      (zeros on padding);
    * ``encoder_padding_mask``: bsz x srclen;
    * ``final_hiddens`` / ``final_cells``: layers x bsz x C, each layer's last
      state (the decoder's initial state);
    * ``src_start`` / ``src_length``: bsz, first real position and length.
    """

    def __init__(
        self,
        dictionary,
        embed_tokens: nn.Embedding,
        hidden_size: int,
        num_layers: int,
        dropout: float,
        memory_dropout: float,
        bidirectional: bool,
        reverse_source: bool,
        max_source_positions: int,
    ):
        super().__init__(dictionary)
        self.embed_tokens = embed_tokens
        self.padding_idx = embed_tokens.padding_idx
        self.eos_idx = dictionary.eos()
        self.num_layers = num_layers
        self.bidirectional = bidirectional
        self.reverse_source = reverse_source
        self.max_source_positions = max_source_positions
        self.dropout_in = Dropout(dropout, module_name=self.__class__.__name__)
        self.dropout_memory = Dropout(memory_dropout, module_name=self.__class__.__name__)
        # dropout between stacked layers (Zaremba et al. 2015)
        self.lstm = LSTM(
            embed_tokens.embedding_dim,
            hidden_size,
            num_layers=num_layers,
            dropout=dropout if num_layers > 1 else 0.0,
            bidirectional=bidirectional,
            batch_first=True,
        )
        self.output_units = hidden_size * (2 if bidirectional else 1)

    def forward(self, src_tokens: Tensor, src_lengths: Optional[Tensor] = None, **kwargs):
        bsz, srclen = src_tokens.size()
        order, length, start = source_order(
            src_tokens, self.padding_idx, self.eos_idx, self.reverse_source
        )
        lstm_tokens = src_tokens.gather(1, order)  # bsz x srclen, right-padded
        x = self.dropout_in(self.embed_tokens(lstm_tokens))  # bsz x srclen x E
        packed = nn.utils.rnn.pack_padded_sequence(
            x, length.cpu(), batch_first=True, enforce_sorted=False
        )
        packed_out, (h_n, c_n) = self.lstm(packed)
        out, _ = nn.utils.rnn.pad_packed_sequence(
            packed_out, batch_first=True, total_length=srclen
        )  # bsz x srclen x C, LSTM order, zeros on padding
        # back to original positions: position order[b, j] receives slot j
        inverse = torch.empty_like(order).scatter_(
            1, order, torch.arange(srclen, device=order.device).expand(bsz, -1)
        )
        out = out.gather(1, inverse.unsqueeze(2).expand(-1, -1, out.size(2)))
        out = self.dropout_memory(out)  # p = 0 by default: the paper's placement
        if self.bidirectional:
            h_n, c_n = self._combine_directions(h_n), self._combine_directions(c_n)
        return {
            "encoder_out": out,  # bsz x srclen x C
            "encoder_padding_mask": src_tokens.eq(self.padding_idx),  # bsz x srclen
            "final_hiddens": h_n,  # layers x bsz x C
            "final_cells": c_n,  # layers x bsz x C
            "src_start": start,  # bsz
            "src_length": length,  # bsz
            SENTENCE: sentence_rows(bsz, src_tokens.device),  # bsz: beam search's reorder reads it
        }

    def _combine_directions(self, state: Tensor) -> Tensor:
        # (layers*2) x bsz x H -> layers x 2 x bsz x H -> layers x bsz x 2H
        layers2, bsz, hidden = state.size()
        state = state.view(self.num_layers, 2, bsz, hidden).transpose(1, 2)
        return state.reshape(self.num_layers, bsz, 2 * hidden)

    def reorder_encoder_out(self, encoder_out: Dict[str, Tensor], new_order: Tensor):
        # everything here is its sentence's (steps/beam_rows.py)
        return reorder_rows(encoder_out, new_order, per_sentence=encoder_out,
                            batch_dims={"final_hiddens": 1, "final_cells": 1})

    def max_positions(self):
        return self.max_source_positions
