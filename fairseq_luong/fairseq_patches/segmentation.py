"""Subword segmentation that fits the dictionary: pieces the dictionary was not built from are refused.

fairseq takes whatever segmentation it is given. ``from_pretrained`` without ``bpe=`` on a
dictionary of SentencePiece pieces reads each source word as one symbol (``<unk>`` for
nearly all) and leaves the ``▁`` marks in its translations; with a SentencePiece model of
another vocabulary (``FairseqTask.build_bpe`` for ``fairseq-interactive --bpe sentencepiece
--sentencepiece-model``, ``GeneratorHubInterface`` for ``from_pretrained``) every sentence is
cut into pieces the dictionary partly knows. Both translate nonsense without a word.

A dictionary shows what it was built from: SentencePiece pieces begin words with ``▁``,
subword-nmt pieces end inside words with ``@@`` (:func:`pieces_of`). A SentencePiece model
fits a dictionary when its pieces cover the dictionary's symbols (weighted by their counts,
which fairseq-preprocess took from the encoded training text: a rare character that
SentencePiece left as it was does not count against it), and when the text it would cut is
the dictionaries' text, but for what they may have left out (:func:`sentencepiece_misfit`).
fairseq-preprocess leaves out the pieces seen fewer times than ``--thresholdsrc`` or beyond
``--nwordssrc``, so a dictionary of the model's own pieces may lack most of them: a piece in
neither dictionary counts against the model only when it would have been seen too often to be
left out. A unigram model's scores are log probabilities, so it says how often it would cut
each piece: the share of the text in its pieces that no dictionary would lack, and in pieces
the dictionaries saw over three times as often as it would cut them (those of a model with
fewer pieces, which it joins), are both about 0 for the model the data was encoded with. A
BPE model's scores are ranks: the share of its pieces in neither dictionary decides, which
says nothing once a dictionary was cut (every one's rarest symbol seen more than once), where
coverage alone decides. On Multi30k and KFTT (tests/test_segmentation_fit.py), the unigram
model the data was encoded with gives at least 99.9 %, at most 0.1 % and 0 %, with the
dictionaries whole or cut; a unigram model of another size or language at most 98.0 %, or at
least 2.2 % or 4.1 %. What the check cannot tell: a BPE model of the same text with more
pieces, given a cut dictionary. ``from_pretrained`` checks both (``hub.py``,
:func:`check_hub_segmentation`), in one line naming the dictionary or model and the keyword to
give; the command line checks the model it is given (:func:`patch_bpe_fit`).
"""
import functools
import math
import os

from fairseq.data.encoders.sentencepiece_bpe import SentencepieceBPE
from fairseq.tasks import FairseqTask

from fairseq_fixes.patching import CHECK, patch, wrap_once

from ..errors import UserError

SPACE = "\u2581"  # SentencePiece's mark of a word's beginning
MARKED = 0.01  # the share of a dictionary's text in pieces marked so, from which it holds such pieces
COVERED = 0.99  # the share of a dictionary's text a fitting SentencePiece model must know
STRAY = 0.1  # the share of a fitting BPE model's pieces the dictionaries may lack
STRAY_TEXT = 0.01  # the share of the text a fitting unigram model may cut otherwise (see SURPLUS, SLACK)
SURPLUS = 3  # how much more often than a fitting unigram model would cut it a dictionary may have seen a piece
SLACK = 2  # how much more often than a dictionary's rarest symbol a piece it lacks may be expected
_KINDS = {"sentencepiece": ("SentencePiece pieces", lambda s: s.startswith(SPACE)),
          "subword_nmt": ("subword-nmt pieces", lambda s: s.endswith("@@"))}
_GIVE = {"sentencepiece": "bpe='sentencepiece', sentencepiece_model= the SentencePiece model the data was encoded with",
         "subword_nmt": "bpe='subword_nmt', bpe_codes= the codes the data was encoded with"}


def _symbols(dictionary):
    """(symbol, weight) of a dictionary's own symbols: its count, or 1 each when it has none."""
    own = [(s, c) for s, c in zip(dictionary.symbols[dictionary.nspecial:], dictionary.count[dictionary.nspecial:])
           if not s.startswith("madeupword")]  # fairseq-preprocess's padding to a multiple of 8
    if not any(c for _, c in own):
        return [(s, 1) for s, _ in own]
    return own


def pieces_of(dictionary):
    """"sentencepiece" or "subword_nmt" when the dictionary's text is in such pieces, else None."""
    symbols = _symbols(dictionary)
    total = sum(c for _, c in symbols) or 1
    for kind, (_, marked) in _KINDS.items():
        if sum(c for s, c in symbols if marked(s)) / total >= MARKED:
            return kind
    return None


def _examples(dictionary, kind):
    """The dictionary's four most frequent symbols marked as KIND's pieces."""
    marked = [s for s, _ in sorted(_symbols(dictionary), key=lambda x: -x[1]) if _KINDS[kind][1](s)]
    return ", ".join(map(repr, marked[:4]))


def _word_piece(piece):
    """Whether ``piece`` is more than one character: SentencePiece keeps every character of its
    text among its pieces (``character_coverage``), whether or not it cuts any text into it, at a
    score that is not how often it would."""
    return len(piece) > 1


def _log_probabilities(sp, ids):
    """The scores of pieces ``ids`` when they are log probabilities (a unigram model's), else None
    (a BPE model scores a piece by its rank: 0, -1, -2, ...)."""
    scores = [sp.get_score(i) for i in ids]
    if all(float(score).is_integer() for score in scores):
        return None
    return scores


def sentencepiece_misfit(sp, dictionary, dictionaries):
    """Why SentencePiece processor ``sp`` did not make ``dictionary`` (the side it encodes),
    given all the run's ``dictionaries``; None when it fits."""
    ids = [i for i in range(sp.get_piece_size()) if not (sp.is_control(i) or sp.is_unknown(i))]
    pieces = {sp.id_to_piece(i) for i in ids}
    symbols = _symbols(dictionary)
    covered = sum(c for s, c in symbols if s in pieces) / (sum(c for _, c in symbols) or 1)
    known = {s for d in dictionaries for s in d.symbols}
    sides = [_symbols(d) for d in dictionaries]
    text = sum(c for side in sides for _, c in side)  # the dictionaries' text, in symbols
    rarest = sum(min((c for _, c in side), default=1) for side in sides)  # what a piece left out was seen at most
    scores = _log_probabilities(sp, ids)
    if scores is not None:  # unigram: how the text it cuts would differ from the dictionaries' text
        expected = {sp.id_to_piece(i): math.exp(score) * text for i, score in zip(ids, scores)}  # pieces it cuts
        stray = sum(n for piece, n in expected.items()
                    if _word_piece(piece) and piece not in known and n > SLACK * rarest) / (text or 1)
        surplus = sum(c for side in sides for s, c in side
                      if _word_piece(s) and s in expected and c > SURPLUS * expected[s]) / (text or 1)
        if covered >= COVERED and stray <= STRAY_TEXT and surplus <= STRAY_TEXT:
            return None
        return (f"{covered:.1%} of the dictionary's text is in its pieces, {surplus:.1%} of the text is in pieces it "
                f"would cut less than a third as often, and it would cut {stray:.1%} of the text into pieces that are "
                "in neither dictionary (for the model the data was encoded with: about 100%, 0% and 0%)")
    # BPE: its pieces in neither dictionary, unless a dictionary cut may have left them out
    stray = sum(p not in known for p in pieces) / (len(pieces) or 1)
    cut = all(min((c for _, c in side), default=1) > 1 for side in sides)
    if covered >= COVERED and (stray <= STRAY or cut):
        return None
    return (f"{covered:.1%} of the dictionary's text is in its pieces, and {stray:.1%} of its {len(pieces)} pieces "
            "are in neither dictionary (for the model the data was encoded with: about 100% and 0%)")


def _processor(path):
    import sentencepiece as spm

    return spm.SentencePieceProcessor(model_file=str(path))


def check_hub_segmentation(cfg, task):
    """Raise UserError when ``from_pretrained``'s subword model (``cfg.bpe``) does not fit the
    source dictionary of ``task``: none for a dictionary of pieces, one for a dictionary of
    words, or a SentencePiece model that did not make the dictionary."""
    dictionary = getattr(task, "source_dictionary", None)
    if dictionary is None:
        return
    data = str(getattr(task.cfg, "data", "the data folder")).split(os.pathsep)[0]
    name = f"{data}/dict.{getattr(task.cfg, 'source_lang', None) or 'SRC'}.txt"
    bpe = cfg.get("bpe") if hasattr(cfg, "get") else getattr(cfg, "bpe", None)
    given = getattr(bpe, "_name", None) if bpe is not None else None
    kind = pieces_of(dictionary)
    if kind is not None and given != kind and not (kind == "subword_nmt" and given == "fastbpe"):
        what = "no bpe=" if given is None else f"bpe={given!r}, which cuts text otherwise"
        raise UserError(f"{name} holds {_KINDS[kind][0]} ({_examples(dictionary, kind)}, ...), and from_pretrained was "
                        f"given {what}: source words would be symbols the model does not know; give {_GIVE[kind]}")
    if kind is None and given in ("sentencepiece", "subword_nmt", "fastbpe"):
        raise UserError(f"{name} holds words, not subword pieces (none starts with {SPACE} or ends with @@), and "
                        f"from_pretrained was given bpe={given!r}: its pieces would be symbols the model does not "
                        "know; leave bpe= out")
    if given == "sentencepiece":
        misfit = sentencepiece_misfit(_processor(bpe.sentencepiece_model), dictionary,
                                      [dictionary, task.target_dictionary])
        if misfit:
            raise UserError(f"sentencepiece_model={bpe.sentencepiece_model!r} did not make {name}: {misfit}; give the "
                            "SentencePiece model the data was encoded with (the one fairseq-preprocess read pieces of)")


def _checked_sentencepiece(build_bpe):
    @functools.wraps(build_bpe)
    def wrapper(self, args, *rest, **kwargs):
        bpe = build_bpe(self, args, *rest, **kwargs)
        if isinstance(bpe, SentencepieceBPE):
            sides = [d for d in (self.source_dictionary, self.target_dictionary) if d is not None]
            misfits = [sentencepiece_misfit(bpe.sp, d, sides) for d in sides]
            if sides and all(misfits):  # it encodes the source, or decodes the target (fairseq-generate)
                data = str(getattr(self.cfg, "data", "the data folder")).split(os.pathsep)[0]
                raise UserError(f"--sentencepiece-model {args.sentencepiece_model} did not make the dictionaries of "
                                f"{data}: {misfits[0]}; give the SentencePiece model the data was encoded with (the "
                                "one fairseq-preprocess read pieces of)")
        return bpe

    return wrapper


@patch(CHECK, "--bpe sentencepiece with a model whose pieces cover neither dictionary")
def patch_bpe_fit():
    """``FairseqTask.build_bpe`` (fairseq-interactive, fairseq-generate): a SentencePiece model
    that made neither dictionary is refused."""
    wrap_once(FairseqTask, "build_bpe", _checked_sentencepiece)
