#!/usr/bin/env python3
"""Score perSPE translations, and tabulate systems over seeds (mean and spread).

  python score.py score --hyp test.hyp --ref raw/test.ja --json bleu.json
  python score.py table --work WORK [--note TEXT ...] NAME=SEED,SEED [NAME=SEED ...]

score compares the hypotheses with the *raw* reference file, both passed
through the data path's one normalisation (fairseq_luong.data.text.
normalize_line: NFKC, control and format characters, spacing) and then
tokenised by sacreBLEU's ja-mecab (MeCab + IPADIC). The model writes
normalised text (its SentencePiece pieces spell the normalised training
data), so the reference must be normalised alike: a raw ASPEC reference keeps
full-width digits and Latin letters that no hypothesis can contain. WAT's own
ASPEC evaluation likewise converts both sides alike (half-width to full-width
with h2z before segmenting). The BLEU against the unnormalised reference is
kept in the JSON file for comparison, never reported as the score.

table reads WORK/systems/NAME/seedS/bleu.json and train.log of the seeds it is
given (NAME=S,S,...: run.sh gives the seeds of SEEDS whose scores are fresh) and
prints a Markdown table: BLEU per seed, mean, sample standard deviation, range,
chrF2, updates and training minutes, then the notes (--note: what is missing).
"""
import argparse
import json
import re
import statistics
import sys
from pathlib import Path

COMPARED = ("hypotheses and the raw reference, both normalised by "
            "fairseq_luong.data.text.normalize_line (NFKC, control/format characters, "
            "spacing), tokenised by sacreBLEU ja-mecab (MeCab + IPADIC)")


class ScoreError(ValueError):
    """Input score.py cannot use; the message names the file."""


def score(hyp_path, ref_path):
    from sacrebleu.metrics import BLEU, CHRF

    from fairseq_luong.data.text import DataError, iter_lines, normalize_line

    try:
        hyps = [line for _, line in iter_lines(hyp_path)]
        refs = [line for _, line in iter_lines(ref_path)]
    except DataError as e:
        raise ScoreError(str(e)) from e
    if len(hyps) != len(refs):
        raise ScoreError(f"{hyp_path} has {len(hyps)} lines but {ref_path} has {len(refs)}")
    hyps_norm = [normalize_line(h) for h in hyps]
    refs_norm = [normalize_line(r) for r in refs]
    bleu, chrf = BLEU(tokenize="ja-mecab"), CHRF()
    result = bleu.corpus_score(hyps_norm, [refs_norm])
    return {
        "BLEU": round(result.score, 2),
        "chrF2": round(chrf.corpus_score(hyps_norm, [refs_norm]).score, 2),
        "BLEU details": str(result),
        "signature": str(bleu.get_signature()),
        "compared": COMPARED,
        "sentences": len(hyps),
        "references normalisation changed": sum(r != n for r, n in zip(refs, refs_norm)),
        "BLEU vs unnormalised reference": round(
            BLEU(tokenize="ja-mecab").corpus_score(hyps, [refs]).score, 2),
        "hypotheses": str(hyp_path),
        "reference": str(ref_path),
    }


def seed_dirs(work, name, seeds):
    """The folders of the given seeds (all must hold a bleu.json)."""
    dirs = [Path(work) / "systems" / name / f"seed{seed}" for seed in seeds]
    for d in dirs:
        if not (d / "bleu.json").is_file():
            raise ScoreError(f"{d}/bleu.json not found (run: run.sh eval {name})")
    return dirs


def training(seed_dir):
    """(updates, minutes) from fairseq-train's log."""
    try:
        log = (seed_dir / "train.log").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None, None
    updates = re.findall(r"num_updates (\d+)", log)
    seconds = sum(float(s) for s in re.findall(r"done training in ([\d.]+) seconds", log))
    return (int(updates[-1]) if updates else None), seconds / 60


def table(work, systems, notes=(), decoding=None):
    """The Markdown table of ``systems`` ([(NAME, [seed, ...])]); a system without seeds
    gets a row of dashes; ``notes`` (what is missing) follow the table."""
    rows = []
    cols = ["system", "seeds", "BLEU per seed", "mean", "sd", "range", "chrF2 mean", "updates",
            "minutes per seed"]
    for name, seeds in systems:
        if not seeds:
            rows.append(dict({c: "-" for c in cols}, system=name, empty=True))
            continue
        dirs = seed_dirs(work, name, seeds)
        scores = [json.loads((d / "bleu.json").read_text()) for d in dirs]
        bleus = [s["BLEU"] for s in scores]
        runs = [training(d) for d in dirs]
        rows.append({
            "system": name,
            "seeds": ", ".join(d.name[4:] for d in dirs),
            "BLEU per seed": " / ".join(f"{b:.2f}" for b in bleus),
            "mean": statistics.mean(bleus),
            "sd": statistics.stdev(bleus) if len(bleus) > 1 else float("nan"),
            "range": f"{min(bleus):.2f}-{max(bleus):.2f}",
            "chrF2 mean": statistics.mean(s["chrF2"] for s in scores),
            "updates": "/".join(sorted({str(u) for u, _ in runs if u is not None})) or "?",
            "minutes per seed": statistics.mean(m for _, m in runs if m is not None)
            if any(m for _, m in runs) else float("nan"),
            "signature": scores[0]["signature"],
        })
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for row in rows:
        lines.append("| " + " | ".join(cell(row[c]) for c in cols) + " |")
    scored = [r for r in rows if not r.get("empty")]
    if scored:
        base = scored[0]
        for row in scored[1:]:
            lines.append(f"\n{row['system']} - {base['system']}: {row['mean'] - base['mean']:+.2f} "
                         f"BLEU (mean over seeds; seed sd {cell(base['sd'])} and {cell(row['sd'])})")
        lines.append(f"\nBLEU: {COMPARED}; {base['signature']}")
    if decoding:
        lines.append(f"\nDecoding: {decoding}.")
    if notes:
        lines.append("\nMissing (not in the table):")
        lines.extend(f"- {note}" for note in notes)
    return "\n".join(lines)


def cell(value):
    if isinstance(value, float):
        return "-" if value != value else f"{value:.2f}"  # nan: one seed has no spread
    return str(value)


def main(argv=None):
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        epilog=__doc__.split("\n\n", 1)[1],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = parser.add_subparsers(dest="command", required=True)
    s = sub.add_parser("score", help="BLEU and chrF2 of one hypothesis file")
    s.add_argument("--hyp", required=True, help="detokenised hypotheses, one a line, in order")
    s.add_argument("--ref", required=True, help="the raw reference file")
    s.add_argument("--json", required=True, help="where to write the scores")
    t = sub.add_parser("table", help="mean and spread over seeds of finished systems")
    t.add_argument("--work", required=True, help="run.sh's WORK folder")
    t.add_argument("--note", action="append", default=[], help="a line for the notes under the table")
    t.add_argument("--decoding", help="how the translations were made, for the notes")
    t.add_argument("systems", nargs="+", help="NAME=SEED,SEED,... (the seeds to show; none: a row of dashes)")
    args = parser.parse_args(argv)
    try:
        if args.command == "score":
            scores = score(args.hyp, args.ref)
            Path(args.json).write_text(json.dumps(scores, ensure_ascii=False, indent=1) + "\n")
        else:
            systems = []
            for item in args.systems:
                name, _, seeds = item.partition("=")
                systems.append((name, [x for x in seeds.split(",") if x]))
            print(table(args.work, systems, args.note, args.decoding))
    except ScoreError as e:
        sys.exit(f"score.py: error: {e}")


if __name__ == "__main__":
    main()
