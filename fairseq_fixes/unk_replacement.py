"""Unknown-word replacement for ``fairseq-generate/-interactive --replace-unk [DICT]``.

Luong et al. (2015, section 4.1, after Jean et al. 2015 and Luong et al. 2015b) replace
each ``<unk>`` of a translation by the source word it attends to most, or by that word's
translation in a dictionary. fairseq has the flag, but in the fairseq we use it cannot
work (fairseq 0.12 and main; upstream issue #3533): ``utils.replace_unk`` indexes fairseq's alignment, a list of
(source, target) pairs or an empty tensor, as if it were one source position per target
word (``TypeError: list indices must be integers or slices, not tuple``); the models are
prepared without their attention unless ``--print-alignment`` is given; ``--replace-unk``
without a file makes fairseq open a file named ``"@@ "``; and fairseq-interactive takes
the source words from the token ids, so a source word outside the vocabulary is already
``<unk>``. Importing fairseq_fixes (``--user-dir``) changes, at the depth where each
goes wrong:

* ``utils.load_align_dict``: ``--replace-unk`` alone copies source words; ``DICT`` lines
  are ``source<TAB>target`` or fairseq's ``source target`` (errors name file and line);
* ``BaseFairseqModel.prepare_for_inference_``: with ``--replace-unk`` models keep their
  attention as with ``--print-alignment`` (a model without attention: a clear error);
* ``FairseqTask.build_generator``: with ``--replace-unk``, :class:`UnkReplacingGenerator`
  gives every hypothesis (beam, ``--nbest``, ensembles: the averaged attention) fairseq's
  hard alignment, i.e. for each target token the source token of highest attention,
  appended EOS excluded, as an :class:`UnkAlignment`, which ``--print-alignment`` prints
  unchanged (soft if asked);
* ``utils.post_process_prediction``: each ``<unk>`` token is replaced before subword
  pieces are joined (``--post-process``), by the source token at its aligned position;
* ``fairseq_cli.interactive.make_batches``: remembers each batch's input lines, so that
  fairseq-interactive replaces with the typed word, not with ``<unk>``.

fairseq-generate already reads the source text itself when ``--replace-unk`` is given,
which is why it asks for ``--dataset-impl raw`` (the text files fairseq-preprocess
writes with ``--dataset-impl raw``). Attention refers to original source positions also
with ``--reverse-source`` (the encoder maps them back).
"""
import copy
import functools
from typing import Dict, List, Optional

import torch
from fairseq import utils
from fairseq.data import data_utils
from fairseq.models import BaseFairseqModel
from fairseq.sequence_generator import SequenceGenerator
from fairseq.tasks import FairseqTask
from fairseq.tokenizer import tokenize_line

from .errors import UserError
from .lines import DataError, iter_lines
from .patching import FIX, fairseq_cli_modules, patch, wrap_once

# what argparse stores for a bare ``--replace-unk`` (GenerationConfig's argparse_const)
_BARE_FLAG = "@@ "


class UnkReplacementError(UserError, ValueError):
    """--replace-unk cannot do what it is asked (bad dictionary, no attention, ...)."""


# ------------------------------------------------------------------ dictionary


def load_align_dict(replace_unk: Optional[str]) -> Optional[Dict[str, str]]:
    """None without --replace-unk; {} to copy source words; else the DICT file's entries."""
    if replace_unk is None:
        return None
    if not isinstance(replace_unk, str) or replace_unk in ("", _BARE_FLAG):
        return {}
    entries: Dict[str, str] = {}
    try:
        for lineno, line in iter_lines(replace_unk):
            if not line.strip():
                continue
            cols = line.split("\t") if "\t" in line else line.split()
            if len(cols) != 2 or not cols[0].strip() or not cols[1].strip():
                raise UnkReplacementError(
                    f"{replace_unk}:{lineno}: --replace-unk dictionary lines are "
                    f"'source<TAB>target' or 'source target', got {line!r}"
                )
            entries.setdefault(cols[0].strip(), cols[1].strip())  # the first entry wins
    except DataError as err:
        raise UnkReplacementError(f"--replace-unk {replace_unk}: cannot read the dictionary ({err})") from err
    return entries


# ------------------------------------------------------------------ alignments


class UnkAlignment(list):
    """fairseq's alignment of one hypothesis (what --print-alignment prints: hard
    (source, target) pairs or soft rows), plus what --replace-unk needs: ``links``, the
    source token each target token attends to most (both 0-based, EOS excluded), the
    number of source tokens the model read, and (fairseq-interactive) the source words."""

    def __init__(self, printed, links: Dict[int, int], n_source: int, source_words: Optional[List[str]]):
        super().__init__(printed)
        self.links = links
        self.n_source = n_source
        self.source_words = source_words


_LAST_INTERACTIVE_BATCH: Dict[str, object] = {"tokens": None, "words": None}


def _source_words_of(src_tokens: torch.Tensor) -> Optional[List[List[str]]]:
    """fairseq-interactive: the source words of this batch, as typed (after --tokenizer/--bpe)."""
    tokens, words = _LAST_INTERACTIVE_BATCH["tokens"], _LAST_INTERACTIVE_BATCH["words"]
    if tokens is None or tokens.shape != src_tokens.shape:
        return None
    return words if torch.equal(tokens.cpu(), src_tokens.cpu()) else None


class UnkReplacingGenerator(SequenceGenerator):
    """fairseq's beam search; each hypothesis gets an :class:`UnkAlignment` from its
    attention (fairseq's ``utils.extract_hard_alignment``, as --print-alignment)."""

    def __init__(self, models, tgt_dict, print_alignment=None, **kwargs):
        super().__init__(models, tgt_dict, **kwargs)
        self.print_alignment = print_alignment

    @torch.no_grad()
    def generate(self, models, sample, **kwargs):
        finalized = super().generate(models, sample, **kwargs)  # with length_limit.py's warning
        src_tokens = sample["net_input"]["src_tokens"].cpu()
        words = _source_words_of(src_tokens)
        for i, hypos in enumerate(finalized):
            src = src_tokens[i]
            n_source = int((src.ne(self.pad) & src.ne(self.eos)).sum())
            for hypo in hypos:
                if hypo["attention"] is None or hypo["attention"].numel() == 0:
                    raise UnkReplacementError(
                        "--replace-unk needs the model's attention, and this model (or one in the "
                        "ensemble) returns none: it has no attention (e.g. luong_base, lstm "
                        "--decoder-attention 0)"
                    )
                attn = hypo["attention"].t().float().cpu()  # tgtlen x srclen
                tokens = hypo["tokens"].cpu()
                hard = utils.extract_hard_alignment(attn, src, tokens, self.pad, self.eos)
                printed = hard
                if self.print_alignment == "soft":
                    printed = utils.extract_soft_alignment(attn, src, tokens, self.pad, self.eos)
                links = {t: s for s, t in hard}
                hypo["alignment"] = UnkAlignment(printed, links, n_source, words[i] if words else None)
        return finalized


# ------------------------------------------------------------------ replacement


def replace_unks(tokens: List[str], source_words: List[str], links: Dict[int, int],
                 align_dict: Dict[str, str], unk: str) -> List[str]:
    """Each ``unk`` in ``tokens`` (target token i) becomes the source word it is linked to
    (``links[i]``), or that word's translation in ``align_dict``; an ``unk`` without a
    link (an empty source) stays."""
    out = list(tokens)
    for i, token in enumerate(tokens):
        if token == unk and i in links:
            word = source_words[links[i]]
            out[i] = align_dict.get(word, word)
    return out


def post_process_prediction(original):
    @functools.wraps(original)
    def wrapper(hypo_tokens, src_str, alignment, align_dict, tgt_dict, remove_bpe=None,
                extra_symbols_to_ignore=None):
        if align_dict is None:
            return original(hypo_tokens, src_str, alignment, align_dict, tgt_dict, remove_bpe,
                            extra_symbols_to_ignore)
        if not isinstance(alignment, UnkAlignment):
            raise UnkReplacementError(
                "--replace-unk: this hypothesis has no alignment from fairseq_fixes' generator "
                "(was the generator built by the task's build_generator?)"
            )
        words = alignment.source_words
        if words is None:
            words = tokenize_line(src_str)
        if len(words) != alignment.n_source:
            raise UnkReplacementError(
                f"--replace-unk: the source text has {len(words)} words but the model read "
                f"{alignment.n_source} tokens ({src_str[:80]!r}); the source must be the text the "
                "model read: word-level data without --bpe/--tokenizer (see docs/analysis.md)"
            )
        # alignment position t counts the hypothesis' tokens other than EOS and padding
        # (fairseq's extract_hard_alignment); replace there, drop what fairseq's
        # Dictionary.string drops, then join subword pieces (--post-process)
        counted = [i for i in hypo_tokens.tolist() if i not in (tgt_dict.eos(), tgt_dict.pad())]
        symbols = replace_unks([tgt_dict[i] for i in counted], words, alignment.links, align_dict,
                               tgt_dict.unk_string())
        ignore = set(extra_symbols_to_ignore or ()) | {tgt_dict.bos()}
        hypo_str = " ".join(sym for sym, i in zip(symbols, counted) if i not in ignore)
        if remove_bpe:
            hypo_str = data_utils.post_process(hypo_str, remove_bpe)
        hypo_tokens = tgt_dict.encode_line(hypo_str, add_if_not_exist=True)
        return hypo_tokens, hypo_str, alignment

    return wrapper


# ------------------------------------------------------------------ wiring


def _replacing(cfg_generation) -> bool:
    return getattr(cfg_generation, "replace_unk", None) is not None


def prepare_for_inference(original):
    @functools.wraps(original)
    def wrapper(self, cfg):
        generation = getattr(cfg, "generation", None)
        if generation is not None and _replacing(generation) and not getattr(generation, "print_alignment", None):
            # prepared as for --print-alignment: decoders keep their attention
            cfg = copy.deepcopy(cfg)
            try:
                from omegaconf import open_dict

                with open_dict(cfg):
                    cfg.generation.print_alignment = "hard"
            except (ImportError, ValueError, AttributeError):
                cfg.generation.print_alignment = "hard"
        return original(self, cfg)

    return wrapper


def build_generator(original):
    @functools.wraps(original)
    def wrapper(self, models, args, seq_gen_cls=None, extra_gen_cls_kwargs=None, **kwargs):
        if _replacing(args) and seq_gen_cls is None and not getattr(args, "score_reference", False):
            seq_gen_cls = UnkReplacingGenerator
            extra_gen_cls_kwargs = dict(extra_gen_cls_kwargs or {},
                                        print_alignment=getattr(args, "print_alignment", None))
        return original(self, models, args, seq_gen_cls=seq_gen_cls,
                        extra_gen_cls_kwargs=extra_gen_cls_kwargs, **kwargs)

    return wrapper


def remember_interactive_sources(make_batches):
    @functools.wraps(make_batches)
    def wrapper(lines, cfg, task, max_positions, encode_fn):
        for batch in make_batches(lines, cfg, task, max_positions, encode_fn):
            if _replacing(cfg.generation):
                _LAST_INTERACTIVE_BATCH["tokens"] = batch.src_tokens.cpu()
                _LAST_INTERACTIVE_BATCH["words"] = [tokenize_line(encode_fn(lines[i])) for i in batch.ids.tolist()]
            yield batch

    return wrapper


def replaces_load_align_dict(original):
    return functools.wraps(original)(lambda replace_unk: load_align_dict(replace_unk))


@patch(FIX, "--replace-unk, for every model with attention (fairseq's did not work at all)")
def patch_unk_replacement():
    """The five places listed in the module docstring."""
    wrap_once(utils, "load_align_dict", replaces_load_align_dict)
    wrap_once(utils, "post_process_prediction", post_process_prediction)
    wrap_once(BaseFairseqModel, "prepare_for_inference_", prepare_for_inference)
    wrap_once(FairseqTask, "build_generator", build_generator)
    for module in fairseq_cli_modules("interactive"):
        wrap_once(module, "make_batches", remember_interactive_sources)
