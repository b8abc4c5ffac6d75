"""Words -> the tokens a model reads (SentencePiece or subword-nmt pieces), with each
token's word index, for alignment and attention tools given text in words."""
from typing import List, Optional, Tuple

from .alignment import word_groups


class Segmenter:
    """``Segmenter(spm_model)`` encodes each line of whitespace-separated words with a
    SentencePiece model; ``Segmenter(bpe_marker="@@")`` reads lines already split by
    subword-nmt; ``Segmenter()`` takes the words as tokens."""

    def __init__(self, spm_model: Optional[str] = None, bpe_marker: Optional[str] = None):
        if spm_model and bpe_marker:
            raise ValueError("give a SentencePiece model or a BPE marker, not both")
        self.marker = bpe_marker
        self.sp = None
        if spm_model:
            import sentencepiece as spm

            self.sp = spm.SentencePieceProcessor(model_file=spm_model)
            self.marker = "\u2581"

    def __call__(self, line: str, where: str) -> Tuple[str, List[int]]:
        """(the tokens as a line, each token's word index); ValueError naming ``where``
        if a word makes no piece at all."""
        if self.sp is None:
            pieces = line.split()
            groups = word_groups(pieces, self.marker)
            return " ".join(pieces), groups
        # each word on its own: SentencePiece's normalisation may split a word (NFKC turns
        # "\u00b4" into a space and a combining accent), so a word's pieces are the pieces of
        # that word, and the group of every piece is known by construction
        pieces: List[str] = []
        groups: List[int] = []
        for i, word in enumerate(line.split()):
            word_pieces = self.sp.encode(word, out_type=str)
            if not word_pieces:
                raise ValueError(f"{where}: word {i + 1} ({word!r}) makes no SentencePiece piece")
            pieces.extend(word_pieces)
            groups.extend([i] * len(word_pieces))
        return " ".join(pieces), groups
