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
SentencePiece left as it was does not count against it), and when the dictionaries know its
pieces (:func:`sentencepiece_misfit`; the thresholds separate, on Multi30k and KFTT, the
model the data was encoded with, 99.9 to 100 % and at most 0.5 %, from models of another
size or language, at most 95 % or at least 50 %). ``from_pretrained`` checks both
(``hub.py``, :func:`check_hub_segmentation`), in one line naming the dictionary or model
and the keyword to give; the command line checks the model it is given (:func:`patch_bpe_fit`).
"""
import functools
import os

from fairseq.data.encoders.sentencepiece_bpe import SentencepieceBPE
from fairseq.tasks import FairseqTask

from ..errors import UserError
from .patching import CHECK, patch, wrap_once

SPACE = "\u2581"  # SentencePiece's mark of a word's beginning
MARKED = 0.01  # the share of a dictionary's text in pieces marked so, from which it holds such pieces
COVERED = 0.99  # the share of a dictionary's text a fitting SentencePiece model must know
STRAY = 0.1  # the share of a fitting model's pieces the dictionaries may lack
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


def sentencepiece_misfit(sp, dictionary, dictionaries):
    """Why SentencePiece processor ``sp`` did not make ``dictionary`` (the side it encodes),
    given all the run's ``dictionaries``; None when it fits."""
    pieces = {sp.id_to_piece(i) for i in range(sp.get_piece_size()) if not (sp.is_control(i) or sp.is_unknown(i))}
    symbols = _symbols(dictionary)
    covered = sum(c for s, c in symbols if s in pieces) / (sum(c for _, c in symbols) or 1)
    known = {s for d in dictionaries for s in d.symbols}
    stray = sum(p not in known for p in pieces) / (len(pieces) or 1)
    if covered >= COVERED and stray <= STRAY:
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
