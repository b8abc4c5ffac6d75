"""The report's tables of the papers' claims, each adding its verdicts: Luong et al.'s Tables 1,
4 and 6, Bahdanau et al.'s Figure 2, the KFTT rows at more than one size and perSPE. Each
function writes its section through ``w`` (one line a call) and appends (claim, the paper,
here, verdict) to ``verdicts``.
"""
import os
import statistics
from typing import List, Optional, Sequence, Tuple

from published import (
    Study,
    convergence,
    load_json,
    other_sizes,
    perspe_seeds,
    train_curve,
    trained_size,
    training_minutes,
    valid_curve,
)
from systems import (
    AER_SYSTEMS,
    ENSEMBLE,
    FIG2_SYSTEMS,
    PERSPE_MAX_UPDATE,
    PERSPE_PATIENCE,
    PERSPE_SYSTEMS,
    TABLE1,
    TABLE4,
    TABLE6_PAPER,
    Row,
)
from verdicts import (
    KFTT_MIN_BLEU,
    aer_of,
    aligned,
    bootstrap_drop_difference,
    corpus_bleu,
    long_short_drop,
    mean_sd,
    paired_bootstrap,
    paired_bootstrap_aer,
    perspe_paired,
    se_of_difference,
    seeds_of,
    unk_verdict,
    untestable,
    verdict,
    verdict_seeds,
)

from fairseq_luong.data.text import read_lines
from fairseq_luong.paper_settings import luong2015


def fmt(x, spec=".2f", none="-"):
    """X as SPEC writes it; NONE when it is None (not measured)."""
    return none if x is None else format(x, spec)


def fmt_ms(values: Sequence[float], spec=".2f") -> str:
    """The mean ± sample sd of VALUES (the mean alone with one, - with none)."""
    m, sd = mean_sd(values)
    if m is None:
        return "-"
    return f"{m:{spec}}" + ("" if sd is None else f" ± {sd:{spec}}")


def rel(path: str, out_dir: str) -> str:
    """PATH as the report (in OUT_DIR) links it."""
    return os.path.relpath(path, out_dir)


def row_scores(study: Study, row: Row) -> Tuple[List[Optional[float]], List[Optional[float]]]:
    """The BLEU and test perplexity of each seed of a Table 1 row (the ensemble: its BLEU)."""
    if row.system is None:
        s = load_json(study.path("eval", "ensemble", "test.unk.bleu.json"))
        return [None if s is None else s["score"]], []
    seeds = study.seeds(row.system)
    bleus = [study.bleu(row.system, s, row.unk) for s in seeds]
    ppls = [] if row.unk else [study.ppl(row.system, s) for s in seeds]
    return bleus, ppls


def row_hyp(study: Study, row: Row) -> Optional[str]:
    """The translation the paired bootstrap compares: the seed closest to the row's mean."""
    if row.system is None:
        return study.path("eval", "ensemble", "test.unk.detok")
    seed = study.closest_to_mean(row.system, row.unk)
    return None if seed is None else study.hyp(row.system, seed, row.unk)


def table1(study: Study, w, verdicts, fig_dir):
    """Table 1, the ladder: each row against the one above it, in BLEU (seeds and paired bootstrap)
    and in test perplexity (seeds)."""
    ref = study.path("data", "m30k", "raw", "test.de")
    w("## Table 1 in form: the ladder (Multi30k En→De, words)")
    w("")
    w("Each row adds one change to the row above it, as Luong et al. (2015) Table 1. "
      "BLEU: sacreBLEU (13a, mixed case) of the detokenised output against the raw German "
      "reference of test_2016_flickr (1,000 sentences); ppl: perplexity of the test set "
      "(as the paper's newstest2014 column), `<unk>` included. Mean ± sample sd over the seeds; "
      "Δ: change from the row above (mean of ours; the paper's single runs); p: paired "
      "bootstrap (sacreBLEU `--paired-bs`, 1,000 resamples) of the seed closest to the row's "
      "mean against the row above's. The ensemble mixes "
      + ", ".join(f"{n}.s{s}" for n, s in ENSEMBLE) + " (study.py ENSEMBLE says why these); "
      "one ensemble has no seed spread, so its verdict cannot be more than inconclusive.")
    w("")
    w("| row | seeds | BLEU | Δ BLEU | p | paper BLEU (Δ) | test ppl | Δ ppl | paper ppl (Δ) "
      "| verdict BLEU | verdict ppl |")
    w("|---|---|---|---|---|---|---|---|---|---|---|")
    prev = None
    for row in TABLE1:
        bleus, ppls = row_scores(study, row)
        m_b, _ = mean_sd(bleus)
        m_p, _ = mean_sd(ppls)
        d_b = d_p = p = se_b = se_p = None
        paper_d = paper_dp = None
        if prev is not None:
            pb, pp = row_scores(study, prev)
            if m_b is not None and mean_sd(pb)[0] is not None:
                d_b = m_b - mean_sd(pb)[0]
                se_b = se_of_difference(pb, bleus)
                if row.system is None or prev.system is None:
                    se_b = None
                test = paired_bootstrap(ref, row_hyp(study, prev) or "", row_hyp(study, row) or "")
                p = None if test is None else test["p"]
            if m_p is not None and mean_sd(pp)[0] is not None:
                d_p = m_p - mean_sd(pp)[0]
                se_p = se_of_difference(pp, ppls)
            if row.paper_bleu is not None and prev.paper_bleu is not None:
                paper_d = row.paper_bleu - prev.paper_bleu
            if row.paper_ppl is not None and prev.paper_ppl is not None:
                paper_dp = row.paper_ppl - prev.paper_ppl
        v_b = verdict(d_b, se_b, p) if prev is not None else ""
        v_p = verdict_seeds(d_p, se_p, higher_is_better=False) if prev is not None and ppls else ""
        n_seeds = sum(b is not None for b in bleus)
        what = row.what if row.system else (f"ensemble of {len(ENSEMBLE)} models + unk replace "
                                    f"(the paper's: {len(luong2015.ENSEMBLE)})")
        w(f"| {what} | {n_seeds} | {fmt_ms(bleus)} | {fmt(d_b, '+.2f')} | {fmt(p, '.3f')} | "
          f"{fmt(row.paper_bleu, '.1f')} ({fmt(paper_d, '+.1f')}) | {fmt_ms(ppls)} | {fmt(d_p, '+.2f')} | "
          f"{fmt(row.paper_ppl, '.1f')} ({fmt(paper_dp, '+.1f')}) | {v_b} | {v_p} |")
        if prev is not None:
            verdicts.append((f"Table 1: {what}", f"{fmt(paper_d, '+.1f')} BLEU"
                             + (f", {fmt(paper_dp, '+.1f')} ppl" if paper_dp is not None else ""),
                             f"{fmt(d_b, '+.2f')} BLEU (p {fmt(p, '.3f')})"
                             + (f", {fmt(d_p, '+.2f')} ppl" if d_p is not None else ""),
                             v_b + (f" (BLEU); {v_p} (ppl)" if v_p else "")))
        prev = row
    w("")


def table4(study: Study, w, verdicts):
    """Table 4: every attention and score, with and without unk replacement; whether unk
    replacement helps every model, local-p (general) is the best and dot beats general."""
    ref = study.path("data", "m30k", "raw", "test.de")
    w("## Table 4 in form: attention and score functions (Multi30k En→De)")
    w("")
    w("All with input feeding, reversed source and dropout, as the paper's. global (location) "
      "and local-p (general) are the ladder's models (3 seeds: mean ± sd); the others one seed "
      "(seed 1). +unk: unknown words replaced from the attended source word through an IBM "
      "Model 1 dictionary of the training data (the paper's dictionary came from its own "
      "aligner); p(unk): paired bootstrap of +unk against the same model without it.")
    w("")
    w("| attention (score) | seeds | test ppl | BLEU | BLEU +unk | p(unk) | paper ppl | paper BLEU | paper +unk |")
    w("|---|---|---|---|---|---|---|---|---|")
    means = {}
    for label, name, pppl, pbleu, punk in TABLE4:
        seeds = study.seeds(name)
        ppls = [study.ppl(name, s) for s in seeds]
        b = [study.bleu(name, s) for s in seeds]
        bu = [study.bleu(name, s, True) for s in seeds]
        seed = study.closest_to_mean(name, False)
        test = None if seed is None else paired_bootstrap(ref, study.hyp(name, seed), study.hyp(name, seed, True))
        means[label] = (mean_sd(b)[0], mean_sd(bu)[0], mean_sd(ppls)[0], test)
        w(f"| {label} | {sum(x is not None for x in b)} | {fmt_ms(ppls)} | {fmt_ms(b)} | {fmt_ms(bu)} | "
          f"{fmt(test and test['p'], '.3f')} | {pppl} | {fmt(pbleu, '.1f', 'x')} | {fmt(punk, '.1f', 'x')} |")
    w("")
    # the seed spread of the ladder's two 3-seed models: the noise a one-seed difference must beat
    spread = [mean_sd([study.bleu(n, s) for s in study.seeds(n)])[1] for n in
              ("m30k_global_location_feed", "m30k_localp_general_feed")]
    spread = [x for x in spread if x is not None]
    sd = max(spread) if spread else None
    gains = {k: (v[1] - v[0]) for k, v in means.items() if v[0] is not None and v[1] is not None}
    if gains:
        ok = [k for k, v in means.items() if v[3] is not None and v[3]["p"] < 0.05 and gains.get(k, 0) > 0]
        w(f"Unk replacement: {fmt(min(gains.values()), '+.2f')} to {fmt(max(gains.values()), '+.2f')} BLEU "
          f"(paper: +1.2 to +1.9); significant (p < 0.05) for {len(ok)} of {len(gains)} models.")
        v = unk_verdict(gains, ok, len(means))
        verdicts.append(("Table 4: unk replacement helps every attention model", "+1.2 to +1.9 BLEU",
                         f"{fmt(min(gains.values()), '+.2f')} to {fmt(max(gains.values()), '+.2f')}; "
                         f"p < 0.05 for {len(ok)} of {len(gains)} ({len(gains)} of {len(means)} models measured)", v))
    scored = {k: v[0] for k, v in means.items() if v[0] is not None}
    if scored and sd is not None:
        best = max(scored, key=scored.get)
        lp = scored.get("local-p (general)")
        margin = None if lp is None else lp - max(v for k, v in scored.items() if k != "local-p (general)")
        v = "holds" if margin is not None and margin > 2 * sd else (
            "does not hold" if margin is not None and margin < -2 * sd else "inconclusive")
        w(f"Best without unk replacement: {best} ({scored[best]:.2f}); local-p (general) minus the best "
          f"other: {fmt(margin, '+.2f')} BLEU, against a seed sd of up to {sd:.2f} (the ladder's 3-seed models).")
        verdicts.append(("Table 4: local-p (general) is the best model", "19.0 vs at most 18.6",
                         f"{fmt(margin, '+.2f')} BLEU over the best other (seed sd {sd:.2f})", v))
        g_dot, g_gen = scored.get("global (dot)"), scored.get("global (general)")
        if g_dot is not None and g_gen is not None:
            d = g_dot - g_gen
            v = "holds" if d > 2 * sd else ("does not hold" if d < -2 * sd else "inconclusive")
            verdicts.append(("Table 4: for global attention dot beats general", "18.6 vs 17.3 (+1.3)",
                             f"{d:+.2f} BLEU (one seed each; seed sd {sd:.2f})", v))
    w("")


def table6(study: Study, w, verdicts):
    """Table 6: the AER of forced alignments against the KFTT gold; whether local attention
    aligns better than global (location)."""
    aer_dir = study.path("eval", "aer")
    w("## Table 6 in form: alignment error rate (KFTT Ja→En, 582 gold pairs)")
    w("")
    w("Forced alignment of the gold sentences in the gold's own words (SentencePiece pieces "
      "folded into words by `scripts/eval/force_align.py`), one link per English word; AER against "
      "the gold's sure and possible links (`scripts/eval/aer.py`; the 6 gold links past their "
      "sentence's end dropped). Paper convention: footnote 14 (a content-based a_t aligns the "
      "input word y_{t-1}); fairseq: row t aligns y_t, as `--print-alignment`. The paper's "
      "figures are for RWTH En-De, 4 x 1000 models on WMT'14: the ordering is the claim.")
    w("")
    w("| aligner | AER (footnote 14) | AER (as fairseq) | paper AER |")
    w("|---|---|---|---|")
    names = AER_SYSTEMS + ["ensemble", "diagonal"]
    rows = {}
    for name in names:
        cells = []
        for conv in ("paper", "fairseq"):
            r = aligned(study, os.path.join(aer_dir, f"{name}.{conv}.align" if name != "diagonal"
                                            else "diagonal.align"))
            if r is not None:
                rows[(name, conv)] = r
                cells.append(f"{aer_of(r):.3f}")
            else:
                cells.append("-")
        paper = TABLE6_PAPER.get(name)
        label = {"ensemble": "ensemble of the three", "diagonal": "diagonal (lengths only)"}.get(name, name)
        w(f"| {label} | {cells[0]} | {cells[1]} | {fmt(paper, '.2f')} |")
    w(f"| Berkeley aligner (the paper's) | - | - | {TABLE6_PAPER['Berkeley aligner']:.2f} |")
    w("")
    glob = rows.get(("kftt_global_location_feed", "paper"))
    diag = rows.get(("diagonal", "paper"))
    untested = untestable(study, AER_SYSTEMS, rows)
    if untested:
        w(f"**Not testable at this scale**: {untested}. An aligner no better than the diagonal, or a model "
          f"below {KFTT_MIN_BLEU:.0f} BLEU, does not test which attention aligns better.")
        w("")
    for local in ("kftt_localm_general_feed", "kftt_localp_general_feed"):
        loc = rows.get((local, "paper"))
        if glob is None or loc is None:
            continue
        d = aer_of(loc) - aer_of(glob)
        p = paired_bootstrap_aer(glob, loc)
        worse = d > 0 and paired_bootstrap_aer(loc, glob) < 0.05
        v = "holds" if d < 0 and p < 0.05 else ("does not hold" if worse else "inconclusive")
        v = "not testable at this scale" if untested else v
        w(f"{local} minus global (location): {d:+.3f} AER (paired bootstrap over the gold sentences, "
          f"p = {p:.3f}).")
        verdicts.append((f"Table 6: {local.split('_')[1]} attention aligns better than global (location)",
                         f"{TABLE6_PAPER[local]:.2f} vs 0.39",
                         f"{aer_of(loc):.3f} vs {aer_of(glob):.3f} (p {p:.3f})", v))
    if diag is not None and glob is not None:
        w(f"The diagonal baseline: {aer_of(diag):.3f}.")
    w("")


def figure2(study: Study, w, verdicts, fig_dir):
    """Bahdanau et al.'s Figure 2: BLEU by source length on KFTT, and whether the model without
    attention falls off with length more than RNNsearch (a bootstrap of the difference)."""
    from fairseq_luong.analysis.bleu_by_length import bleu_by_length, buckets
    from fairseq_luong.analysis.plots import plot_bleu_by_length

    src = study.path("data", "kftt", "text", "test.ja")
    ref = study.path("data", "kftt", "text", "test.en")
    w("## Bahdanau et al. (2014) Figure 2 in form: BLEU by source length (KFTT Ja→En)")
    w("")
    if not os.path.exists(src):
        w("(not prepared)")
        w("")
        return
    lengths = [len(x.split()) for x in read_lines(src)]
    refs = read_lines(ref)
    systems = {}
    for label, name in FIG2_SYSTEMS:
        hyp = study.hyp(name, 1)
        if os.path.exists(hyp):
            systems[label] = read_lines(hyp)
    groups = buckets(list(range(5, 55, 5)))
    if not systems:
        w("(no system translated yet)")
        w("")
        return
    scores, counts = bleu_by_length(lengths, refs, systems, groups)
    w(f"The held-out KFTT tune sentences ({len(refs)}: tune without the gold-aligned ones and "
      f"without the {(load_json(study.path('data', 'kftt', 'split', 'split.json')) or {}).get('valid', '?')} "
      "used for validation), grouped by the number of Japanese "
      "(MeCab) words; sacreBLEU 13a against the lower-cased tokenised reference. One seed each.")
    w("")
    w("| system | " + " | ".join(f"{b.label} ({c})" for b, c in zip(groups, counts)) + " | all |")
    w("|---|" + "---|" * (len(groups) + 1))
    for label, row in scores.items():
        w(f"| {label} | " + " | ".join(fmt(x, '.1f') for x in row) + f" | {corpus_bleu(systems[label], refs):.2f} |")
    w("")
    png = plot_bleu_by_length([b.label for b in groups], list(scores.items()),
                              os.path.join(fig_dir, "fig2_bleu_by_length.png"),
                              title="KFTT Ja-En: BLEU by source length")
    w(f"![BLEU by source length]({rel(png, os.path.dirname(fig_dir))})")
    w("")
    cut = 30  # the training data's longest sentences (KFTT 30K: at most 30 words)
    n_long = sum(n > cut for n in lengths)
    if not 0 < n_long < len(lengths):
        w(f"No verdict: {n_long} of the {len(lengths)} test sentences are over {cut} words, so there are not "
          "two groups to compare.")
    elif "RNNsearch" in systems and "RNNencdec (luong_base)" in systems:
        drops = {k: long_short_drop(v, refs, lengths, cut) for k, v in systems.items()}
        p = bootstrap_drop_difference(systems["RNNencdec (luong_base)"], systems["RNNsearch"], refs, lengths, cut)
        w(f"BLEU of the {n_long} sentences over {cut} words minus BLEU of the others: "
          + ", ".join(f"{k} {v:+.2f}" for k, v in drops.items())
          + f". The encoder-decoder falls off more than RNNsearch in {100 * (1 - p):.1f}% of 1,000 bootstrap "
          f"resamples (p = {p:.3f}).")
        d = drops["RNNencdec (luong_base)"] - drops["RNNsearch"]
        v = "holds" if d < 0 and p < 0.05 else ("does not hold" if d > 0 and p > 0.95 else "inconclusive")
        untested = untestable(study, [name for _, name in FIG2_SYSTEMS[:2]])
        if untested:
            w(f"**Not testable at this scale**: {untested}; a model that does not translate has no fall-off "
              "with length to compare.")
            v = "not testable at this scale"
        verdicts.append(("Bahdanau Fig. 2: without attention BLEU falls off with length, RNNsearch's does not",
                         "RNNencdec drops past ~20 words, RNNsearch-50 flat",
                         f"long - short: encdec {drops['RNNencdec (luong_base)']:+.2f}, RNNsearch "
                         f"{drops['RNNsearch']:+.2f} (p {p:.3f})", v))
    w("")


def kftt_sizes(study: Study, w, fig_dir):
    """The KFTT rows trained at more than one size: scores, AER and the gap between training
    and validation perplexity, with their curves."""
    from fairseq_luong.analysis.plots import plot_panels

    others = other_sizes(study)
    names = sorted({(n.rsplit(".s", 1)[0], int(n.rsplit(".s", 1)[1])) for _, s in others
                    if os.path.isdir(s.path("systems")) for n in os.listdir(s.path("systems"))})
    if not names:
        return
    w("## KFTT at more than one size")
    w("")
    w("The same training at other sizes: only the units of every layer differ (`run.sh --size H one "
      "SYSTEM SEED`, the study's commit and schedule; published into `results/sizes/H`). Last two epochs: "
      "the fall of validation perplexity, as in the convergence table. Training ppl: the last epoch's "
      "training loss (dropout on); the gap is the best validation perplexity over it.")
    w("")
    w("| training | size | commit | epochs | last two epochs | training ppl | best valid ppl | gap | test ppl | "
      "test BLEU | AER (footnote 14) | minutes |")
    w("|---|---|---|---|---|---|---|---|---|---|---|---|")
    series = []
    for name, seed in names:
        for h, s in sorted([(trained_size(study, name, seed), study)] + others, key=lambda x: x[0]):
            log = os.path.join(s.system_dir(name, seed), "train.log")
            c = convergence(log)
            if c is None:
                continue
            result = load_json(os.path.join(s.system_dir(name, seed), "result.json")) or {}
            te, tp = train_curve(log)
            ve, vp = valid_curve(log)
            rows = aligned(study, s.path("eval", "aer", f"{name}.paper.align")) if seed == 1 else None
            aer = None if rows is None else aer_of(rows)
            gap = c.best_ppl / tp[-1] if tp and c.best_ppl else None
            w(f"| {name} seed {seed} | 2 x {h} | {result.get('commit', '?')[:10]} | {c.epochs} | "
              f"{fmt(c.last_two, '+.2f')} % | {fmt(tp[-1] if tp else None)} | {fmt(c.best_ppl)} | "
              f"{fmt(gap, '.1f')}x | {fmt(s.ppl(name, seed))} | "
              f"{fmt(s.bleu(name, seed))} | {fmt(aer, '.3f')} | {fmt(training_minutes(log), '.1f')} |")
            label = f"2 x {h}" if len(names) == 1 else f"{name}.s{seed} 2 x {h}"
            colour = f"C{len(series) // 2}"  # a size's two curves in one colour, training dashed
            series += [(f"{label} valid", ve, vp, {"color": colour}),
                       (f"{label} training", te, tp, {"color": colour, "linestyle": "--"})]
    w("")
    png = plot_panels([("epoch", "ppl, KFTT Ja-En", series, True)], os.path.join(fig_dir, "kftt_sizes.png"))
    w(f"![KFTT at more than one size]({rel(png, os.path.dirname(fig_dir))})")
    w("")


def perspe(study: Study, w, verdicts):
    """perSPE against SPE on small_parallel_enja, seeds and a paired bootstrap."""
    w("## perSPE in form (small_parallel_enja En→Ja, `examples/perspe/run.sh` PRESET=small)")
    w("")
    base = study.path("perspe", "systems")
    if not os.path.isdir(base):
        w("(not trained yet)")
        w("")
        return
    scores = {name: {seed: load_json(os.path.join(base, name, f"seed{seed}", "study_bleu.json"))["BLEU"]
                     for seed in perspe_seeds(study, name)} for name in PERSPE_SYSTEMS}
    w("SPE/SPE against SPE/perSPE (k = 1, one offset per Japanese phrase) with the perSPE recipe's "
      "preset: 2 + 2 layers of 128, batches of 2,048 tokens, Adam; trained until the validation loss "
      f"has not improved for {PERSPE_PATIENCE} epochs (at most {PERSPE_MAX_UPDATE:,} updates); beam 5, last "
      "checkpoint; BLEU: sacreBLEU ja-mecab on normalised text (examples/perspe/score.py), as the "
      "recipe scores.")
    w("")
    w("| system | BLEU per seed | mean ± sd |")
    w("|---|---|---|")
    for name, per in scores.items():
        w(f"| {name} | {' / '.join(f'{b:.2f}' for b in per.values()) or '-'} | {fmt_ms(list(per.values()))} |")
    a, b = list(scores["spe_spe"].values()), list(scores["spe_perspe"].values())
    if a and b:
        d = statistics.mean(b) - statistics.mean(a)
        se = se_of_difference(a, b)
        p = perspe_paired(study, scores)
        v = verdict(d, se, p)
        w("")
        w(f"SPE/perSPE - SPE/SPE: {d:+.2f} BLEU (seed se of the difference {fmt(se, '.2f')}; paired bootstrap "
          f"of the seeds closest to each mean: p = {fmt(p, '.3f')}).")
        verdicts.append(("perSPE: phrase-level perturbation of the decoder positions gains BLEU",
                         "+0.4 (ASPEC, one run each)", f"{d:+.2f} ({seeds_of(a, b)}; p {fmt(p, '.3f')})", v))
    w("")
