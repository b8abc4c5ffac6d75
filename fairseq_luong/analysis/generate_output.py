"""fairseq-generate output: the one reader of its S-, T-, H-, D-, P- and A- lines.

For each sentence (sample id N, its line N + 1 of the test set) fairseq-generate prints
``S-N`` (the source as the dictionary sees it), ``T-N`` (the reference, likewise: words
outside the dictionary are ``<<unk>>``), then for each hypothesis, best first (``--nbest``):
``H-N  score  tokens`` (after ``--post-process``), ``D-N  score  text`` (detokenised:
``--tokenizer``/``--bpe`` undone), ``P-N`` (positional scores) and, with
``--print-alignment``, ``A-N``. Every other line (logging, the BLEU line, ``I-``/``E-``
lines) is skipped. Only the best hypothesis of each sentence is kept: extra ``--nbest``
ones are dropped, in every reader that uses this one.
"""
from typing import Dict, List, NamedTuple, Optional, Tuple

from ..data.text import iter_lines


class GenerateOutputError(ValueError):
    """fairseq-generate output that cannot be read as such (the message names file and line)."""


class Translation(NamedTuple):
    """One sentence of fairseq-generate output, with its best hypothesis."""

    source: Optional[str]  # S-: the source as the model read it
    target: Optional[str]  # T-: the reference as the dictionary sees it
    hypothesis: Optional[str]  # H-: the best hypothesis
    detokenized: Optional[str]  # D-: its detokenised text
    score: Optional[float]  # the H- line's score
    alignment: Optional[str]  # A-: its alignment, as printed


_KINDS = {"S": "source", "T": "target", "H": "hypothesis", "D": "detokenized", "A": "alignment"}


def read_generate_output(path) -> Dict[int, Translation]:
    """{sample id: :class:`Translation`} of every sentence in fairseq-generate output
    ``path``, in the order of the ids; {} when it holds no such line (plain text)."""
    found: Dict[int, dict] = {}
    for lineno, line in iter_lines(path):
        tag, _, rest = line.partition("\t")
        kind, sample_id = tag[:1], tag[2:]
        if tag[1:2] != "-" or kind not in "STHDPA" or not sample_id.isdigit():
            continue
        entry = found.setdefault(int(sample_id), {})
        if kind == "P":
            continue
        if kind in "HD":
            score, sep, text = rest.partition("\t")
            if not sep:
                raise GenerateOutputError(f"{path}:{lineno}: malformed {kind}- line (no score and text)")
            if _KINDS[kind] in entry:  # --nbest: the best came first
                continue
            entry[_KINDS[kind]] = text
            if kind == "H":
                entry["score"] = float(score)
        else:
            entry.setdefault(_KINDS[kind], rest)
    return {i: Translation(**{**dict.fromkeys(Translation._fields), **found[i]}) for i in sorted(found)}


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
