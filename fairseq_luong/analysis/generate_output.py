"""fairseq-generate output: the one reader of its S-, T-, H-, D-, P- and A- lines.

For each sentence (sample id N, its line N + 1 of the test set) fairseq-generate prints
``S-N`` (the source as the dictionary sees it), ``T-N`` (the reference, likewise: words
outside the dictionary are ``<<unk>>``), then for each hypothesis, best first (``--nbest``):
``H-N  score  tokens`` (after ``--post-process``), ``D-N  score  text`` (detokenised:
``--tokenizer``/``--bpe`` undone), ``P-N`` (positional scores) and, with
``--print-alignment``, ``A-N``. Every other line (logging, the BLEU line, ``I-``/``E-``
lines) is skipped. :func:`read_nbest` keeps every hypothesis; :func:`read_generate_output`
(what the scoring tools read) the best of each sentence.
"""
from typing import Dict, Iterable, List, NamedTuple, Optional, Tuple

from ..data.text import iter_lines


class GenerateOutputError(ValueError):
    """fairseq-generate output that cannot be read as such (the message names file and line)."""


class Hypothesis(NamedTuple):
    """One hypothesis of a sentence (``--nbest``: each of them), as printed."""

    tokens: Optional[str]  # H-: after --post-process
    detokenized: Optional[str]  # D-: --tokenizer / --bpe undone
    score: Optional[float]  # the H- line's score (base 2)
    positional_scores: Optional[List[float]]  # P-: each token's log-probability (base 2), EOS last
    alignment: Optional[str]  # A-: as printed (``--print-alignment``)


class Sentence(NamedTuple):
    """One sentence of fairseq-generate output, with every hypothesis, best first."""

    source: Optional[str]  # S-
    target: Optional[str]  # T-
    hypotheses: List[Hypothesis]


def read_nbest(lines: Iterable[Tuple[int, str]], name: str) -> Dict[int, Sentence]:
    """{sample id: :class:`Sentence`} of the (line number, text) ``lines`` of fairseq-generate
    or fairseq-interactive output (``name`` names them in errors), in the order of the ids;
    {} when they hold no such line (plain text)."""
    found: Dict[int, dict] = {}
    for lineno, line in lines:
        tag, _, rest = line.partition("\t")
        kind, sample_id = tag[:1], tag[2:]
        if tag[1:2] != "-" or kind not in "STHDPA" or not sample_id.isdigit():
            continue
        entry = found.setdefault(int(sample_id), {"hypotheses": []})
        hypotheses = entry["hypotheses"]
        if kind in "ST":
            entry.setdefault("source" if kind == "S" else "target", rest)
            continue
        if kind in "HD":
            score, sep, text = rest.partition("\t")
            if not sep:
                raise GenerateOutputError(f"{name}:{lineno}: malformed {kind}- line (no score and text)")
        if kind == "H" or not hypotheses or (kind == "D" and hypotheses[-1]["detokenized"] is not None):
            hypotheses.append(dict.fromkeys(Hypothesis._fields))  # an H- line starts a hypothesis
        last = hypotheses[-1]
        if kind == "H":
            last.update(tokens=text, score=float(score))
        elif kind == "D":
            last["detokenized"] = text
            last["score"] = float(score) if last["score"] is None else last["score"]
        elif kind == "P":
            last["positional_scores"] = [float(x) for x in rest.split()]
        else:
            last["alignment"] = rest
    return {i: Sentence(found[i].get("source"), found[i].get("target"),
                        [Hypothesis(**h) for h in found[i]["hypotheses"]]) for i in sorted(found)}


class Translation(NamedTuple):
    """One sentence of fairseq-generate output, with its best hypothesis."""

    source: Optional[str]  # S-: the source as the model read it
    target: Optional[str]  # T-: the reference as the dictionary sees it
    hypothesis: Optional[str]  # H-: the best hypothesis
    detokenized: Optional[str]  # D-: its detokenised text
    score: Optional[float]  # the H- line's score
    alignment: Optional[str]  # A-: its alignment, as printed


def read_generate_output(path) -> Dict[int, Translation]:
    """{sample id: :class:`Translation`} of every sentence in fairseq-generate output
    ``path``: its best hypothesis (the first of ``--nbest``), in the order of the ids; {} when
    it holds no such line (plain text)."""
    out = {}
    for i, sentence in read_nbest(iter_lines(path), str(path)).items():
        best = sentence.hypotheses[0] if sentence.hypotheses else Hypothesis(*[None] * len(Hypothesis._fields))
        out[i] = Translation(sentence.source, sentence.target, best.tokens, best.detokenized, best.score,
                             best.alignment)
    return out


def best_translations(translations: Dict[int, Translation], n: int, path,
                      kind: Optional[str] = None) -> Tuple[List[str], str]:
    """The best hypothesis of each of the ``n`` sentences (ids 0 .. n-1) of
    :func:`read_generate_output`'s ``translations`` of ``path``, in sentence order, and
    which lines they are: ``kind`` "D" or "H", or by default the D- lines (detokenised)
    where every sentence has one, else the H- lines. A missing or extra sentence is an
    error naming the first."""
    with_hypothesis = {i: t for i, t in translations.items() if t.hypothesis is not None}
    if kind is None:
        kind = "D" if with_hypothesis and all(t.detokenized is not None for t in with_hypothesis.values()) else "H"
    field = "detokenized" if kind == "D" else "hypothesis"
    by_id = {i: getattr(t, field) for i, t in with_hypothesis.items()}
    missing = sorted(set(range(n)) - set(by_id))
    if missing or len(by_id) != n:
        span = f"ids {min(by_id)}-{max(by_id)}" if by_id else "none"
        raise GenerateOutputError(
            f"{path}: fairseq-generate output for {len(by_id)} sentences ({span}), expected ids "
            f"0-{n - 1}; missing e.g. {missing[:5]}")
    return [by_id[i] for i in range(n)], kind
