#!/usr/bin/env python3
"""The IWSLT'15 En-Vi results table: our systems beside the published ones (run.sh table).

  results.py table [NAME=WORK/systems/NAME/final.json ...] --work WORK [--data DATA]
                                     the table; with --data, chrF2 and the paired bootstrap
  results.py hyp FINAL_JSON SET      the chosen translation of SET (tst2012 or tst2013)
  results.py publish [NAME=FINAL_JSON ...] --work WORK --data DATA --results DIR
                                     what anyone can re-score, into DIR (run.sh publish)
  results.py restore NAME... --results DIR --work WORK
                                     publish's inverse: WORK/systems/NAME from DIR's files, for
                                     the table only (run.sh restore)

Each system's final.json (run.sh eval) holds what was chosen on tst2012 (model, beam,
length penalty) and a row per translation: set, beam, length penalty, --replace-unk, tokenised
case-sensitive BLEU (sacreBLEU --tokenize none: the anchors' multi-bleu.perl) and sacreBLEU on
Moses-detokenised text. The training's epochs, updates, hours, words per second and machines
come from its fairseq-train log, its protocol from its options. A system NAME.sN is NAME
trained with seed N: the table adds a row with the mean of NAME's seeds. With --data, chrF2
is scored on the same tokenised text as BLEU, and sacreBLEU's paired bootstrap (1,000
resamples) compares each system's tst2013 translation with lstm's (WORK/significance.md).
Needs neither fairseq nor torch.
"""
import argparse
import importlib.util
import json
import os
import re
import statistics
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
spec = importlib.util.spec_from_file_location("recipe_tools", os.path.join(HERE, "..", "common", "recipe_tools.py"))
recipe_tools = importlib.util.module_from_spec(spec)
spec.loader.exec_module(recipe_tools)

# The published results (their papers and repositories): tokenised BLEU (multi-bleu), case-sensitive,
# the words seen >= 5 times or subwords. (system, tst2012 greedy, beam, tst2013 greedy, beam, settings)
ANCHORS = [
    ("Luong & Manning 2015 (Stanford)", None, None, None, 23.3, "the authors' own system"),
    ("TensorFlow NMT tutorial", 23.2, 23.8, 25.5, 26.1,
     "2 x 512 LSTM, bidirectional first layer, scaled Luong attention, dropout 0.2, SGD 1.0, 12K steps "
     "of 128 sentences, beam 10"),
    ("Joey NMT iwslt_envi_luong", 23.2, 23.8, 25.8, 26.5,
     "Luong attention, input feeding, SGD 1.0 halved on plateau, beam 10"),
    ("Joey NMT RNN (xnmt-style config)", None, None, None, 27.7, "recurrent, beam 5"),
    ("NPMT (Huang et al. 2018)", None, None, None, 27.69, "phrase-based neural MT"),
    ("Transformer-DyNet 4 x 512", None, None, None, 28.85, "Transformer, word vocabularies; 2-run ensemble 29.72"),
    ("SACT (Lin et al. 2018)", None, None, None, 29.12,
     "LSTM encoder-decoder: the best supervised recurrent result we found"),
    ("CVT (Clark et al. 2018)", None, None, None, 29.6, "uses extra unlabeled text (ELMo: 29.3)"),
    ("Transformers without Tears (Nguyen & Salazar 2019)", None, None, None, 32.8, "Transformer, BPE: for context"),
]


def load(path):
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def row_of(final, set_name, beam, unk=False):
    """The final.json row of SET at BEAM (the chosen length penalty; greedy: 1.0), or None."""
    for r in final["rows"]:
        if r["set"] == set_name and int(r["beam"]) == int(beam) and r["unk"] == ("1" if unk else "0"):
            return r
    return None


def cmd_hyp(args):
    final = load(args.final)
    r = row_of(final, args.set, final["choice"]["beam"])
    if r is None:
        raise SystemExit(f"error: {args.final}: no {args.set} translation at the chosen beam")
    print(r["hyp"])


MACHINE = " machine: "  # recipe.sh's line at each start of a training: "== DATE TIME machine: DESCRIPTION"


def machines(train_log):
    """The machines a training ran on (each start's recipe.sh line, scripts/bench/machine.py's
    description), each once, in the order they first ran it; [] for a log from before the
    recipes named them."""
    seen = []
    with open(train_log, encoding="utf-8", errors="replace") as f:
        for line in f:
            if line.startswith("== ") and MACHINE in line:
                description = line.split(MACHINE, 1)[1].strip()
                if description not in seen:
                    seen.append(description)
    return seen


def training(work, name):
    """Epochs, updates, hours, mean words per second and machines of WORK/systems/NAME's training."""
    path = os.path.join(work, "systems", name, "train.log")
    if not os.path.exists(path):
        return None
    row = recipe_tools.system_row(work, name)
    wps = [r.stats["wps"] for r in recipe_tools.package_module("analysis.training_log").read_training_log(path).train
           if "wps" in r.stats]
    return dict(epochs=row["epochs"], updates=row["updates"], hours=row["wall"] and row["wall"] / 60,
                best_ppl=row["best_ppl"], params=row["params"], wps=sum(wps) / len(wps) if wps else None,
                machines=machines(path))


def cell(x, spec=".2f"):
    return "-" if x is None else format(x, spec)


def protocol(work, name):
    """How WORK/systems/NAME was trained, from its recorded options (run.sh's key): the stopping
    rule, the epoch budget and the precision; None without options (an ensemble)."""
    path = os.path.join(work, "systems", name, "options")
    if not os.path.exists(path):
        return None
    with open(path, encoding="utf-8") as f:
        options = f.read()
    epochs = re.search(r"--max-epoch (\d+)", options)
    budget = f"{epochs.group(1)} epochs" if epochs else "no epoch cap"
    shrinks = re.search(r"--min-shrinks (\d+)", options)
    if "reduce_lr_on_plateau_until_flat" in options:
        budget = f"until flat after {shrinks.group(1) if shrinks else 7} halvings, at most {budget}"
    return f"{budget}, {'bf16 autocast' if ' --amp' in options else 'float32'}"


def seed_base(name):
    """NAME of NAME.sN (a seed of NAME), else None."""
    found = re.fullmatch(r"(.+)\.s\d+", name)
    return found.group(1) if found else None


def chrf(hyp, ref):
    """chrF2 (sacreBLEU's CHRF: character 6-grams, beta 2) of the file hyp against ref."""
    from sacrebleu.metrics import CHRF

    with open(hyp, encoding="utf-8") as h, open(ref, encoding="utf-8") as r:
        return CHRF().corpus_score([line.rstrip("\n") for line in h], [[line.rstrip("\n") for line in r]]).score


COLUMNS = ("tst2012 greedy", "tst2012 beam", "tst2012 chrF2", "tst2013 greedy", "tst2013 beam", "tst2013 beam +unk",
           "tst2013 chrF2", "tst2013 sacreBLEU (detok.)")


def scores(final, data):
    """The table's score columns (COLUMNS) of one final.json; chrF2 only with data."""
    beam = final["choice"]["beam"]

    def score(s, b, unk=False, key="bleu"):
        r = row_of(final, s, b, unk)
        return None if r is None else float(r[key])

    def chrf_of(s):
        r = row_of(final, s, beam)
        return None if r is None or data is None else chrf(r["hyp"], os.path.join(data, f"{s}.vi"))

    return [score("tst2012", 1), score("tst2012", beam), chrf_of("tst2012"), score("tst2013", 1),
            score("tst2013", beam), score("tst2013", beam, True), chrf_of("tst2013"),
            score("tst2013", beam, key="sacrebleu")]


def trained_on(training_row, choice):
    """The machines a system trained on ('-' for an ensemble, which is not trained)."""
    if choice.get("members"):
        return "-"
    return " + ".join(training_row.get("machines") or []) or "not recorded"


def settings(choice):
    """The settings cell of one of our systems: the recipe's, or an ensemble's members."""
    if choice.get("members"):
        return f"ensemble of {', '.join(choice['members'])} (each member's chosen model)"
    return "this recipe (README.md)"


def mean_cell(values):
    """A mean row's cell: the mean and each seed's value, "mean (a / b)"."""
    if any(v is None for v in values):
        return "-"
    return f"{statistics.mean(values):.2f} ({' / '.join(format(v, '.2f') for v in values)})"


def cmd_table(args):
    print("| system | protocol | " + " | ".join(COLUMNS) + " | chosen on tst2012 | epochs | hours | train words/s "
          "| trained on | settings |")
    print("|" + "---|" * (len(COLUMNS) + 8))
    for name, g12, b12, g13, b13, how in ANCHORS:
        cells = [cell(g12, "g"), cell(b12, "g"), "-", cell(g13, "g"), cell(b13, "g"), "-", "-", "-"]  # as published
        print(f"| {name} | - | {' | '.join(cells)} | - | - | - | - | - | {how} |")
    by_seed = {}  # NAME: the score columns of NAME and each NAME.sN tabled
    rows = []
    for spec in args.systems:
        name, _, path = spec.partition("=")
        final = load(path)
        choice = final["choice"]
        t = training(args.work, name) or {}
        values = scores(final, args.data)
        by_seed.setdefault(seed_base(name) or name, []).append((name, values))
        chosen = f"model {choice['model']}, beam {choice['beam']}, lenpen {choice['lenpen']}"
        rows.append(f"| {name} | {protocol(args.work, name) or '-'} | {' | '.join(cell(v) for v in values)} | "
                    f"{chosen} | {cell(t.get('epochs'), 'd')} | {cell(t.get('hours'), '.2f')} | "
                    f"{cell(t.get('wps'), '.0f')} | {trained_on(t, choice)} | {settings(choice)} |")
    print("\n".join(rows))
    for base, seeds in by_seed.items():
        if len(seeds) > 1:
            names = ", ".join(n for n, _ in seeds)
            cells = [mean_cell([v[i] for _, v in seeds]) for i in range(len(COLUMNS))]
            print(f"| {base}, mean of {len(seeds)} seeds | - | {' | '.join(cells)} | - | - | - | - | - | {names} |")
    print()
    print("BLEU: sacreBLEU --tokenize none on the tokenised text, case-sensitive (multi-bleu.perl's, the "
          "anchors'); greedy is beam 1. chrF2: sacreBLEU's chrF on the same text, at the chosen beam. "
          "sacreBLEU (detok.): both sides Moses-detokenised, 13a. Everything chosen on tst2012; tst2013 "
          "translated once per final model. Protocol: the training's stopping rule, epoch budget and precision, "
          "from its options. NAME.sN: NAME trained with seed N; a mean row gives the mean and each seed's value. "
          "Hours and words/s: fairseq-train's own, pauses included; trained on: the machine of each start of "
          "the training (recipe.sh's 'machine:' lines in its log; not recorded before they were written), so "
          "hours and words/s compare systems only where they name the same one.")


# publish: each translation of final.json under a name of its own (the chosen beam and length
# penalty: NAME.SET.hyp; beam 1: NAME.SET.greedy.hyp; with --replace-unk: NAME.SET.unk.hyp)
def published_name(name, row, chosen_beam):
    kind = ".unk" if row["unk"] == "1" else "" if int(row["beam"]) == int(chosen_beam) else ".greedy"
    return f"{name}.{row['set']}{kind}.hyp"


# a system's own files besides its translations and heat maps, published as NAME.FILE
SYSTEM_FILES = ("train.log", "curve.tsv", "options", "code")
TABLE_FILES = ("results.md", "significance.md", "bleu_by_length.md", "bleu_by_length.png", "curves.md", "curves.png")


def cmd_publish(args):
    """Copy each system's translations (one tokenised line per source line: checked against
    DATA/SET.en), its final.json (the translations by their published names), its training log,
    learning curve, attention map, options and code version, and the table's files, into
    --results. Nothing is written unless every file is there and whole."""
    import glob
    import shutil

    copies, finals = [], {}
    for spec in args.systems:
        name, _, path = spec.partition("=")
        final, system = load(path), os.path.join(args.work, "systems", name)
        rows = []
        for r in final["rows"]:
            with open(os.path.join(args.data, f"{r['set']}.en"), encoding="utf-8") as f:
                n_source = sum(1 for _ in f)
            with open(r["hyp"], encoding="utf-8") as f:
                n_hyp = sum(1 for _ in f)
            if n_hyp != n_source:
                raise SystemExit(f"error: {r['hyp']} has {n_hyp} lines, {r['set']}.en {n_source}: "
                                 f"run.sh eval {name} again")
            target = published_name(name, r, final["choice"]["beam"])
            copies.append((r["hyp"], target))
            rows.append(dict(r, hyp=target))
        for source in SYSTEM_FILES:
            if os.path.exists(os.path.join(system, source)):
                copies.append((os.path.join(system, source), f"{name}.{source}"))
        maps = sorted(glob.glob(os.path.join(system, "attention_*.png")))
        copies += [(png, f"{name}.{os.path.basename(png)}") for png in maps]
        choice = dict(final["choice"], model_path=":".join(  # an ensemble's: one path a member
            os.path.basename(p) for p in final["choice"]["model_path"].split(":")))
        finals[f"{name}.final.json"] = dict(choice=choice, rows=rows)
    copies += [(os.path.join(args.work, f), f) for f in TABLE_FILES if os.path.exists(os.path.join(args.work, f))]
    missing = [src for src, _ in copies if not os.path.exists(src)]
    if missing:
        raise SystemExit(f"error: {missing[0]} is not there: run.sh eval and table first")
    os.makedirs(args.results, exist_ok=True)
    for src, target in copies:
        shutil.copyfile(src, os.path.join(args.results, target))
    for target, final in finals.items():
        with open(os.path.join(args.results, target), "w", encoding="utf-8") as f:
            json.dump(final, f, indent=1)
            f.write("\n")
    for _, target in copies + [(None, t) for t in finals]:
        print(os.path.join(args.results, target))


RESTORED = "restored"  # WORK/systems/NAME/restored: the system came from published files


def cmd_restore(args):
    """WORK/systems/NAME as the table and publish read it (final.json, its translations, the
    training log, curve, heat map, options and code version), from what publish wrote into
    --results: a system published from a work folder that is gone (another machine, an earlier
    session) is tabled beside the systems trained here. Its checkpoints are not restored: the
    folder is marked RESTORED, and run.sh refuses to train or evaluate it there. A folder that
    holds a system trained here is never overwritten. Nothing is written unless every file is
    there."""
    import glob
    import shutil

    plans = []
    for name in args.names:
        published = os.path.join(args.results, f"{name}.final.json")
        if not os.path.exists(published):
            raise SystemExit(f"error: {published} is not there: nothing published as {name}")
        try:
            final = load(published)
            rows = final["rows"]
            hyps = [r["hyp"] for r in rows]
        except (ValueError, KeyError, TypeError) as err:
            raise SystemExit(f"error: {published}: not a final.json that publish writes ({err})")
        system = os.path.join(args.work, "systems", name)
        if os.path.exists(system) and not os.path.exists(os.path.join(system, RESTORED)):
            raise SystemExit(f"error: {system} holds a system trained or evaluated here: "
                             f"restore {name} into another --work-dir")
        copies = [(os.path.join(args.results, h), os.path.join(system, "published", h)) for h in hyps]
        for target in SYSTEM_FILES:
            if os.path.exists(os.path.join(args.results, f"{name}.{target}")):
                copies.append((os.path.join(args.results, f"{name}.{target}"), os.path.join(system, target)))
        for png in sorted(glob.glob(os.path.join(glob.escape(args.results), f"{glob.escape(name)}.attention_*.png"))):
            copies.append((png, os.path.join(system, os.path.basename(png)[len(name) + 1:])))
        missing = [src for src, _ in copies if not os.path.exists(src)]
        if missing:
            raise SystemExit(f"error: {missing[0]} is not there ({published} names it)")
        restored = dict(final, rows=[dict(r, hyp=os.path.join(system, "published", r["hyp"])) for r in rows])
        plans.append((system, copies, restored))
    for system, copies, restored in plans:
        os.makedirs(os.path.join(system, "published"), exist_ok=True)
        for src, target in copies:
            shutil.copyfile(src, target)
        with open(os.path.join(system, "final.json"), "w", encoding="utf-8") as f:
            json.dump(restored, f, indent=1)
            f.write("\n")
        with open(os.path.join(system, RESTORED), "w", encoding="utf-8") as f:
            f.write(f"restored from {os.path.abspath(args.results)}: the table's files only, no checkpoints\n")
        print(system)


def cmd_significance(args):
    """sacreBLEU's paired bootstrap (1,000 resamples, its fixed seed) of each system's chosen
    tst2013 translation against the baseline's (the first NAME=FINAL_JSON), in BLEU
    (--tokenize none: the table's) and chrF2, as a Markdown table into --out."""
    import logging

    from sacrebleu.metrics import BLEU, CHRF
    from sacrebleu.significance import PairedTest

    logging.getLogger("sacrebleu").setLevel(logging.ERROR)  # its note that the text is tokenised

    def lines(path):
        with open(path, encoding="utf-8") as f:
            return [line.rstrip("\n") for line in f]

    systems = []
    for spec in args.systems:
        name, _, path = spec.partition("=")
        final = load(path)
        r = row_of(final, "tst2013", final["choice"]["beam"])
        if r is None:
            raise SystemExit(f"error: {name}: no tst2013 translation at the chosen beam")
        systems.append((name, lines(r["hyp"])))
    if len(systems) < 2:
        raise SystemExit("error: significance compares at least two systems, the baseline first")
    metrics = {"BLEU": BLEU(tokenize="none"), "chrF2": CHRF()}
    _, scores = PairedTest(systems, metrics, [lines(os.path.join(args.data, "tst2013.vi"))], test_type="bs",
                           n_samples=1000)()
    out = [f"tst2013, each system's chosen translation against {systems[0][0]}'s: sacreBLEU's paired bootstrap "
           "resampling (1,000 resamples), BLEU with --tokenize none (the table's) and chrF2; the score, the "
           "bootstrap mean and its 95 % interval, and p, the chance of a difference this large between two "
           "systems that do not differ (* below 0.05).", "",
           "| system | BLEU | p (BLEU) | chrF2 | p (chrF2) |", "|---|---|---|---|---|"]
    for i, name in enumerate(scores["System"]):
        cells = []
        for metric in metrics:
            r = scores[metric][i]
            p = getattr(r, "p_value", None)
            cells += [f"{r.score:.2f} ({float(r.mean):.2f} +- {float(r.ci):.2f})",
                      "baseline" if i == 0 else f"{p:.4f}{'*' if p < 0.05 else ''}"]
        out.append(f"| {name} | {' | '.join(cells)} |")
    with open(args.out, "w", encoding="utf-8") as f:
        f.write("\n".join(out) + "\n")
    print("\n".join(out))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("table", help="the results table")
    p.add_argument("systems", nargs="*", metavar="NAME=FINAL_JSON")
    p.add_argument("--work", required=True)
    p.add_argument("--data", help="the release (SET.vi): chrF2 against its references")
    p = sub.add_parser("significance", help="the paired bootstrap on tst2013 against the first system")
    p.add_argument("systems", nargs="+", metavar="NAME=FINAL_JSON")
    p.add_argument("--data", required=True, help="the release: tst2013.vi")
    p.add_argument("--out", required=True)
    p = sub.add_parser("hyp", help="the chosen translation of a set")
    p.add_argument("final")
    p.add_argument("set", choices=("tst2012", "tst2013"))
    p = sub.add_parser("publish", help="the files anyone can re-score, into --results")
    p.add_argument("systems", nargs="*", metavar="NAME=FINAL_JSON")
    p.add_argument("--work", required=True)
    p.add_argument("--data", required=True, help="the release: SET.en gives each set's line count")
    p.add_argument("--results", required=True)
    p = sub.add_parser("restore", help="WORK/systems/NAME from the files publish wrote into --results")
    p.add_argument("names", nargs="+", metavar="NAME")
    p.add_argument("--results", required=True)
    p.add_argument("--work", required=True)
    args = parser.parse_args(argv)
    {"table": cmd_table, "hyp": cmd_hyp, "publish": cmd_publish, "restore": cmd_restore,
     "significance": cmd_significance}[args.command](args)


if __name__ == "__main__":
    sys.exit(main())
