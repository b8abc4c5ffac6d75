"""The attention-based NMT model of Luong, Pham & Manning (2015), registered as ``luong_lstm``.

"Effective Approaches to Attention-based Neural Machine Translation",
EMNLP 2015. Stacked LSTM encoder-decoder (section 2) with global (3.1) or
local (3.2) attention, input feeding (3.3), source reversal and dropout
(section 4.1). Named architectures at the bottom of the file.
"""
from dataclasses import dataclass, field

from fairseq.dataclass import ChoiceEnum, FairseqDataclass
from fairseq.models import (
    FairseqEncoderDecoderModel,
    register_model,
    register_model_architecture,
)

from ..errors import ConfigError
from ..modules.layers import build_embeddings, init_uniform_
from ..modules.luong.attention import build_attention
from ..modules.luong.decoder import LuongDecoder
from ..modules.luong.encoder import LuongEncoder
from ..modules.luong.scores import build_score
from ..paper_settings import luong2015
from .hub_interface import TranslationHubModel

ATTENTION_TYPE_CHOICES = ChoiceEnum(["global", "local_m", "local_p"])
ATTENTION_SCORE_CHOICES = ChoiceEnum(["dot", "general", "concat", "location"])


@dataclass
class LuongLSTMConfig(FairseqDataclass):
    encoder_embed_dim: int = field(default=512, metadata={"help": "source embedding size"})
    encoder_hidden_size: int = field(
        default=512, metadata={"help": "encoder LSTM cells per layer (per direction)"}
    )
    encoder_layers: int = field(default=2, metadata={"help": "encoder LSTM layers"})
    encoder_bidirectional: bool = field(
        default=False, metadata={"help": "bidirectional encoder (the paper's is unidirectional)"}
    )
    decoder_embed_dim: int = field(default=512, metadata={"help": "target embedding size"})
    decoder_hidden_size: int = field(default=512, metadata={"help": "decoder LSTM cells per layer"})
    decoder_layers: int = field(
        default=2, metadata={"help": "decoder LSTM layers (must equal --encoder-layers)"}
    )
    dropout: float = field(
        default=0.2,
        metadata={
            "help": "dropout on embeddings, between stacked layers and before the "
            "softmax layer (Zaremba et al. 2015; Luong et al. 2015 section 4.1)"
        },
    )
    encoder_memory_dropout: float = field(
        default=0.0,
        metadata={
            "help": "dropout on the encoder's top-layer outputs, i.e. on the attention "
            "memory h̄_s (not in the paper nor the authors' code; fairseq's lstm does it)"
        },
    )
    attention_type: ATTENTION_TYPE_CHOICES = field(
        default="global", metadata={"help": "global (3.1), local_m or local_p (3.2)"}
    )
    attention_score: ATTENTION_SCORE_CHOICES = field(
        default="general", metadata={"help": "alignment score (eq. 8): dot, general, concat, location"}
    )
    no_attention: bool = field(
        default=False, metadata={"help": "no attention: the paper's non-attentional 'Base' model"}
    )
    local_window: int = field(
        default=luong2015.LOCAL_WINDOW,
        metadata={"help": "D: local attention looks at [p_t - D, p_t + D] (section 3.2)"},
    )
    location_max_len: int = field(
        default=100,
        metadata={
            "help": "location score: number of source positions W_a scores (footnote 6); "
            "positions at or past it get zero weight"
        },
    )
    no_input_feed: bool = field(
        default=False, metadata={"help": "do not feed h~_{t-1} into the next step (section 3.3)"}
    )
    reverse_source: bool = field(
        default=False, metadata={"help": "reverse each source sentence's words inside the model"}
    )
    init_uniform: float = field(
        default=luong2015.INIT_UNIFORM,
        metadata={
            "help": "initialise every parameter ~ U[-a, a] (Luong et al. 2015, section 4.1: "
            "0.1); 0 keeps PyTorch's"
        },
    )
    no_output_bias: bool = field(
        default=False,
        metadata={
            "help": "softmax(W_s h~_t) exactly as eq. 6, without a bias b_s; by default W_s "
            "has one, as fairseq's lstm (the paper-size archs *_wmt_en_de set this)"
        },
    )
    share_decoder_input_output_embed: bool = field(
        default=False, metadata={"help": "tie W_s to the decoder input embeddings"}
    )
    share_all_embeddings: bool = field(
        default=False, metadata={"help": "share encoder, decoder and output embeddings (joint dict)"}
    )
    max_source_positions: int = field(default=1024, metadata={"help": "longest source accepted"})
    max_target_positions: int = field(default=1024, metadata={"help": "longest target accepted"})


@register_model("luong_lstm", dataclass=LuongLSTMConfig)
class LuongLSTMModel(TranslationHubModel, FairseqEncoderDecoderModel):
    """Luong et al. (2015) encoder-decoder; see the module docstring. ``from_pretrained``:
    the Python interface (``hub_interface.py``)."""

    @classmethod
    def build_model(cls, cfg, task):
        # Named archs reach us as an argparse Namespace holding only what the
        # command line and the arch function set: fill the rest from the dataclass.
        cfg = LuongLSTMConfig.from_namespace(cfg)
        if cfg.encoder_layers != cfg.decoder_layers:
            raise ConfigError(
                f"--encoder-layers ({cfg.encoder_layers}) must equal --decoder-layers "
                f"({cfg.decoder_layers}): each decoder layer starts from its encoder layer"
            )
        src_dict, tgt_dict = task.source_dictionary, task.target_dictionary
        encoder_embed, decoder_embed = build_embeddings(
            src_dict, tgt_dict, cfg.encoder_embed_dim, cfg.decoder_embed_dim, cfg.share_all_embeddings)
        encoder = LuongEncoder(
            src_dict,
            encoder_embed,
            hidden_size=cfg.encoder_hidden_size,
            num_layers=cfg.encoder_layers,
            dropout=cfg.dropout,
            memory_dropout=cfg.encoder_memory_dropout,
            bidirectional=cfg.encoder_bidirectional,
            reverse_source=cfg.reverse_source,
            max_source_positions=cfg.max_source_positions,
        )
        attention = None
        if not cfg.no_attention:
            score = build_score(
                str(cfg.attention_score),
                cfg.decoder_hidden_size,
                encoder.output_units,
                cfg.location_max_len,
            )
            attention = build_attention(
                str(cfg.attention_type), score, cfg.local_window, cfg.decoder_hidden_size
            )
        decoder = LuongDecoder(
            tgt_dict,
            decoder_embed,
            hidden_size=cfg.decoder_hidden_size,
            num_layers=cfg.decoder_layers,
            dropout=cfg.dropout,
            encoder_output_units=encoder.output_units,
            attention=attention,
            input_feed=not cfg.no_input_feed,
            share_input_output_embed=cfg.share_decoder_input_output_embed or cfg.share_all_embeddings,
            max_target_positions=cfg.max_target_positions,
            output_bias=not cfg.no_output_bias,
        )
        model = cls(encoder, decoder)
        if cfg.init_uniform > 0:
            init_uniform_(model, cfg.init_uniform)
        return model

    def aligns_input_word(self) -> bool:
        """Luong et al. 2015, footnote 14: the alignment a_t computed at step t (input
        y_{t-1}, prediction y_t) is that of the INPUT word y_{t-1} for content-based
        scores (dot, general, concat) and of the predicted y_t for the location score.
        fairseq's --print-alignment always reads it as y_t's. No attention: False."""
        attention = self.decoder.attention
        return attention is not None and attention.score.content_based


# --------------------------------------------------------------------------
# Named architectures: each sets only its differences, then calls the base.


def luong_lstm(args):
    """The base configuration: global attention, general score, input feeding.

    Its values are :class:`LuongLSTMConfig`'s defaults; ``register_model``
    already registers ``--arch luong_lstm`` with them, so this base function
    has nothing to set. Named variants set their differences, then call it.
    """


@register_model_architecture("luong_lstm", "luong_tiny")
def luong_tiny(args):
    """A tiny model for tests and quick checks."""
    args.encoder_embed_dim = getattr(args, "encoder_embed_dim", 16)
    args.encoder_hidden_size = getattr(args, "encoder_hidden_size", 16)
    args.decoder_embed_dim = getattr(args, "decoder_embed_dim", 16)
    args.decoder_hidden_size = getattr(args, "decoder_hidden_size", 16)
    args.dropout = getattr(args, "dropout", 0.1)
    luong_lstm(args)


@register_model_architecture("luong_lstm", "luong_base")
def luong_base(args):
    """Table 1 "Base": no attention (and so nothing to feed), no dropout, source not
    reversed (the rows below it add reversal, dropout, attention, ...). The family's
    size (the paper's is 4 x 1000)."""
    args.no_attention = getattr(args, "no_attention", True)
    args.no_input_feed = getattr(args, "no_input_feed", True)
    args.dropout = getattr(args, "dropout", 0.0)
    luong_lstm(args)


@register_model_architecture("luong_lstm", "luong_global_dot")
def luong_global_dot(args):
    args.attention_score = getattr(args, "attention_score", "dot")
    luong_lstm(args)


@register_model_architecture("luong_lstm", "luong_global_general")
def luong_global_general(args):
    args.attention_score = getattr(args, "attention_score", "general")
    luong_lstm(args)


@register_model_architecture("luong_lstm", "luong_global_concat")
def luong_global_concat(args):
    args.attention_score = getattr(args, "attention_score", "concat")
    luong_lstm(args)


@register_model_architecture("luong_lstm", "luong_global_location")
def luong_global_location(args):
    args.attention_score = getattr(args, "attention_score", "location")
    luong_lstm(args)


@register_model_architecture("luong_lstm", "luong_localm")
def luong_localm(args):
    """local-m with the general score (section 3.2)."""
    args.attention_type = getattr(args, "attention_type", "local_m")
    args.attention_score = getattr(args, "attention_score", "general")
    luong_lstm(args)


@register_model_architecture("luong_lstm", "luong_localp")
def luong_localp(args):
    """local-p with the general score (section 3.2). The paper's best single model
    (Table 1, 20.9 BLEU with unk replacement) is this at its size, 4 x 1000 with a
    reversed source and dropout: ``luong_localp_wmt_en_de``."""
    args.attention_type = getattr(args, "attention_type", "local_p")
    args.attention_score = getattr(args, "attention_score", "general")
    luong_lstm(args)


def _paper_size(args):
    """Section 4.1 (``paper_settings/luong2015.py``): 4 layers x 1000 cells, 1000-dim embeddings,
    dropout 0.2, reversed source, softmax(W_s h~_t) without a bias (eq. 6); the uniform
    [-0.1, 0.1] initialisation and D = 10 are every arch's defaults."""
    for side in ("encoder", "decoder"):
        setattr(args, f"{side}_embed_dim", getattr(args, f"{side}_embed_dim", luong2015.UNITS))
        setattr(args, f"{side}_hidden_size", getattr(args, f"{side}_hidden_size", luong2015.UNITS))
        setattr(args, f"{side}_layers", getattr(args, f"{side}_layers", luong2015.LAYERS))
    args.dropout = getattr(args, "dropout", luong2015.DROPOUT)
    args.reverse_source = getattr(args, "reverse_source", True)
    args.no_output_bias = getattr(args, "no_output_bias", True)


@register_model_architecture("luong_lstm", "luong_global_general_wmt_en_de")
def luong_global_general_wmt_en_de(args):
    _paper_size(args)
    luong_global_general(args)


@register_model_architecture("luong_lstm", "luong_localp_wmt_en_de")
def luong_localp_wmt_en_de(args):
    _paper_size(args)
    args.local_window = getattr(args, "local_window", luong2015.LOCAL_WINDOW)
    luong_localp(args)
