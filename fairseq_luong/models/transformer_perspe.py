"""Transformer with a choice of positions on each side, including perSPE.

Oka, Tanaka & Nagata (NLP2022, "英日翻訳のための Positional Encoding を用いた
正則化手法") perturb the decoder's sinusoidal positions during training by one
random integer offset per target phrase (eq. 3-4). This model is fairseq's
``TransformerModel`` with its encoder and decoder built by our factory
methods, each taking ``--encoder-pos`` / ``--decoder-pos`` from:

* ``spe``    fairseq's sinusoidal positions (Vaswani et al. 2017);
* ``none``   no positions at all;
* ``rpe``    no absolute positions; every self-attention adds a learned T5
  bias per head and relative-position bucket to its logits (Table 1's RPE),
  from one table per encoder / decoder as in T5 (``--rpe-per-layer``: one
  table per layer, as checkpoints saved before that option have);
* ``perspe`` sinusoidal positions that the ``perspe_label_smoothed_cross_entropy``
  criterion perturbs in training (plain SPE in validation and generation).

The criterion draws the offsets and hands them to :meth:`TransformerPerSPEModel.forward`
as ``src_position_offsets`` / ``tgt_position_offsets`` (bsz x len, aligned with
``src_tokens`` / ``prev_output_tokens``, in the batch's ``net_input``), which passes them to
the encoder's and the decoder's ``forward`` as ``position_offsets``: the model is a function
of its inputs, with no state in between. Without offsets (validation, fairseq-generate,
fairseq-interactive, which never pass any) encoder and decoder run fairseq's own forward;
incremental decoding refuses them.
"""
import logging
from typing import Any, Dict, List, Optional

import torch
from fairseq.distributed import fsdp_wrap
from fairseq.models import register_model, register_model_architecture
from fairseq.models.transformer import (
    TransformerConfig,
    TransformerDecoderBase,
    TransformerEncoderBase,
    TransformerModel,
)
from fairseq.models.transformer import base_architecture as transformer_base_architecture
from fairseq.modules.checkpoint_activations import checkpoint_wrapper
from torch import Tensor

from ..errors import ConfigError
from ..modules.perspe.positions import (
    PerturbedSinusoidalPositionalEmbedding,
)
from ..modules.perspe.relative_position_bias import (
    RelativePositionBias,
    RelativePositionDecoderLayer,
    RelativePositionEncoderLayer,
)
from .hub_interface import TranslationHubModel

logger = logging.getLogger(__name__)

POSITION_CHOICES = ("spe", "none", "rpe", "perspe")


@register_model("transformer_perspe")
class TransformerPerSPEModel(TranslationHubModel, TransformerModel):
    """Transformer whose encoder and decoder positions are spe | none | rpe | perspe.
    ``from_pretrained``: the Python interface (``hub_interface.py``)."""

    @staticmethod
    def add_args(parser):
        """Add model-specific arguments to the parser."""
        # no defaults here: the named architectures set them (fairseq idiom)
        TransformerModel.add_args(parser)
        parser.add_argument("--encoder-pos", choices=POSITION_CHOICES,
                            help="source positions: spe (sinusoidal), none, rpe "
                                 "(T5 relative bias) or perspe (sinusoidal, "
                                 "perturbed in training by the perspe criterion)")
        parser.add_argument("--decoder-pos", choices=POSITION_CHOICES,
                            help="target positions, same choices as --encoder-pos")
        parser.add_argument("--rpe-num-buckets", type=int, metavar="N",
                            help="relative-position buckets per rpe attention "
                                 "(encoder: half before, half after the query)")
        parser.add_argument("--rpe-max-distance", type=int, metavar="N",
                            help="rpe distances from N on share the last bucket")
        parser.add_argument("--rpe-per-layer", action="store_true",
                            help="rpe: one bias table per self-attention layer instead "
                                 "of T5's one table shared by the layers of each side")

    @classmethod
    def build_model(cls, args, task):
        """Build a new model instance."""
        # make sure all arguments are present in older models
        base_architecture(args)
        for side in ("encoder", "decoder"):
            if getattr(args, f"{side}_pos") not in POSITION_CHOICES:
                raise ConfigError(
                    f"--{side}-pos must be one of {', '.join(POSITION_CHOICES)}"
                )
            if getattr(args, f"{side}_learned_pos", False):
                raise ConfigError(
                    f"transformer_perspe sets positions with --{side}-pos; "
                    f"--{side}-learned-pos is not supported"
                )
        if args.no_token_positional_embeddings:
            raise ConfigError(
                "transformer_perspe: use --encoder-pos none --decoder-pos none "
                "instead of --no-token-positional-embeddings"
            )
        return super().build_model(args, task)

    @classmethod
    def build_encoder(cls, args, src_dict, embed_tokens):
        cfg = TransformerConfig.from_namespace(args)
        return PerSPETransformerEncoder(cfg, src_dict, embed_tokens)

    @classmethod
    def build_decoder(cls, args, tgt_dict, embed_tokens):
        cfg = TransformerConfig.from_namespace(args)
        return PerSPETransformerDecoder(
            cfg, tgt_dict, embed_tokens, no_encoder_attn=cfg.no_cross_attention
        )

    def forward(
        self,
        src_tokens,
        src_lengths,
        prev_output_tokens,
        return_all_hiddens: bool = True,
        features_only: bool = False,
        alignment_layer: Optional[int] = None,
        alignment_heads: Optional[int] = None,
        src_position_offsets: Optional[Tensor] = None,
        tgt_position_offsets: Optional[Tensor] = None,
    ):
        """fairseq's Transformer forward (``TransformerModelBase.forward``), with offsets.

        ``src_position_offsets`` (bsz x src_len, aligned with ``src_tokens``)
        and ``tgt_position_offsets`` (bsz x tgt_len, aligned with
        ``prev_output_tokens``) are integer offsets added to the positions of
        a perspe side (Oka et al. 2022, eq. 3-4); None keeps plain positions.
        """
        encoder_out = self.encoder(
            src_tokens, src_lengths=src_lengths, return_all_hiddens=return_all_hiddens,
            position_offsets=src_position_offsets,
        )
        return self.decoder(
            prev_output_tokens,
            encoder_out=encoder_out,
            features_only=features_only,
            alignment_layer=alignment_layer,
            alignment_heads=alignment_heads,
            src_lengths=src_lengths,
            return_all_hiddens=return_all_hiddens,
            position_offsets=tgt_position_offsets,
        )


def check_offsets(module, offsets: Tensor, side: str):
    """Offsets are for a perspe side only."""
    if not module.perturbs_positions:
        raise ValueError(
            f"position offsets were given for the {side}, whose positions are "
            f"not perspe (--{side}-pos {module.pos})"
        )


def build_positions(pos, max_positions, embed_dim, padding_idx, default):
    """The ``embed_positions`` module for one side; ``default`` is fairseq's SPE."""
    if pos == "spe":
        return default
    if pos == "perspe":
        return PerturbedSinusoidalPositionalEmbedding(
            embed_dim, padding_idx, init_size=max_positions + padding_idx + 1
        )
    return None  # none, rpe: no absolute positions


def use_relative_position_table(side, layer, cfg, num_heads, bidirectional):
    """Give ``layer``'s self-attention T5's table, shared by ``side``'s layers, or its own.

    The shared table is ``side.relative_position_bias`` (made with the first
    layer: fairseq builds the layers inside ``side.__init__``); with
    ``--rpe-per-layer`` each layer's attention holds one.
    """
    def new_table():
        return RelativePositionBias(num_heads, cfg.rpe_num_buckets, cfg.rpe_max_distance,
                                    bidirectional)

    if cfg.rpe_per_layer:
        layer.self_attn.use_table(new_table(), own=True)
        return
    if not hasattr(side, "relative_position_bias"):
        side.relative_position_bias = new_table()
    layer.self_attn.use_table(side.relative_position_bias, own=False)


def load_per_layer_tables(side, state_dict, name):
    """Let ``side`` load a state dict with one rpe table per layer although built shared.

    Checkpoints saved before ``--rpe-per-layer`` existed (and the T5 shared
    table became the default) hold a table in every layer; their args cannot
    tell, because fairseq applies the architecture's defaults before building.
    """
    key = f"{name}.layers.0.self_attn.relative_position_bias.relative_attention_bias.weight"
    shared = getattr(side, "relative_position_bias", None)
    if key not in state_dict or shared is None:
        return
    for layer in side.layers:
        table = RelativePositionBias(shared.num_heads, shared.num_buckets, shared.max_distance,
                                     shared.bidirectional)
        layer.self_attn.use_table(table.to(shared.relative_attention_bias.weight), own=True)
    del side.relative_position_bias
    logger.info(f"{name}: this checkpoint has one rpe table per layer (as with --rpe-per-layer)")


def wrap_layer(layer, cfg):
    """What fairseq's ``build_{encoder,decoder}_layer`` do to a fresh layer."""
    checkpoint = cfg.checkpoint_activations
    if checkpoint:
        layer = checkpoint_wrapper(layer, offload_to_cpu=cfg.offload_activations)
    min_params_to_wrap = cfg.min_params_to_wrap if not checkpoint else 0
    return fsdp_wrap(layer, min_num_params=min_params_to_wrap)


class PerSPETransformerEncoder(TransformerEncoderBase):
    """fairseq's encoder with positions chosen by ``--encoder-pos``."""

    def __init__(self, cfg, dictionary, embed_tokens, return_fc=False):
        super().__init__(cfg, dictionary, embed_tokens, return_fc=return_fc)
        self.pos = cfg.encoder_pos
        self.perturbs_positions = self.pos == "perspe"
        self.embed_positions = build_positions(
            self.pos, cfg.max_source_positions, embed_tokens.embedding_dim,
            self.padding_idx, default=self.embed_positions,
        )

    def forward(self, src_tokens, src_lengths: Optional[Tensor] = None,
                return_all_hiddens: bool = False, token_embeddings: Optional[Tensor] = None,
                position_offsets: Optional[Tensor] = None):
        """fairseq's encoder forward; ``position_offsets`` (bsz x src_len, aligned with
        ``src_tokens``) perturb the perspe positions. Without them: fairseq's own code."""
        if position_offsets is None:
            return super().forward(src_tokens, src_lengths, return_all_hiddens, token_embeddings)
        check_offsets(self, position_offsets, "encoder")
        return self._forward_perturbed(src_tokens, return_all_hiddens, token_embeddings, position_offsets)

    def _forward_perturbed(self, src_tokens, return_all_hiddens, token_embeddings, position_offsets):
        """fairseq's ``TransformerEncoderBase.forward_scriptable`` and ``forward_embedding``
        (ve-fairseq 0.12.3) for a training forward, the positions moved by the offsets: the
        one change is marked. fairseq has no hook for the positions' arguments."""
        encoder_padding_mask = src_tokens.eq(self.padding_idx)  # bsz x src_len
        has_pads = torch.tensor(src_tokens.device.type == "xla") or encoder_padding_mask.any()
        if token_embeddings is None:
            token_embeddings = self.embed_tokens(src_tokens)
        x = encoder_embedding = self.embed_scale * token_embeddings  # bsz x src_len x C
        x = encoder_embedding + self.embed_positions(src_tokens, offsets=position_offsets)  # the change
        if self.layernorm_embedding is not None:
            x = self.layernorm_embedding(x)
        x = self.dropout_module(x)
        if self.quant_noise is not None:
            x = self.quant_noise(x)
        x = x * (1 - encoder_padding_mask.unsqueeze(-1).type_as(x) * has_pads.type_as(x))
        x = x.transpose(0, 1)  # bsz x src_len x C -> src_len x bsz x C
        encoder_states: List[Tensor] = [x] if return_all_hiddens else []
        fc_results: List[Optional[Tensor]] = []
        for layer in self.layers:
            lr = layer(x, encoder_padding_mask=encoder_padding_mask if has_pads else None)
            x, fc_result = lr if isinstance(lr, tuple) and len(lr) == 2 else (lr, None)
            if return_all_hiddens:
                encoder_states.append(x)
                fc_results.append(fc_result)
        if self.layer_norm is not None:
            x = self.layer_norm(x)
        src_lengths = src_tokens.ne(self.padding_idx).sum(dim=1, dtype=torch.int32).reshape(-1, 1).contiguous()
        return {
            "encoder_out": [x],  # src_len x bsz x C
            "encoder_padding_mask": [encoder_padding_mask],  # bsz x src_len
            "encoder_embedding": [encoder_embedding],  # bsz x src_len x C
            "encoder_states": encoder_states,  # [src_len x bsz x C]
            "fc_results": fc_results,
            "src_tokens": [],
            "src_lengths": [src_lengths],
        }

    def build_encoder_layer(self, cfg):
        if cfg.encoder_pos != "rpe":
            return super().build_encoder_layer(cfg)
        layer = RelativePositionEncoderLayer(cfg, return_fc=self.return_fc)
        use_relative_position_table(self, layer, cfg, cfg.encoder.attention_heads, True)
        return wrap_layer(layer, cfg)

    def upgrade_state_dict_named(self, state_dict, name):
        load_per_layer_tables(self, state_dict, name)
        return super().upgrade_state_dict_named(state_dict, name)


class PerSPETransformerDecoder(TransformerDecoderBase):
    """fairseq's decoder with positions chosen by ``--decoder-pos``."""

    def __init__(self, cfg, dictionary, embed_tokens, no_encoder_attn=False,
                 output_projection=None):
        super().__init__(cfg, dictionary, embed_tokens, no_encoder_attn=no_encoder_attn,
                         output_projection=output_projection)
        self.pos = cfg.decoder_pos
        self.perturbs_positions = self.pos == "perspe"
        self.embed_positions = build_positions(
            self.pos, cfg.max_target_positions, self.embed_dim,
            self.padding_idx, default=self.embed_positions,
        )

    def forward(self, prev_output_tokens, encoder_out: Optional[Dict[str, List[Tensor]]] = None,
                incremental_state: Optional[Dict[str, Dict[str, Optional[Tensor]]]] = None,
                features_only: bool = False, full_context_alignment: bool = False,
                alignment_layer: Optional[int] = None, alignment_heads: Optional[int] = None,
                src_lengths: Optional[Any] = None, return_all_hiddens: bool = False,
                position_offsets: Optional[Tensor] = None):
        """fairseq's decoder forward; ``position_offsets`` (bsz x tgt_len, aligned with
        ``prev_output_tokens``) perturb the perspe positions of a training forward. Without
        them: fairseq's own code. Incremental decoding (beam search) cannot take them."""
        if position_offsets is None:
            return super().forward(prev_output_tokens, encoder_out, incremental_state, features_only,
                                   full_context_alignment, alignment_layer, alignment_heads,
                                   src_lengths, return_all_hiddens)
        check_offsets(self, position_offsets, "decoder")
        if incremental_state is not None:
            raise ValueError("perturbed positions are a training-time, full-sequence input; "
                             "incremental decoding uses plain positions")
        x, extra = self._features_perturbed(prev_output_tokens, encoder_out, position_offsets,
                                            full_context_alignment, alignment_layer, alignment_heads)
        return (x, extra) if features_only else (self.output_layer(x), extra)

    def _features_perturbed(self, prev_output_tokens, encoder_out, position_offsets,
                            full_context_alignment, alignment_layer, alignment_heads):
        """fairseq's ``TransformerDecoderBase.extract_features_scriptable`` (ve-fairseq 0.12.3)
        without an incremental state, the positions moved by the offsets: the one change is
        marked. fairseq has no hook for the positions' arguments."""
        if alignment_layer is None:
            alignment_layer = self.num_layers - 1
        enc: Optional[Tensor] = None
        padding_mask: Optional[Tensor] = None
        if encoder_out is not None and len(encoder_out["encoder_out"]) > 0:
            enc = encoder_out["encoder_out"][0]  # src_len x bsz x C
        if encoder_out is not None and len(encoder_out["encoder_padding_mask"]) > 0:
            padding_mask = encoder_out["encoder_padding_mask"][0]  # bsz x src_len
        positions = self.embed_positions(prev_output_tokens, offsets=position_offsets)  # the change
        prev_output_tokens = prev_output_tokens.contiguous()
        x = self.embed_scale * self.embed_tokens(prev_output_tokens)  # bsz x tgt_len x C
        if self.quant_noise is not None:
            x = self.quant_noise(x)
        if self.project_in_dim is not None:
            x = self.project_in_dim(x)
        x += positions
        if self.layernorm_embedding is not None:
            x = self.layernorm_embedding(x)
        x = self.dropout_module(x)
        x = x.transpose(0, 1)  # bsz x tgt_len x C -> tgt_len x bsz x C
        self_attn_padding_mask: Optional[Tensor] = None
        if self.cross_self_attention or prev_output_tokens.eq(self.padding_idx).any():
            self_attn_padding_mask = prev_output_tokens.eq(self.padding_idx)
        attn: Optional[Tensor] = None
        inner_states: List[Optional[Tensor]] = [x]
        for idx, layer in enumerate(self.layers):
            self_attn_mask = None if full_context_alignment else self.buffered_future_mask(x)
            x, layer_attn, _ = layer(
                x, enc, padding_mask, None, self_attn_mask=self_attn_mask,
                self_attn_padding_mask=self_attn_padding_mask,
                need_attn=bool(idx == alignment_layer), need_head_weights=bool(idx == alignment_layer),
            )
            inner_states.append(x)
            if layer_attn is not None and idx == alignment_layer:
                attn = layer_attn.float().to(x)
        if attn is not None:
            if alignment_heads is not None:
                attn = attn[:alignment_heads]
            attn = attn.mean(dim=0)  # average probabilities over heads
        if self.layer_norm is not None:
            x = self.layer_norm(x)
        x = x.transpose(0, 1)  # tgt_len x bsz x C -> bsz x tgt_len x C
        if self.project_out_dim is not None:
            x = self.project_out_dim(x)
        return x, {"attn": [attn], "inner_states": inner_states}

    def build_decoder_layer(self, cfg, no_encoder_attn=False):
        if cfg.decoder_pos != "rpe":
            return super().build_decoder_layer(cfg, no_encoder_attn)
        layer = RelativePositionDecoderLayer(cfg, no_encoder_attn)
        use_relative_position_table(self, layer, cfg, cfg.decoder.attention_heads, False)
        return wrap_layer(layer, cfg)

    def upgrade_state_dict_named(self, state_dict, name):
        load_per_layer_tables(self, state_dict, name)
        return super().upgrade_state_dict_named(state_dict, name)


# architectures


@register_model_architecture("transformer_perspe", "transformer_perspe")
def base_architecture(args):
    """Vaswani et al. (2017) base sizes, SPE encoder, perSPE decoder (Oka et al. 2022)."""
    args.encoder_pos = getattr(args, "encoder_pos", "spe")
    args.decoder_pos = getattr(args, "decoder_pos", "perspe")
    args.rpe_num_buckets = getattr(args, "rpe_num_buckets", 32)
    args.rpe_max_distance = getattr(args, "rpe_max_distance", 128)
    args.rpe_per_layer = getattr(args, "rpe_per_layer", False)
    transformer_base_architecture(args)


@register_model_architecture("transformer_perspe", "transformer_perspe_tiny")
def transformer_perspe_tiny(args):
    """For tests: fairseq's transformer_tiny sizes."""
    args.encoder_embed_dim = getattr(args, "encoder_embed_dim", 64)
    args.encoder_ffn_embed_dim = getattr(args, "encoder_ffn_embed_dim", 64)
    args.encoder_layers = getattr(args, "encoder_layers", 2)
    args.encoder_attention_heads = getattr(args, "encoder_attention_heads", 2)
    args.decoder_layers = getattr(args, "decoder_layers", 2)
    args.decoder_attention_heads = getattr(args, "decoder_attention_heads", 2)
    base_architecture(args)
