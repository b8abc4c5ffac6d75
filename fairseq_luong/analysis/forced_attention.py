"""Attention of a model or an ensemble on given translations (teacher forcing).

For forced alignment (AER, Luong et al. 2015, section 5.4) and attention heat maps
(Fig. 7): the reference translation is fed to the decoder, and the attention at every
step is read off, one sentence at a time out of padded batches. Works with any fairseq
encoder-decoder whose decoder returns ``{"attn": [bsz x tgtlen x srclen]}`` (ours,
Transformer) or that tensor itself (fairseq's ``lstm``, whose columns are right-padded).
"""
import contextlib
from typing import Iterator, List, NamedTuple, Optional, Sequence, Tuple

import torch
from fairseq.data import data_utils
from torch import Tensor

from ..errors import UserError
from .alignment import rows_per_target_token


class AttentionError(UserError, ValueError):
    """A model cannot give what is asked (no attention, mismatched dictionaries)."""


_NO_ATTENTION = ("the model has no attention (luong_base, --no-attention; fairseq's lstm with "
                 "--decoder-attention 0), so it gives no alignments or attention maps: use a model "
                 "with attention")


def load_ensemble(paths: str, data: str, source_lang: Optional[str] = None,
                  target_lang: Optional[str] = None):
    """``paths`` "a.pt:b.pt" -> (models in eval mode, task) with the dictionaries in ``data``."""
    from fairseq import checkpoint_utils

    import fairseq_luong  # noqa: F401  (models, safe checkpoint loading)

    overrides = {"data": data}
    if source_lang:
        overrides["source_lang"] = source_lang
    if target_lang:
        overrides["target_lang"] = target_lang
    models, _, task = checkpoint_utils.load_model_ensemble_and_task(paths.split(":"), arg_overrides=overrides)
    for path, model in zip(paths.split(":"), models):
        if getattr(getattr(model, "decoder", None), "attention", True) is None:
            raise AttentionError(f"{path}: {_NO_ATTENTION}")
        model.eval()
    return models, task


def attends_right_padded(model) -> bool:
    """True when the model's attention columns put each sentence's tokens first (right
    padding) although fairseq hands it left-padded sources: fairseq's ``lstm`` encoder
    turns left padding into right padding before its LSTM (``LSTMEncoder.forward``). Ours
    (and the Transformer) keep the source's positions."""
    from fairseq.models.lstm import LSTMEncoder

    encoder = getattr(model, "encoder", None)
    return isinstance(encoder, LSTMEncoder) and bool(getattr(encoder, "left_pad", False))


def aligns_input_word(model) -> bool:
    """Footnote 14's reading of the model's attention rows (see LuongLSTMModel.aligns_input_word)."""
    method = getattr(model, "aligns_input_word", None)
    return bool(method()) if callable(method) else False


class SentenceAttention(NamedTuple):
    source: List[str]  # source tokens, as in the text (after segmentation into pieces, if any)
    target: List[str]  # target tokens
    rows: Tensor  # len(target) x len(source): per target token the attention over source tokens
    # (EOS column dropped, rows per footnote 14 if asked, averaged over the models)


def encode(dictionary, line: str) -> Tensor:
    return dictionary.encode_line(line, add_if_not_exist=False, append_eos=True).long()


def _batches(pairs: Sequence[Tuple[str, str]], batch_size: int):
    # longest sources first, so that padding is small; results are put back in order
    order = sorted(range(len(pairs)), key=lambda i: -len(pairs[i][0].split()))
    for k in range(0, len(order), batch_size):
        yield order[k : k + batch_size]


@torch.no_grad()
def forced_attention(models, src_dict, tgt_dict, pairs: Sequence[Tuple[str, str]], paper_convention: bool,
                     batch_size: int = 32, progress=None) -> Iterator[Tuple[int, SentenceAttention]]:
    """(index, SentenceAttention) for every (source line, target line) pair, in batch order.

    Each model's attention rows are mapped to target tokens (footnote 14 when
    ``paper_convention`` and the model's score is content-based; otherwise row t to the
    predicted token), then averaged over the ensemble.
    """
    pad = src_dict.pad()
    for ids in _batches(pairs, batch_size):
        srcs = [encode(src_dict, pairs[i][0]) for i in ids]
        tgts = [encode(tgt_dict, pairs[i][1]) for i in ids]
        src_tokens = data_utils.collate_tokens(srcs, pad, src_dict.eos(), left_pad=True)
        prev = data_utils.collate_tokens(tgts, tgt_dict.pad(), tgt_dict.eos(), left_pad=False,
                                         move_eos_to_beginning=True)
        src_lengths = torch.tensor([len(s) for s in srcs])
        per_model = []
        for model in models:
            _, extra = model(src_tokens, src_lengths, prev)
            # {"attn": ...} (ours, Transformer) or the tensor itself (fairseq's lstm)
            attn = extra if torch.is_tensor(extra) else extra.get("attn") if isinstance(extra, dict) else None
            attn = attn[0] if isinstance(attn, list) else attn
            if attn is None:
                raise AttentionError(f"{type(model).__name__} returned no attention: {_NO_ATTENTION}")
            per_model.append((attn.float(), paper_convention and aligns_input_word(model),
                              attends_right_padded(model)))
        srclen = src_tokens.size(1)
        for b, i in enumerate(ids):
            n_src, n_tgt = len(srcs[b]), len(tgts[b]) - 1  # without EOS
            rows = torch.stack([
                # columns of the sentence's tokens: after the left padding, or first
                rows_per_target_token(attn[b, : n_tgt + 1, start : start + n_src - 1], n_tgt, input_word)
                for attn, input_word, right_padded in per_model
                for start in [0 if right_padded else srclen - n_src]
            ]).mean(0)  # n_tgt x (n_src - 1): EOS column dropped
            # labels from the text (a word outside the vocabulary is itself, not <unk>); the
            # dictionaries split lines on whitespace too, so there is one per token
            yield i, SentenceAttention(pairs[i][0].split(), pairs[i][1].split(), rows)
        if progress is not None:
            progress.update(len(ids))


@contextlib.contextmanager
def recording_windows(model):
    """Record local attention's p_t at every call (bsz x tgtlen each), for heat maps.

    Yields a list that fills with the p_t tensors and the window half-width D; empty
    for global attention. One sentence at a time (rows are not reordered then).
    """
    attention = getattr(getattr(model, "decoder", None), "attention", None)
    recorded: List[Tensor] = []
    if attention is None or not hasattr(attention, "aligned_position"):
        yield recorded, None
        return
    original = attention.aligned_position

    def record(query, memory, step0):
        p_t = original(query, memory, step0)
        recorded.append(p_t.detach())
        return p_t

    attention.aligned_position = record
    try:
        yield recorded, attention.window
    finally:
        del attention.aligned_position
