"""RNNsearch (Bahdanau, Cho & Bengio 2014), registered as ``rnnsearch``.

"Neural Machine Translation by Jointly Learning to Align and Translate", ICLR 2015
(arXiv:1409.0473). A bidirectional GRU encoder (section 3.2), a GRU decoder with an
additive alignment model queried with the previous decoder state (section 3.1), and
a deep output with a maxout hidden layer (appendix A.2.2). Modules:
``modules/rnnsearch/encoder.py``, ``modules/rnnsearch/decoder.py``,
``modules/rnnsearch/gru.py``; the attention is the Luong family's
``GlobalAttention(ConcatScore)``. Named architectures at the bottom of the file.
"""
from dataclasses import dataclass, field

import torch.nn as nn
from fairseq.dataclass import ChoiceEnum, FairseqDataclass
from fairseq.models import FairseqEncoderDecoderModel, register_model, register_model_architecture

from ..modules.layers import build_embeddings, init_uniform_, zero_padding_rows_
from ..modules.rnnsearch.decoder import RNNsearchDecoder
from ..modules.rnnsearch.encoder import RNNsearchEncoder
from ..modules.rnnsearch.gru import GRU
from .hub_interface import TranslationHubModel

DEEP_OUTPUT_STATE_CHOICES = ChoiceEnum(["previous", "current"])


@dataclass
class RNNsearchConfig(FairseqDataclass):
    encoder_embed_dim: int = field(default=512, metadata={"help": "source embedding size (paper: 620)"})
    encoder_hidden_size: int = field(
        default=512, metadata={"help": "GRU units per direction (paper: 1000); annotations are twice that"})
    decoder_embed_dim: int = field(default=512, metadata={"help": "target embedding size (paper: 620)"})
    decoder_hidden_size: int = field(default=512, metadata={"help": "decoder GRU units (paper: 1000)"})
    attention_dim: int = field(
        default=512, metadata={"help": "hidden units of the alignment model, n' (paper: 1000)"})
    maxout_dim: int = field(
        default=256, metadata={"help": "maxout units l of the deep output (paper: 500)"})
    maxout_pieces: int = field(default=2, metadata={"help": "units each maxout unit takes the max of"})
    deep_output_state: DEEP_OUTPUT_STATE_CHOICES = field(
        default="previous",
        metadata={"help": "decoder state the deep output reads: s_{i-1} (previous, appendix A.2.2) "
                  "or s_i (current, eq. 4 of the main text)"})
    dropout: float = field(
        default=0.0,
        metadata={"help": "dropout on the source and target embeddings and on the maxout output "
                  "(the paper uses none)"})
    init_uniform: float = field(
        default=0.0,
        metadata={"help": "initialise every parameter ~ U[-a, a]; 0: the paper's initialisation "
                  "(appendix B.1: orthogonal recurrent weights, N(0, 0.001^2) alignment weights, "
                  "zero v_a and biases, N(0, 0.01^2) the rest)"})
    share_decoder_input_output_embed: bool = field(
        default=False, metadata={"help": "tie W_o to the target embeddings (needs --maxout-dim == "
                                         "--decoder-embed-dim)"})
    share_all_embeddings: bool = field(
        default=False, metadata={"help": "share source, target and output embeddings (joint dictionary)"})
    max_source_positions: int = field(default=1024, metadata={"help": "longest source accepted"})
    max_target_positions: int = field(default=1024, metadata={"help": "longest target accepted"})


def bahdanau_init_(model: nn.Module):
    """Bahdanau et al. 2014, appendix B.1: recurrent weight matrices (U, U_z, U_r of every
    GRU) random orthogonal; W_a and U_a ~ N(0, 0.001^2); v_a and all biases zero; every
    other weight matrix (embeddings included) ~ N(0, 0.01^2). Padding rows stay zero."""
    for name, p in model.named_parameters():
        if name.endswith("bias"):
            nn.init.zeros_(p)
        else:
            nn.init.normal_(p, 0.0, 0.01)
    for m in model.modules():
        if isinstance(m, GRU):
            H = m.hidden_size
            for block in (m.U_zr.weight[:H], m.U_zr.weight[H:], m.U.weight):  # U_z, U_r, U
                nn.init.orthogonal_(block)
    score = model.decoder.attention.score
    nn.init.normal_(score.W_q.weight, 0.0, 0.001)  # W_a
    nn.init.normal_(score.W_k.weight, 0.0, 0.001)  # U_a
    nn.init.zeros_(score.v_a.weight)
    zero_padding_rows_(model)


@register_model("rnnsearch", dataclass=RNNsearchConfig)
class RNNsearchModel(TranslationHubModel, FairseqEncoderDecoderModel):
    """Bahdanau et al. (2014) RNNsearch; see the module docstring. ``from_pretrained``: the
    Python interface (``hub_interface.py``)."""

    @classmethod
    def build_model(cls, cfg, task):
        cfg = RNNsearchConfig.from_namespace(cfg)
        src_dict, tgt_dict = task.source_dictionary, task.target_dictionary
        encoder_embed, decoder_embed = build_embeddings(
            src_dict, tgt_dict, cfg.encoder_embed_dim, cfg.decoder_embed_dim, cfg.share_all_embeddings)
        encoder = RNNsearchEncoder(src_dict, encoder_embed, cfg.encoder_hidden_size, cfg.dropout,
                                   cfg.max_source_positions)
        decoder = RNNsearchDecoder(
            tgt_dict, decoder_embed,
            hidden_size=cfg.decoder_hidden_size,
            encoder_output_units=encoder.output_units,
            attention_dim=cfg.attention_dim,
            maxout_dim=cfg.maxout_dim,
            maxout_pieces=cfg.maxout_pieces,
            dropout=cfg.dropout,
            deep_output_state=str(cfg.deep_output_state),
            share_input_output_embed=cfg.share_decoder_input_output_embed or cfg.share_all_embeddings,
            max_target_positions=cfg.max_target_positions,
        )
        model = cls(encoder, decoder)
        if cfg.init_uniform > 0:
            init_uniform_(model, cfg.init_uniform)
        else:
            bahdanau_init_(model)
        return model


# --------------------------------------------------------------------------
# Named architectures: each sets only its differences, then calls the base.


def rnnsearch(args):
    """The base configuration: :class:`RNNsearchConfig`'s defaults (``register_model``
    registers ``--arch rnnsearch`` with them); named variants set their differences."""


@register_model_architecture("rnnsearch", "rnnsearch_wmt")
def rnnsearch_wmt(args):
    """The paper's size (section 4.2, appendix A.2): 620-dim embeddings, 1000 GRU units per
    direction and in the decoder, 1000 alignment units, 500 maxout units."""
    args.encoder_embed_dim = getattr(args, "encoder_embed_dim", 620)
    args.encoder_hidden_size = getattr(args, "encoder_hidden_size", 1000)
    args.decoder_embed_dim = getattr(args, "decoder_embed_dim", 620)
    args.decoder_hidden_size = getattr(args, "decoder_hidden_size", 1000)
    args.attention_dim = getattr(args, "attention_dim", 1000)
    args.maxout_dim = getattr(args, "maxout_dim", 500)
    rnnsearch(args)


@register_model_architecture("rnnsearch", "rnnsearch_tiny")
def rnnsearch_tiny(args):
    """A tiny model for tests and quick checks."""
    args.encoder_embed_dim = getattr(args, "encoder_embed_dim", 16)
    args.encoder_hidden_size = getattr(args, "encoder_hidden_size", 16)
    args.decoder_embed_dim = getattr(args, "decoder_embed_dim", 16)
    args.decoder_hidden_size = getattr(args, "decoder_hidden_size", 16)
    args.attention_dim = getattr(args, "attention_dim", 16)
    args.maxout_dim = getattr(args, "maxout_dim", 8)
    args.dropout = getattr(args, "dropout", 0.1)
    rnnsearch(args)
