"""BLEU by source sentence length (Luong et al. 2015, Fig. 6): sentences grouped by the
number of source words, sacreBLEU per group against the raw references."""
from typing import Dict, List, NamedTuple, Optional, Sequence, Tuple

import sacrebleu

from ..data.text import read_lines
from .generate_output import best_translations, read_generate_output

PAPER_EDGES = (10, 20, 30, 40, 50, 60, 70)  # Fig. 6's x axis: <=10, 11-20, ..., 61-70, >70


class Bucket(NamedTuple):
    label: str
    low: int  # inclusive
    high: Optional[int]  # inclusive; None: no upper bound


def buckets(edges: Sequence[int]) -> List[Bucket]:
    """Upper edges -> buckets <=e1, e1+1..e2, ..., >e_last (lengths 0 fall in the first)."""
    edges = sorted(set(int(e) for e in edges))
    if not edges or edges[0] < 1:
        raise ValueError(f"bucket edges must be positive integers, got {edges}")
    out = [Bucket(f"<={edges[0]}", 0, edges[0])]
    out += [Bucket(f"{a + 1}-{b}", a + 1, b) for a, b in zip(edges, edges[1:])]
    out.append(Bucket(f">{edges[-1]}", edges[-1] + 1, None))
    return out


def bucket_of(length: int, groups: List[Bucket]) -> int:
    for k, b in enumerate(groups):
        if b.high is None or length <= b.high:
            return k
    raise AssertionError("the last bucket is open")


def read_system(path: str, n: int) -> Tuple[List[str], str]:
    """A system's translations and what they were read from: plain text (one a line), or
    fairseq-generate output (its D- lines, detokenised, else H- lines; the best of --nbest;
    put back in sentence order)."""
    translations = read_generate_output(path)
    if any(t.hypothesis is not None for t in translations.values()):
        lines, kind = best_translations(translations, n, path)
        what = ("D- lines (fairseq-generate's detokenised hypotheses)" if kind == "D" else
                "H- lines (fairseq-generate's hypotheses; no D- lines in it)")
        return lines, what
    lines = read_lines(path)
    if len(lines) != n:
        raise ValueError(f"{path}: {len(lines)} lines, but the source has {n}")
    return lines, "plain text, one translation a line"


def read_translations(path: str, n: int) -> List[str]:
    """The translations of :func:`read_system`."""
    return read_system(path, n)[0]


def subword_marks(lines: Sequence[str]) -> Optional[str]:
    """The kind of subword pieces the text is split into ("SentencePiece" or "subword-nmt")
    when most of its non-empty lines show their marks, else None: lengths of such text
    count pieces, not words."""
    text = [line for line in lines if line.strip()]
    if not text:
        return None
    for kind, mark in (("SentencePiece", lambda line: "\u2581" in line),
                       ("subword-nmt", lambda line: "@@ " in line + " ")):
        if sum(map(mark, text)) > len(text) / 2:
            return kind
    return None


def bleu_by_length(lengths: List[int], references: List[str], systems: Dict[str, List[str]],
                   groups: List[Bucket], tokenize: str = "13a", lowercase: bool = False):
    """{system: [BLEU or None (empty bucket)]}, and the number of sentences per bucket."""
    index = [bucket_of(n, groups) for n in lengths]
    counts = [index.count(k) for k in range(len(groups))]
    scores = {}
    for name, hyps in systems.items():
        row = []
        for k in range(len(groups)):
            ids = [i for i, b in enumerate(index) if b == k]
            if not ids:
                row.append(None)
                continue
            bleu = sacrebleu.corpus_bleu([hyps[i] for i in ids], [[references[i] for i in ids]],
                                         tokenize=tokenize, lowercase=lowercase)
            row.append(bleu.score)
        scores[name] = row
    return scores, counts
