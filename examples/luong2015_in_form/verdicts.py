"""The verdicts of the in-form study: the seeds' mean, spread and standard error of a
difference; paired bootstraps (BLEU through sacreBLEU, AER over the gold sentences, BLEU's fall
with sentence length); and the rules that make of them "holds", "does not hold",
"inconclusive" or "not testable at this scale", with the targets the study must reach.
"""
import json
import math
import os
import random
import statistics
import subprocess
import tempfile
from typing import Dict, List, Optional, Sequence, Tuple

from published import Study, other_sizes, trained_size

from fairseq_luong.data.text import normalize_line, read_lines


# ---------------------------------------------------------------------------------
# The seeds and the rules
def mean_sd(values: Sequence[float]) -> Tuple[Optional[float], Optional[float]]:
    """The mean and sample sd of the VALUES that are there (not None); sd None with one."""
    values = [v for v in values if v is not None]
    if not values:
        return None, None
    return statistics.mean(values), (statistics.stdev(values) if len(values) > 1 else None)


def se_of_difference(a: Sequence[float], b: Sequence[float]) -> Optional[float]:
    """Standard error of mean(b) - mean(a) from the seeds (Welch); None with one seed on a side."""
    a, b = [x for x in a if x is not None], [x for x in b if x is not None]
    if len(a) < 2 or len(b) < 2:
        return None
    return math.sqrt(statistics.variance(a) / len(a) + statistics.variance(b) / len(b))


def seeds_of(a: Sequence[float], b: Sequence[float]) -> str:
    """How many seeds a comparison of A with B stands on."""
    return f"{len(a)} seed{'s' * (len(a) > 1)} each" if len(a) == len(b) else f"{len(a)} and {len(b)} seeds"


def verdict(gain: Optional[float], se: Optional[float], p: Optional[float], higher_is_better: bool = True) -> str:
    """holds: in the paper's direction beyond twice the seeds' standard error and the
    paired bootstrap (p < 0.05); does not hold: the opposite, by the same two tests;
    inconclusive otherwise (a difference inside the seed spread, or untested)."""
    if gain is None:
        return "not run"
    sign = 1 if higher_is_better else -1
    signed = sign * gain
    beyond_seeds = se is not None and abs(gain) > 2 * se
    significant = p is not None and p < 0.05
    if signed > 0 and beyond_seeds and significant:
        return "holds"
    if signed < 0 and beyond_seeds and significant:
        return "does not hold"
    return "inconclusive"


def verdict_seeds(gain, se, higher_is_better=True) -> str:
    """A verdict from the seeds alone (perplexity has no paired bootstrap here)."""
    if gain is None:
        return "not run"
    if se is None:
        return "inconclusive"
    signed = gain if higher_is_better else -gain
    if abs(gain) <= 2 * se:
        return "inconclusive"
    return "holds" if signed > 0 else "does not hold"


def unk_verdict(gains: Dict[str, float], significant: List[str], models: int) -> str:
    """Table 4's "unk replacement helps every attention model": holds once all `models` are
    measured and each gains significantly (paired bootstrap, p < 0.05); does not hold where no
    measured model gains; inconclusive otherwise (one model's gain says nothing of the others)."""
    if len(significant) == len(gains) == models:
        return "holds"
    return "does not hold" if gains and all(g <= 0 for g in gains.values()) else "inconclusive"


# ---------------------------------------------------------------------------------
# Paired bootstraps of BLEU (sacreBLEU --paired-bs)
def paired_bootstrap(ref: str, baseline: str, system: str, n: int = 1000) -> Optional[dict]:
    """``sacrebleu REF -i BASELINE SYSTEM --paired-bs`` (Koehn 2004; 1,000 resamples,
    sacreBLEU's fixed seed): {"p": p-value of SYSTEM against BASELINE, "base", "score"}.
    Both files detokenised, one translation a line, against the raw reference."""
    if not (os.path.exists(baseline) and os.path.exists(system)):
        return None
    proc = subprocess.run(["sacrebleu", ref, "-i", baseline, system, "--paired-bs", "--paired-bs-n", str(n),
                           "-m", "bleu", "-f", "json"], capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"error: sacrebleu --paired-bs failed on {baseline} {system}:\n{proc.stderr[-2000:]}")
    base, other = json.loads(proc.stdout)
    return {"p": other["BLEU"]["p_value"], "base": base["BLEU"]["score"], "score": other["BLEU"]["score"]}


def perspe_paired(study: Study, scores) -> Optional[float]:
    """Paired bootstrap of the perSPE seed closest to its mean against the SPE one, on the
    normalised text and ja-mecab tokens score.py uses (written to a scratch folder, not RESULTS)."""
    picks = {}
    for name, per in scores.items():
        if not per:
            return None
        m = statistics.mean(per.values())
        picks[name] = min(per, key=lambda s: (abs(per[s] - m), s))
    base = study.path("perspe", "systems")
    with tempfile.TemporaryDirectory() as tmp:
        files = {}
        for name, seed in picks.items():
            files[name] = os.path.join(tmp, f"{name}.seed{seed}.norm")
            with open(files[name], "w", encoding="utf-8") as f:
                hyps = read_lines(os.path.join(base, name, f"seed{seed}", "study_test.hyp"))
                f.writelines(normalize_line(x) + "\n" for x in hyps)
        ref = os.path.join(tmp, "ref.norm")
        with open(ref, "w", encoding="utf-8") as f:
            f.writelines(normalize_line(x) + "\n" for x in read_lines(study.path("perspe", "raw", "test.ja")))
        proc = subprocess.run(["sacrebleu", ref, "-i", files["spe_spe"], files["spe_perspe"], "--paired-bs", "-m",
                               "bleu", "--tokenize", "ja-mecab", "-f", "json"], capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"error: sacrebleu --paired-bs failed:\n{proc.stderr[-2000:]}")
    return json.loads(proc.stdout)[1]["BLEU"]["p_value"]


# ---------------------------------------------------------------------------------
# AER with a paired bootstrap over the gold sentences
def aer_sentences(gold: str, test: str, first_text: str, second_text: str):
    """Per gold sentence, its AER counts (|A & S|, |A & P|, |A|, |S|): the gold 1-indexed,
    the test 0-indexed (force_align.py, diagonal_align.py), both Japanese first; gold links
    past the end of their sentence dropped (6 in the KFTT set), as aer.py
    --drop-out-of-range-gold does."""
    from fairseq_luong.analysis.alignment import Links, aer_counts, read_links

    golds = read_links(gold, one_based=True, target_first=False)
    tests = read_links(test, one_based=False, target_first=False)
    firsts, seconds = read_lines(first_text), read_lines(second_text)
    if not (len(golds) == len(tests) == len(firsts) == len(seconds)):
        raise SystemExit(f"error: {gold}, {test}, {first_text}, {second_text} differ in line count")
    rows = []
    for g, t, a, b in zip(golds, tests, firsts, seconds):
        n, m = len(a.split()), len(b.split())
        inside = lambda link: 0 <= link[0] < n and 0 <= link[1] < m  # noqa: E731
        g = Links({x for x in g.sure if inside(x)}, {x for x in g.possible if inside(x)})
        rows.append(aer_counts([g], [t.sure | t.possible]))
    return rows


def aligned(study: Study, path: str):
    """aer_sentences of the alignment file PATH against the study's KFTT gold; None when the
    file, or the gold, is not there."""
    gold = study.gold
    if not (gold and os.path.exists(path)):
        return None
    return aer_sentences(os.path.join(gold, "jaen.gold"), path, os.path.join(gold, "jaen.ja"),
                         os.path.join(gold, "jaen.en"))


def aer_of(rows) -> float:
    """AER of the summed counts of ``rows`` (AERCounts of aer_sentences)."""
    from fairseq_luong.analysis.alignment import AERCounts

    return AERCounts(*(sum(r[k] for r in rows) for k in range(4))).aer


def paired_bootstrap_aer(rows_a, rows_b, n: int = 1000, seed: int = 12345) -> float:
    """p-value that B's AER is not below A's: the share of resamples (sentences drawn with
    replacement, the same for both) in which AER(B) >= AER(A)."""
    rng = random.Random(seed)
    k = len(rows_a)
    worse = 0
    for _ in range(n):
        idx = [rng.randrange(k) for _ in range(k)]
        if aer_of([rows_b[i] for i in idx]) >= aer_of([rows_a[i] for i in idx]):
            worse += 1
    return worse / n


# ---------------------------------------------------------------------------------
# BLEU on groups of sentences: Figure 2's fall with length
def corpus_bleu(hyps: Sequence[str], refs: Sequence[str], **kw) -> float:
    """sacreBLEU 13a of tokenised text on purpose (Figure 2 scores against KFTT's tokenised
    reference): ``force`` silences the warning that the text looks tokenised, three lines per
    call, 4,000 for one bootstrap of the report."""
    import sacrebleu

    return sacrebleu.corpus_bleu(list(hyps), [list(refs)], force=True, **kw).score


def long_short_drop(hyps, refs, lengths, cut) -> float:
    """BLEU of the sentences longer than ``cut`` source words minus BLEU of the others."""
    long = [i for i, n in enumerate(lengths) if n > cut]
    short = [i for i, n in enumerate(lengths) if n <= cut]
    return (corpus_bleu([hyps[i] for i in long], [refs[i] for i in long])
            - corpus_bleu([hyps[i] for i in short], [refs[i] for i in short]))


def bootstrap_drop_difference(sys_a, sys_b, refs, lengths, cut, n=1000, seed=12345):
    """p-value that A falls off with length no more than B: resampling sentences (the same
    for both), the share of resamples where drop(A) >= drop(B)."""
    rng = random.Random(seed)
    k = len(refs)
    hits = 0
    for _ in range(n):
        idx = [rng.randrange(k) for _ in range(k)]
        pick = lambda xs: [xs[i] for i in idx]  # noqa: E731
        d_a = long_short_drop(pick(sys_a), pick(refs), pick(lengths), cut)
        d_b = long_short_drop(pick(sys_b), pick(refs), pick(lengths), cut)
        hits += d_a >= d_b
    return hits / n


# ---------------------------------------------------------------------------------
# What a claim needs to be testable, and the study's targets
KFTT_MIN_BLEU = 5.0  # a KFTT model below it does not translate: Table 6 and Figure 2 test nothing


def untestable(study: Study, names: Sequence[str], aer_rows: Optional[dict] = None) -> Optional[str]:
    """Why the KFTT models NAMES (seed 1) cannot test a claim: under KFTT_MIN_BLEU, or (with
    ``aer_rows``) forced alignments no better than the diagonal's; None when they can."""
    reasons = []
    diag = (aer_rows or {}).get(("diagonal", "paper"))
    for name in names:
        b = study.bleu(name, 1)
        if b is not None and b < KFTT_MIN_BLEU:
            at = [f"{o.bleu(name, 1):.2f} at 2 x {h}" for h, o in other_sizes(study) if o.bleu(name, 1) is not None]
            reasons.append(f"{name} reaches {b:.2f} BLEU" + (f" at 2 x {trained_size(study, name, 1)} ("
                                                             f"{', '.join(at)})" if at else ""))
        row = (aer_rows or {}).get((name, "paper"))
        if row is not None and diag is not None and aer_of(row) >= aer_of(diag):
            reasons.append(f"{name} aligns at {aer_of(row):.3f} AER, not below the diagonal's {aer_of(diag):.3f}")
    return "; ".join(reasons) or None


# What the study must reach (its README, "the claims and how each is tested"): Multi30k's local-p
# row, mean of its seeds before unk replacement; each KFTT attention model translates
# (KFTT_MIN_BLEU) and aligns better than the diagonal
M30K_TARGET = ("m30k_localp_general_feed", 22.0)
