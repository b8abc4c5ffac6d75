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
        if the pieces do not make the line's words."""
        pieces = self.sp.encode(line.strip(), out_type=str) if self.sp else line.split()
        groups = word_groups(pieces, self.marker)
        n_groups = max(groups) + 1 if groups else 0
        if self.sp is not None and n_groups != len(line.split()):
            raise ValueError(f"{where}: {len(line.split())} words but the SentencePiece pieces make {n_groups}")
        return " ".join(pieces), groups
