"""Module factories with fairseq's initialisation idiom (cf. ``fairseq/models/lstm.py``).

The factories keep PyTorch's initialisation, except embeddings (N(0, d^-1/2),
padding row zero, as fairseq's Transformer). Luong et al. (2015, section 4.1)
initialise *every* parameter uniformly in [-0.1, 0.1]: ``init_uniform_`` does that
for a whole model, by default for every Luong architecture (``--init-uniform 0.1``;
0 keeps the factories' initialisation). ``build_embeddings`` makes (and shares) the
source and target embeddings of every recurrent family.
"""
from typing import Tuple

import torch.nn as nn

from ..errors import ConfigError
from .autocast_safe_lstm import AutocastSafeLSTM


def Linear(in_features, out_features, bias=True):
    return nn.Linear(in_features, out_features, bias=bias)


def Embedding(num_embeddings, embedding_dim, padding_idx):
    m = nn.Embedding(num_embeddings, embedding_dim, padding_idx=padding_idx)
    nn.init.normal_(m.weight, mean=0, std=embedding_dim**-0.5)
    zero_padding_rows_(m)
    return m


def build_embeddings(src_dict, tgt_dict, encoder_embed_dim: int, decoder_embed_dim: int,
                     share_all: bool) -> Tuple[nn.Embedding, nn.Embedding]:
    """The encoder's and the decoder's embeddings (source first); one module for both with
    ``--share-all-embeddings``, which needs a joint dictionary and equal sizes."""
    encoder_embed = Embedding(len(src_dict), encoder_embed_dim, src_dict.pad())
    if not share_all:
        return encoder_embed, Embedding(len(tgt_dict), decoder_embed_dim, tgt_dict.pad())
    if src_dict != tgt_dict:
        raise ConfigError(
            "--share-all-embeddings requires a joint dictionary (fairseq-preprocess "
            "--joined-dictionary); these data have one dictionary per language"
        )
    if encoder_embed_dim != decoder_embed_dim:
        raise ConfigError("--share-all-embeddings requires equal embedding sizes")
    return encoder_embed, encoder_embed


def zero_padding_rows_(module: nn.Module):
    """Every embedding's padding row set to zero (it never gets a gradient)."""
    for m in module.modules():
        if isinstance(m, nn.Embedding) and m.padding_idx is not None:
            nn.init.constant_(m.weight[m.padding_idx], 0)


def LSTM(input_size, hidden_size, **kwargs):
    return AutocastSafeLSTM(input_size, hidden_size, **kwargs)


def init_uniform_(module: nn.Module, scale: float):
    """Luong et al. 2015, section 4.1: all parameters ~ U[-scale, scale].

    An LSTM gate has one bias in the paper but two in PyTorch (b_ih + b_hh, summed):
    b_ih is drawn and b_hh set to zero, so that the bias the cell sees is
    U[-scale, scale] and not the triangular sum of two draws on [-2 scale, 2 scale].
    Embedding padding rows are set back to zero.
    """
    for p in module.parameters():
        nn.init.uniform_(p, -scale, scale)
    for m in module.modules():
        if isinstance(m, nn.LSTM) and m.bias:
            for name, p in m.named_parameters():
                if name.startswith("bias_hh"):
                    nn.init.zeros_(p)
    zero_padding_rows_(module)
