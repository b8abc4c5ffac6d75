"""The bidirectional RNN encoder of RNNsearch (Bahdanau, Cho & Bengio 2014, section 3.2,
appendix A.2.1).

A forward GRU reads x_1 .. x_Tx, a backward GRU reads x_Tx .. x_1; the annotation of
word j is h_j = [forward h_j; backward h_j]. Both directions run in one loop over the
source positions (one batched product per gate stage for both), the input products
for all positions at once, and, as in the decoders, only the sentences still going at
each position (``steps/active_rows.py``). The loop runs on copies of the sentences with the
real tokens first and the padding after them (``source_order``); the annotations are
then put back at each token's original padded position, so ``encoder_out`` keeps the
input's padding side (fairseq pads sources on the left by default) and has the layout
of ``LuongEncoder``'s: the attention modules, ``--print-alignment`` and ensembles with
Luong models work unchanged.
"""
from typing import Dict, Optional

import torch
import torch.nn as nn
import torch.nn.functional as F
from fairseq.models import FairseqEncoder
from torch import Tensor

from ..dropout import Dropout
from ..luong.encoder import source_order
from ..steps.active_rows import ActiveRows
from ..steps.beam_rows import SENTENCE, reorder_rows, sentence_rows
from .gru import GRU, gru_update


class RNNsearchEncoder(FairseqEncoder):
    """Embeddings -> dropout -> bidirectional GRU (one layer, as in the paper).

    ``encoder_out`` is a dict of batch-first tensors (all reordered by
    ``reorder_encoder_out``):

    * ``encoder_out``: bsz x srclen x 2H, the annotations h_j at their original padded
      positions (zeros on padding);
    * ``encoder_padding_mask``: bsz x srclen;
    * ``backward_first``: bsz x H, the backward state at the first word, backward h_1
      (the decoder's s_0 = tanh(W_s backward h_1));
    * ``src_start`` / ``src_length``: bsz, first real position and length;
    * ``sentence``: bsz, the row's sentence (``steps/beam_rows.py``).
    """

    def __init__(self, dictionary, embed_tokens: nn.Embedding, hidden_size: int, dropout: float,
                 max_source_positions: int):
        super().__init__(dictionary)
        self.embed_tokens = embed_tokens
        self.padding_idx = embed_tokens.padding_idx
        self.eos_idx = dictionary.eos()
        self.hidden_size = hidden_size
        self.max_source_positions = max_source_positions
        self.dropout_in = Dropout(dropout, module_name=self.__class__.__name__)
        self.forward_gru = GRU(embed_tokens.embedding_dim, hidden_size)
        self.backward_gru = GRU(embed_tokens.embedding_dim, hidden_size)
        self.output_units = 2 * hidden_size

    def forward(self, src_tokens: Tensor, src_lengths: Optional[Tensor] = None, **kwargs):
        bsz, srclen = src_tokens.size()
        H = self.hidden_size
        # copies with the real tokens first and the padding after them (right padding, whatever
        # the input's padding side); order[b, j] = the original padded position of slot j
        order, length, start = source_order(src_tokens, self.padding_idx, self.eos_idx, reverse=False)
        x = self.dropout_in(self.embed_tokens(src_tokens.gather(1, order)))  # bsz x srclen x E
        # the backward GRU reads each sentence from its last token to its first:
        # slot j holds token length - 1 - j (an involution on the real slots)
        j = torch.arange(srclen, device=src_tokens.device).unsqueeze(0)  # 1 x srclen
        rev = torch.where(j < length.unsqueeze(1), length.unsqueeze(1) - 1 - j, j)  # bsz x srclen
        # input products of both directions for every position at once
        fwd = F.linear(x, self.forward_gru.W.weight, self.forward_gru.W.bias)  # bsz x srclen x 3H
        bwd = F.linear(x, self.backward_gru.W.weight, self.backward_gru.W.bias)
        bwd = bwd.gather(1, rev.unsqueeze(2).expand(-1, -1, 3 * H))  # in reading order
        x_gates = torch.stack((fwd, bwd), 2)  # bsz x srclen x 2 x 3H

        active_rows = ActiveRows(bsz, srclen, length if bool((length < srclen).any()) else None)
        x_gates = active_rows.per_step(active_rows.sort(x_gates).transpose(0, 1))  # step t: rows x 2 x 3H
        U_zr_t, U_t = (torch.stack(w) for w in zip(self.forward_gru.recurrent_weights(),
                                                   self.backward_gru.recurrent_weights()))
        h = x.new_zeros(bsz, 2, H)  # both directions start from zeros
        outs = []
        for t in active_rows.steps():
            h = active_rows.at_step(t, h)  # rows x 2 x H
            # directions as the batch of the products: 2 x rows x ...
            h = gru_update(x_gates[t].transpose(0, 1), h.transpose(0, 1), U_zr_t, U_t).transpose(0, 1)
            outs.append(h)
        out = active_rows.unpack(active_rows.pack(outs))  # bsz x srclen x 2 x H, zeros on padding
        forward_h, backward_h = out.unbind(2)  # bsz x srclen x H each
        backward_h = backward_h.gather(1, rev.unsqueeze(2).expand(-1, -1, H))  # back to word order
        annotations = torch.cat((forward_h, backward_h), 2)  # bsz x srclen x 2H, real tokens first
        # back to original positions: position order[b, j] receives slot j
        inverse = torch.empty_like(order).scatter_(1, order, j.expand(bsz, -1))
        annotations = annotations.gather(1, inverse.unsqueeze(2).expand(-1, -1, 2 * H))
        return {
            "encoder_out": annotations,  # bsz x srclen x 2H
            "encoder_padding_mask": src_tokens.eq(self.padding_idx),  # bsz x srclen
            "backward_first": backward_h[:, 0],  # bsz x H: backward h_1, after the whole sentence
            "src_start": start,  # bsz
            "src_length": length,  # bsz
            SENTENCE: sentence_rows(bsz, src_tokens.device),  # bsz: beam search's reorder reads it
        }

    def reorder_encoder_out(self, encoder_out: Dict[str, Tensor], new_order: Tensor):
        # everything here is its sentence's (steps/beam_rows.py)
        return reorder_rows(encoder_out, new_order, per_sentence=encoder_out)

    def max_positions(self):
        return self.max_source_positions
