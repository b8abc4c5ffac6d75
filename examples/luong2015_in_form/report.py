"""The in-form study's report: report.md and its figures, written from the published results.

The verdicts come first, then the claims' tables (claims.py), how each training ended (the
convergence table, the study's targets, the learning curves), what changed against the first
study, attention heat maps, the time taken, and every training with the command that remakes it.
"""
import os
import statistics
from typing import List, Tuple

from claims import figure2, fmt, kftt_sizes, perspe, rel, table1, table4, table6
from published import (
    PREVIOUS_RESULTS,
    Study,
    all_results,
    committed_at,
    convergence,
    every_log,
    git_commits,
    load_json,
    perspe_dir,
    perspe_seeds,
    previous_results,
    training_minutes,
    utc,
    valid_curve,
)
from systems import (
    AER_SYSTEMS,
    BY_NAME,
    FIG2_SYSTEMS,
    FLAT_PERCENT,
    HALVE_BELOW,
    HALVINGS,
    MAX_EPOCHS,
    PERSPE_MAX_UPDATE,
    PERSPE_PATIENCE,
    PERSPE_SEEDS,
    PERSPE_SYSTEMS,
    PRECISION,
    SIZES,
    TABLE1,
    TABLE4,
    Label,
    trainings,
)
from verdicts import KFTT_MIN_BLEU, M30K_TARGET, aer_of, aligned, mean_sd


def write(work: str, shared: str, out: str = ""):
    """report.md (OUT; default WORK/report.md, figures beside it) from the results in WORK, with
    the KFTT gold alignments of the data folder SHARED; printed too."""
    study = Study(work, os.path.join(shared, "kftt_gold_align_ja_en"))
    out = out or study.path("report.md")
    fig_dir = os.path.join(os.path.dirname(os.path.abspath(out)), "figures")
    os.makedirs(fig_dir, exist_ok=True)
    lines: List[str] = []
    verdicts: List[Tuple[str, str, str, str]] = []  # (claim, paper, ours, verdict)
    w = lines.append
    commits = git_commits(study)
    w("# The papers' claims in form, at small scale: report")
    w("")
    w(f"Written by `bash examples/luong2015_in_form/run.sh report` from the published results "
      f"(`{os.path.relpath(os.path.abspath(work), os.getcwd())}`). Trainings made by commit(s) "
      f"{', '.join(c[:10] + (' with uncommitted changes' if '+' in c else '') for c in commits) or '(none published)'}"
      f" ({len(all_results(study))} of {len(trainings()) + len(PERSPE_SYSTEMS) * len(PERSPE_SEEDS)} trainings).")
    w("")
    table1(study, w, verdicts, fig_dir)
    table4(study, w, verdicts)
    table6(study, w, verdicts)
    figure2(study, w, verdicts, fig_dir)
    kftt_sizes(study, w, fig_dir)
    perspe(study, w, verdicts)
    converged(study, w)
    targets(study, w)
    curves(study, w, fig_dir)
    changes(study, w)
    heatmaps(study, w, fig_dir)
    budget(study, w)
    trainings_table(study, w)
    summary = ["## Verdicts", "",
               "| claim | the paper | here | verdict |", "|---|---|---|---|"]
    summary += [f"| {c} | {p} | {o} | {v} |" for c, p, o, v in verdicts]
    summary += ["", "holds: in the paper's direction beyond twice the seeds' standard error of the "
                "difference and by the paired bootstrap (p < 0.05); does not hold: significantly the "
                "other way by the same tests; inconclusive: neither (inside the seed spread, or one "
                "seed only where no spread can be estimated).", ""]
    text = "\n".join(lines[:4] + summary + lines[4:]) + "\n"
    with open(out, "w", encoding="utf-8") as f:
        f.write(text)
    print(text)


def converged(study: Study, w):
    """Each training's epochs, final rate, why it stopped and whether its curve ends flat."""
    rows = [(label, convergence(log, fixed)) for label, _, log, fixed in every_log(study)]
    rows = [(label, c) for label, c in rows if c is not None]
    if not rows:
        return
    flat = sum(c.flat for _, c in rows)
    w("## Convergence")
    w("")
    w(f"Every Luong and RNNsearch training halves its rate after each epoch that lowers the validation "
      f"loss by less than {100 * HALVE_BELOW:.1f} % of the best. It stops once the rate has been halved at "
      f"least {HALVINGS} times and its curve is flat, or after {MAX_EPOCHS} epochs. Trainings by commit "
      f"2711d78 stopped at exactly {HALVINGS} halvings, flat or not. perSPE trains its preset until its "
      f"validation loss has not improved for {PERSPE_PATIENCE} epochs (at most {PERSPE_MAX_UPDATE:,} updates). "
      f"A curve ends flat when validation perplexity fell by less than {FLAT_PERCENT:.0f} % over its last two "
      f"epochs (negative: it rose). {flat} of {len(rows)} trainings end flat.")
    w("")
    w("| training | epochs | final rate | stopped by | best valid ppl | last two epochs | flat |")
    w("|---|---|---|---|---|---|---|")
    for label, c in rows:
        w(f"| {label} | {c.epochs} | {fmt(c.final_lr, 'g')} | {c.stopped} | {fmt(c.best_ppl)} | "
          f"{fmt(c.last_two, '+.2f')} % | {'yes' if c.flat else '**no**'} |")
    w("")


def targets(study: Study, w):
    """Each target of the study against what the published trainings measured."""
    rows = []
    name, bleu = M30K_TARGET
    seeds = BY_NAME[name].seeds
    got = [b for b in (study.bleu(name, seed) for seed in seeds) if b is not None]
    rows.append((f"Multi30k: {name}, mean of its {len(seeds)} seeds, at least {bleu:.0f} BLEU before unk "
                 "replacement",
                 f"{statistics.mean(got):.2f} ({len(got)} of {len(seeds)} seeds)" if got else "not trained",
                 ("yes" if statistics.mean(got) >= bleu else "no") if len(got) == len(seeds) else "-"))

    def aer(path):
        sentences = aligned(study, path)
        return None if sentences is None else aer_of(sentences)

    diag = aer(study.path("eval", "aer", "diagonal.align"))
    for name in AER_SYSTEMS:
        b = study.bleu(name, 1)
        rows.append((f"KFTT: {name} at least {KFTT_MIN_BLEU:.0f} BLEU", fmt(b, ".2f", "not trained"),
                     "-" if b is None else ("yes" if b >= KFTT_MIN_BLEU else "no")))
        a = aer(study.path("eval", "aer", f"{name}.paper.align"))
        rows.append((f"KFTT: {name} aligns below the diagonal's AER",
                     f"{fmt(a, '.3f', 'not aligned yet')}; the diagonal "
                     f"{fmt(diag, '.3f', 'not made yet (run.sh finish)')}",
                     "-" if a is None or diag is None else ("yes" if a < diag else "no")))
    for name in PERSPE_SYSTEMS:
        n = len(perspe_seeds(study, name))
        rows.append((f"perSPE: {name}, {len(PERSPE_SEEDS)} seeds", f"{n} trained",
                     "yes" if n == len(PERSPE_SEEDS) else "-"))
    logs = every_log(study)
    ends = [c for c in (convergence(log, fixed) for _, _, log, fixed in logs) if c is not None]
    flat = sum(c.flat for c in ends)
    rows.append(("every learning curve ends flat", f"{flat} of the {len(ends)} published (of {len(logs)})",
                 "no" if flat < len(ends) else ("yes" if len(ends) == len(logs) else "-")))
    w("## The study's targets")
    w("")
    w("met: yes, no, or - (not measured yet). A KFTT model below its targets makes Table 6 and Figure 2 "
      "\"not testable at this scale\" (the section on KFTT at more than one size shows it at two sizes, "
      "where trained).")
    w("")
    w("| target | measured | met |")
    w("|---|---|---|")
    for target, measured, met in rows:
        w(f"| {target} | {measured} | {met} |")
    w("")


def curves(study: Study, w, fig_dir):
    from fairseq_luong.analysis.plots import plot_panels

    panels = []
    for title, names in (("Multi30k, Table 1 (seed 1)", [r.system for r in TABLE1[:6]]),
                         ("Multi30k, Table 4 (seed 1)", [name for _, name, *_ in TABLE4]),
                         ("KFTT Ja-En", [s for _, s in FIG2_SYSTEMS] + ["kftt_localm_general_feed"])):
        series = []
        for name in names:
            xs, ys = valid_curve(os.path.join(study.system_dir(name, 1), "train.log"))
            if xs:
                series.append((name, xs, ys))
        if series:
            panels.append(("epoch", f"valid ppl, {title}", series, True))
    series = []
    for name in PERSPE_SYSTEMS:
        for seed in PERSPE_SEEDS:
            xs, ys = valid_curve(os.path.join(perspe_dir(study, name, seed), "train.log"))
            if xs:
                series.append((f"{name} s{seed}", xs, ys))
    if series:
        panels.append(("epoch", "valid ppl, perSPE (small_parallel_enja)", series, True))
    if not panels:
        return
    png = plot_panels(panels, os.path.join(fig_dir, "learning_curves.png"))
    w("## Learning curves")
    w("")
    w("Validation perplexity after each epoch, seed 1 of each system (perSPE: every seed); each curve "
      "ends where its schedule stopped it (the convergence table above gives every seed).")
    w("")
    w(f"![learning curves]({rel(png, os.path.dirname(fig_dir))})")
    w("")


def changes(study: Study, w):
    """Each system against the first study (PREVIOUS_RESULTS), means over the seeds both have."""
    before = previous_results()
    now = {(r["system"], int(r["seed"])): r for r in all_results(study)}
    if not before or not now:
        return
    w(f"## What changed against the first study (commit 5d3782f; results in `git show {PREVIOUS_RESULTS}`)")
    w("")
    w("The first study trained every system 10 epochs with the paper's fixed halving (after epoch 5), at "
      "2 x 128, and evaluated the last checkpoint; its perSPE pair trained on KFTT En→Ja. This one trains "
      f"every system until the rate has been halved at least {HALVINGS} times on plateaus and the curve is "
      "flat (the convergence table), "
      f"Multi30k at 2 x {SIZES['m30k']} and KFTT at 2 x {SIZES['kftt']} with Adam"
      f"{' in bfloat16' if PRECISION else ''}, and evaluates the checkpoint of the best validation "
      "loss; perSPE trains on small_parallel_enja, the data its recipe's preset is made for. Means over "
      "the seeds of each; Δ = now - before.")
    w("")
    w("| system | seeds before / now | epochs before / now | BLEU before | BLEU now | Δ BLEU | test ppl before "
      "| test ppl now | +unk before | +unk now |")
    w("|---|---|---|---|---|---|---|---|---|---|")
    names = list(dict.fromkeys([n for n, _ in now] + [n for n, _ in before]))
    for name in names:
        b = [r for (n, _), r in sorted(before.items()) if n == name]
        a = [r for (n, _), r in sorted(now.items()) if n == name]

        def m(rows, key):
            return mean_sd([r["scores"].get(key) for r in rows])[0]

        epochs = [c.epochs for c in (convergence(os.path.join(study.path(Label(name, int(r["seed"])).rel),
                                                              "train.log"), name.startswith("perspe_"))
                                     for r in a) if c is not None]
        d = None if m(b, "bleu") is None or m(a, "bleu") is None else m(a, "bleu") - m(b, "bleu")
        w(f"| {name} | {len(b)} / {len(a)} | {'10' if b and not name.startswith('perspe_') else '-'} / "
          f"{fmt(mean_sd(epochs)[0], '.1f')} | {fmt(m(b, 'bleu'))} | {fmt(m(a, 'bleu'))} | {fmt(d, '+.2f')} | "
          f"{fmt(m(b, 'ppl'))} | {fmt(m(a, 'ppl'))} | {fmt(m(b, 'bleu_unk'))} | {fmt(m(a, 'bleu_unk'))} |")
    w("")


def heatmaps(study: Study, w, fig_dir):
    d = study.path("eval", "heatmaps")
    if not os.path.isdir(d):
        return
    pngs = [(label, os.path.join(d, label, f)) for label in sorted(os.listdir(d))
            for f in sorted(os.listdir(os.path.join(d, label))) if f.endswith(".png")]
    if not pngs:
        return
    w("## Attention on a long sentence (KFTT test)")
    w("")
    for label, png in pngs:
        w(f"{label}:")
        w("")
        w(f"![{label}]({rel(png, os.path.dirname(fig_dir))})")
        w("")


def budget(study: Study, w):
    w("## Time")
    w("")
    total = 0.0
    rows = []
    for system, seed in trainings():
        m = training_minutes(os.path.join(study.system_dir(system.name, seed), "train.log"))
        if m is not None:
            total += m
            rows.append((f"{system.name}.s{seed}", m))
    base = study.path("perspe", "systems")
    for name in PERSPE_SYSTEMS:
        for seed in PERSPE_SEEDS:
            m = training_minutes(os.path.join(base, name, f"seed{seed}", "train.log"))
            if m is not None:
                total += m
                rows.append((f"perspe {name} seed {seed}", m))
    plural = "s" if len(rows) != 1 else ""
    w(f"{len(rows)} training{plural}, {total / 60:.1f} hours of fairseq-train wall clock in all: "
      + ", ".join(f"{n} {m:.1f}" for n, m in rows) + " (minutes).")
    w("")


# how a published training is remade (after `git checkout COMMIT`): one thread, as the study
# trained it; the thread count changes the numbers, and commits before run.sh set one thread
# for every step (2711d78 among them) use all cores unless told
REMAKE = "OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 bash examples/luong2015_in_form/run.sh one"


def trainings_table(study: Study, w):
    """Every training with its commit, its time, its scores and the command that remakes it."""
    rows = all_results(study)
    w("## The trainings and how to remake each")
    w("")
    w("Each row was trained, evaluated and published (`run.sh one SYSTEM SEED`) by the commit it "
      "names, two trainings at a time, one thread each, on the project's machine (2 CPU cores, no GPU; "
      "the study's README names the CPU of each working period). To remake one: `git checkout COMMIT`, "
      "then the command (one thread, as the study trained it: the thread count changes the numbers); it "
      "trains into `--work-dir` and, where the result is published already, says whether its scores are "
      "the same. On another kind of CPU a remake comes close, not bit for bit: `m30k_localp_general_feed` seed 3, "
      "remade from commit 1c7d666 with its command below on an AVX2 AMD EPYC, gave 28.94 BLEU against the "
      "published 30.21, and test perplexity 4.95 against 4.95; its validation loss differed from epoch 1 on "
      "(92.2 against 97.4). That is within the seeds' spread, but not bit for bit: a training is reproducible "
      "bit for bit only on the same kind of CPU.")
    w("")
    w("| training | commit | minutes | scores | command |")
    w("|---|---|---|---|---|")
    for r in rows:
        scores = ", ".join(f"{k} {v:.2f}" for k, v in r["scores"].items() if v is not None)
        commit = r["commit"][:10] + (" with uncommitted changes" if "+" in r["commit"] else "")
        w(f"| {r['system']} seed {r['seed']} | {commit} | {fmt(r.get('train_minutes'), '.1f')} | "
          f"{scores} | `{REMAKE} {r['system']} {r['seed']}` |")
    missing_json = study.path("eval", "missing.json")
    missing = (load_json(missing_json) or {}).get("missing", {})
    finished = committed_at(missing_json)
    published_at = {f"{r['system']}.s{r['seed']}": r.get("published") for r in rows}
    for row, members in missing.items():
        waiting = [m for m in members if m not in published_at]
        since = [m for m in members if m in published_at and finished is not None
                 and published_at[m] is not None and utc(published_at[m]) > finished]
        lost = [m for m in members if m in published_at and m not in since]
        w("")
        if waiting:
            w(f"**{row}** waits for {', '.join(waiting)}: not trained yet.")
        if since:
            w(f"**{row}**: {', '.join(since)} trained after `run.sh finish` last ran; it makes this row when it "
              "runs again (the study runs it at its end).")
        if lost:
            w(f"**{row}** lacks the checkpoints of {', '.join(lost)}: published, but not in the work folder "
              "where `finish` ran (a checkpoint stays in the work folder, out of git); remake them with "
              + "; ".join(f"`{REMAKE} {m.rsplit('.s', 1)[0]} {m.rsplit('.s', 1)[1]}`" for m in lost)
              + ", then `run.sh finish`.")
    w("")
