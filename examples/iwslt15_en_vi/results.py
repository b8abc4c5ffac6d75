#!/usr/bin/env python3
"""The IWSLT'15 En-Vi results table: our systems beside the published ones (run.sh table).

  results.py table [NAME=WORK/systems/NAME/final.json ...] --work WORK
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
come from its fairseq-train log. Needs neither fairseq nor torch.
"""
import argparse
import importlib.util
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
spec = importlib.util.spec_from_file_location("recipe_tools", os.path.join(HERE, "..", "common", "recipe_tools.py"))
recipe_tools = importlib.util.module_from_spec(spec)
spec.loader.exec_module(recipe_tools)

# The published results (issue 61; their papers and repositories): tokenised BLEU, case-sensitive,
# vocabularies of the words seen >= 5 times. (system, tst2012 greedy, beam, tst2013 greedy, beam, settings)
ANCHORS = [
    ("Luong & Manning 2015 (Stanford)", None, None, None, 23.3, "the authors' own system"),
    ("TensorFlow NMT tutorial", 23.2, 23.8, 25.5, 26.1,
     "2 x 512 LSTM, bidirectional first layer, scaled Luong attention, dropout 0.2, SGD 1.0, 12K steps "
     "of 128 sentences, beam 10"),
    ("Joey NMT iwslt_envi_luong", 23.2, 23.8, 25.8, 26.5,
     "Luong attention, input feeding, SGD 1.0 halved on plateau, beam 10"),
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
    """The machines a training ran on (each start's recipe.sh line, recipes/machine.py's
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


def cmd_table(args):
    print("| system | tst2012 greedy | tst2012 beam | tst2013 greedy | tst2013 beam | tst2013 beam +unk "
          "| tst2013 sacreBLEU (detok.) | chosen on tst2012 | epochs | hours | train words/s | trained on | settings |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for name, g12, b12, g13, b13, how in ANCHORS:
        print(f"| {name} | {cell(g12, '.1f')} | {cell(b12, '.1f')} | {cell(g13, '.1f')} | {cell(b13, '.1f')} "
              f"| - | - | - | - | - | - | - | {how} |")
    for spec in args.systems:
        name, _, path = spec.partition("=")
        final = load(path)
        choice = final["choice"]
        beam = choice["beam"]
        score = lambda s, b, unk=False, key="bleu": (lambda r: None if r is None else float(r[key]))(  # noqa: E731
            row_of(final, s, b, unk))
        t = training(args.work, name) or {}
        chosen = f"model {choice['model']}, beam {beam}, lenpen {choice['lenpen']}"
        print(f"| {name} | {cell(score('tst2012', 1))} | {cell(score('tst2012', beam))} | "
              f"{cell(score('tst2013', 1))} | {cell(score('tst2013', beam))} | {cell(score('tst2013', beam, True))} | "
              f"{cell(score('tst2013', beam, key='sacrebleu'))} | {chosen} | {cell(t.get('epochs'), 'd')} | "
              f"{cell(t.get('hours'), '.2f')} | {cell(t.get('wps'), '.0f')} | "
              f"{' + '.join(t.get('machines') or []) or 'not recorded'} | this recipe (README.md) |")
    print()
    print("BLEU: sacreBLEU --tokenize none on the tokenised text, case-sensitive (multi-bleu.perl's, the "
          "anchors'); greedy is beam 1. sacreBLEU (detok.): both sides Moses-detokenised, 13a. Everything "
          "chosen on tst2012; tst2013 translated once per final model. Hours and words/s: fairseq-train's "
          "own, pauses included; trained on: the machine of each start of the training (recipe.sh's "
          "'machine:' lines in its log; not recorded before they were written), so hours and words/s "
          "compare systems only where they name the same one.")


# publish: each translation of final.json under a name of its own (the chosen beam and length
# penalty: NAME.SET.hyp; beam 1: NAME.SET.greedy.hyp; with --replace-unk: NAME.SET.unk.hyp)
def published_name(name, row, chosen_beam):
    kind = ".unk" if row["unk"] == "1" else "" if int(row["beam"]) == int(chosen_beam) else ".greedy"
    return f"{name}.{row['set']}{kind}.hyp"


# a system's own files besides its translations and heat maps, published as NAME.FILE
SYSTEM_FILES = ("train.log", "curve.tsv", "options", "code")
TABLE_FILES = ("results.md", "bleu_by_length.md", "bleu_by_length.png", "curves.md", "curves.png")


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
        choice = dict(final["choice"], model_path=os.path.basename(final["choice"]["model_path"]))
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


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("table", help="the results table")
    p.add_argument("systems", nargs="*", metavar="NAME=FINAL_JSON")
    p.add_argument("--work", required=True)
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
    {"table": cmd_table, "hyp": cmd_hyp, "publish": cmd_publish, "restore": cmd_restore}[args.command](args)


if __name__ == "__main__":
    sys.exit(main())
