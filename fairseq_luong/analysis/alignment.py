"""Word alignments: reading link files, alignment error rate, and alignments from attention.

* Link files, one sentence a line: Pharaoh ``i-j`` links (sure) and TALP-style ``ipj``
  links (possible), 0- or 1-indexed (given, or read off the file: :func:`read_link_file`),
  source (or, swapped, target) side first.
* AER (Och & Ney 2003; Luong et al. 2015, section 5.4, Table 6):
  AER = 1 - (|A & S| + |A & P|) / (|A| + |S|), sure links S, possible links P (P
  includes S), test links A, counts summed over the corpus.
* From attention: one link per target word to the source word of highest weight (the
  paper's one-to-one alignment), subword attention folded into words, rows read in
  fairseq's convention or the paper's (footnote 14).
"""
from __future__ import annotations

import re
from typing import TYPE_CHECKING, List, NamedTuple, Optional, Sequence, Set, Tuple

from ..data.text import iter_lines

if TYPE_CHECKING:  # torch only where attention is read: aer.py and the link readers start without it
    from torch import Tensor

Link = Tuple[int, int]  # (source position, target position), 0-based
_LINK = re.compile(r"^(\d+)([-pP?])(\d+)$")


class AlignmentError(ValueError):
    """A link file is malformed or does not fit its sentences (the message names file and line)."""


class Links(NamedTuple):
    sure: Set[Link]
    possible: Set[Link]  # possible-only links; P = sure | possible


def parse_links(line: str, where: str, one_based: bool, target_first: bool) -> Links:
    """One line of links. ``where`` ("file:line") prefixes errors."""
    sure, possible = set(), set()
    for item in line.split():
        m = _LINK.match(item)
        if not m:
            raise AlignmentError(f"{where}: malformed link {item!r} (expected i-j, or ipj for a possible link)")
        a, b = int(m.group(1)), int(m.group(3))
        if one_based:
            if a == 0 or b == 0:
                raise AlignmentError(f"{where}: link {item!r} has position 0 but links are read as 1-indexed "
                                     "(0-indexed links: say so with the index option)")
            a, b = a - 1, b - 1
        link = (b, a) if target_first else (a, b)
        (sure if m.group(2) == "-" else possible).add(link)
    return Links(sure, possible - sure)


def read_links(path: str, one_based: bool, target_first: bool) -> List[Links]:
    return [parse_links(line, f"{path}:{n}", one_based, target_first) for n, line in iter_lines(path)]


class LinkFile(NamedTuple):
    """A link file as read: its sentences' links and how its indexing was decided."""
    sentences: List[Links]
    one_based: bool
    why: str  # "no position 0 in it", "it has position 0" or the option that said so

    @property
    def indexing(self) -> str:
        return f"{'1' if self.one_based else '0'}-indexed ({self.why})"


def has_position_zero(path: str) -> bool:
    """Whether any well-formed link of the file has a position 0 (then it is 0-indexed)."""
    for _, line in iter_lines(path):
        for item in line.split():
            m = _LINK.match(item)
            if m and (int(m.group(1)) == 0 or int(m.group(3)) == 0):
                return True
    return False


def read_link_file(path: str, index: Optional[int], target_first: bool, option: str) -> LinkFile:
    """Links of a file, 0- or 1-indexed as ``index`` says; without ``index``, as the file
    shows: a file with a position 0 is 0-indexed (a 1-indexed one has none), else it is
    read as 1-indexed (TALP, RWTH and KFTT gold files are; 0-indexed Pharaoh files made by
    aligners such as force_align.py link every target word, the first one too, so they
    have a 0 on every non-empty line). ``option`` names the flag that decides, for messages."""
    if index is None:
        zero = has_position_zero(path)
        one_based, why = (False, "it has position 0") if zero else (True, "no position 0 in it")
    else:
        one_based, why = index == 1, f"{option} {index}"
    return LinkFile(read_links(path, one_based, target_first), one_based, why)


def out_of_range(links: Links, src_len: int, tgt_len: int) -> List[Link]:
    return sorted(link for link in links.sure | links.possible
                  if not (0 <= link[0] < src_len and 0 <= link[1] < tgt_len))


class AERCounts(NamedTuple):
    a_and_s: int
    a_and_p: int
    a: int
    s: int

    @property
    def aer(self) -> float:
        return 1.0 - (self.a_and_s + self.a_and_p) / max(self.a + self.s, 1)

    @property
    def precision(self) -> float:
        return self.a_and_p / self.a if self.a else 0.0

    @property
    def recall(self) -> float:
        return self.a_and_s / self.s if self.s else 0.0


def aer_counts(gold: Sequence[Links], test: Sequence[Set[Link]]) -> AERCounts:
    """Corpus counts for AER = 1 - (|A & S| + |A & P|) / (|A| + |S|) (Och & Ney 2003)."""
    a_s = a_p = a = s = 0
    for g, t in zip(gold, test):
        p = g.sure | g.possible
        a_s += len(t & g.sure)
        a_p += len(t & p)
        a += len(t)
        s += len(g.sure)
    return AERCounts(a_s, a_p, a, s)


def format_links(links: Set[Link]) -> str:
    """0-based Pharaoh ``i-j`` (source-target), sorted by target then source."""
    return " ".join(f"{s}-{t}" for s, t in sorted(links, key=lambda link: (link[1], link[0])))


# ------------------------------------------------------------ from attention


def rows_per_target_token(attn: Tensor, n_target: int, input_word: bool) -> Tensor:
    """The attention row that aligns each of the ``n_target`` target tokens.

    attn: (n_target + 1) x S, row t = the alignment a_t computed at the step that reads
    y_{t-1} (y_0 = BOS) and predicts y_t (the last row predicts EOS). fairseq's
    ``--print-alignment`` gives token k row k (the predicted word). Luong et al. 2015,
    footnote 14: for content-based scores (dot, general, concat) a_t is the alignment of
    the INPUT word y_{t-1}, so token k gets row k + 1 (``input_word``); for the location
    score it is the predicted word's (row k). Returns n_target x S.
    """
    first = 1 if input_word else 0
    return attn[first : first + n_target]


def word_groups(pieces: Sequence[str], marker: Optional[str]) -> List[int]:
    """The word index of each token: ``marker`` None, one token a word; "▁"
    (SentencePiece) a token starting with it starts a word; "@@" (subword-nmt) a token
    ending with it continues into the next."""
    groups, word = [], -1
    for k, piece in enumerate(pieces):
        if marker is None:
            word += 1
        elif marker == "@@":
            if k == 0 or not pieces[k - 1].endswith("@@"):
                word += 1
        elif piece.startswith(marker) or k == 0:
            word += 1
        groups.append(word)
    return groups


def fold_into_words(weights: Tensor, src_groups: List[int], tgt_groups: List[int]) -> Tensor:
    """Subword attention (target tokens x source tokens) -> target words x source words:
    a source word receives the SUM of its pieces' weights (the attention it gets), a
    target word the MEAN of its pieces' rows."""
    import torch

    n_src, n_tgt = (max(src_groups) + 1 if src_groups else 0), (max(tgt_groups) + 1 if tgt_groups else 0)
    groups = torch.tensor(src_groups, dtype=torch.long)
    by_src = weights.new_zeros(weights.size(0), n_src).index_add_(1, groups, weights)
    summed = weights.new_zeros(n_tgt, n_src).index_add_(0, torch.tensor(tgt_groups, dtype=torch.long), by_src)
    counts = torch.bincount(torch.tensor(tgt_groups, dtype=torch.long), minlength=n_tgt).clamp(min=1)
    return summed / counts.unsqueeze(1).to(summed.dtype)


def one_to_one_links(word_weights: Tensor) -> Set[Link]:
    """Each target word linked to its source word of highest weight (section 5.4)."""
    if word_weights.numel() == 0:
        return set()
    best = word_weights.argmax(dim=1)  # n_tgt
    return {(int(s), t) for t, s in enumerate(best.tolist())}
