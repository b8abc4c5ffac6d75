#!/usr/bin/env python3
"""SPE/SPE against SPE/perSPE on small_parallel_enja, same data, model, budget and seed.

Runs the recipe examples/perspe/run.sh (PRESET=small: a 2+2-layer, 128-dim
Transformer on the CPU) for each system: prepare the data once, train each
system for the same number of updates with the same seed, translate the test
set (beam 5) and score it with sacreBLEU -tok ja-mecab. Prints a Markdown
table. Finished steps are reused, so a rerun only prints the table.

Usage:
  python scripts/benchmark_perspe.py [--max-update 1600] [--seeds 1] \\
      [--systems spe/spe,spe/perspe] [--work runs/perspe/small_parallel_enja]

Training and translation run under `flock --lock` (default
/tmp/fairseq_luong_heavy.lock; --lock '' to run without).
"""
import argparse
import json
import os
import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
RUN = REPO / "examples" / "perspe" / "run.sh"

# encoder/decoder positions, as in Oka et al. (2022), Tables 1, 3 and 4
SYSTEMS = {
    "spe/spe": ["--encoder-pos", "spe", "--decoder-pos", "spe"],
    "spe/perspe": ["--encoder-pos", "spe", "--decoder-pos", "perspe",
                   "--perturb-range", "1", "--perturb-unit", "phrase"],
    "spe/perspe-token2": ["--encoder-pos", "spe", "--decoder-pos", "perspe",
                          "--perturb-range", "2", "--perturb-unit", "token"],
    "spe/none": ["--encoder-pos", "spe", "--decoder-pos", "none"],
    "none/spe": ["--encoder-pos", "none", "--decoder-pos", "spe"],
    "rpe/rpe": ["--encoder-pos", "rpe", "--decoder-pos", "rpe"],
}


def system_dir(name, seed):
    return f"{name.replace('/', '_')}_seed{seed}"


def summary(work, name, seed, max_update):
    sdir = work / "systems" / system_dir(name, seed)
    log = (sdir / "train.log").read_text(encoding="utf-8")
    valid = [m for m in re.findall(r"valid on 'valid' subset \| loss ([\d.]+) \| nll_loss ([\d.]+)"
                                   r".*?num_updates (\d+)", log) if int(m[2]) == max_update]
    seconds = sum(float(s) for s in re.findall(r"done training in ([\d.]+) seconds", log))
    scores = {s["name"]: s for s in json.loads((sdir / "bleu.json").read_text())}
    return {
        "system": name, "seed": seed,
        "updates": max_update,
        "minutes": f"{seconds / 60:.1f}",
        "valid loss": valid[0][0] if valid else "?", "valid nll": valid[0][1] if valid else "?",
        "BLEU": f"{scores['BLEU']['score']:.2f}", "chrF2": f"{scores['chrF2']['score']:.2f}",
        "bleu signature": scores["BLEU"]["signature"],
    }


def main(argv=None):
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        epilog=__doc__.split("\n\n", 1)[1],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--data", default=str(REPO.parent / "shared" / "data" / "small_parallel_enja"),
                        help="folder with {train,dev,test}.{en,ja} (default: %(default)s)")
    parser.add_argument("--work", default=str(REPO / "runs" / "perspe" / "small_parallel_enja"),
                        help="run.sh's WORK folder (default: %(default)s)")
    parser.add_argument("--systems", default="spe/spe,spe/perspe",
                        help=f"comma-separated, from: {', '.join(SYSTEMS)} (default: %(default)s)")
    parser.add_argument("--max-update", type=int, default=1600, help="budget per system (default: %(default)s)")
    parser.add_argument("--seeds", default="1", help="comma-separated seeds (default: %(default)s)")
    parser.add_argument("--lock", default="/tmp/fairseq_luong_heavy.lock",
                        help="flock file for the heavy steps; '' for none (default: %(default)s)")
    args = parser.parse_args(argv)

    names = [s.strip() for s in args.systems.split(",") if s.strip()]
    unknown = [n for n in names if n not in SYSTEMS]
    if unknown:
        parser.error(f"unknown system(s) {', '.join(unknown)}; choose from {', '.join(SYSTEMS)}")
    seeds = [int(s) for s in args.seeds.split(",")]
    if not (Path(args.data) / "train.ja").exists():
        sys.exit(f"benchmark_perspe.py: error: {args.data}/train.ja not found")

    work = Path(args.work)
    env = dict(os.environ, DATA=args.data, WORK=str(work), PRESET="small", JA_SEGMENTED="1",
               MAX_UPDATE=str(args.max_update), PERSPE_LOCK=args.lock)
    bin_dir = str(Path(sys.executable).parent)
    if bin_dir not in env.get("PATH", "").split(os.pathsep):
        env["PATH"] = bin_dir + os.pathsep + env.get("PATH", "")

    def run(*words, seed=1):
        cmd = ["bash", str(RUN), *words]
        print("+ SEED=%d MAX_UPDATE=%d %s" % (seed, args.max_update, " ".join(cmd)), file=sys.stderr)
        subprocess.run(cmd, env=dict(env, SEED=str(seed)), check=True)

    run("prepare")
    for seed in seeds:
        for name in names:
            run("train", system_dir(name, seed), "--", *SYSTEMS[name], seed=seed)
            run("eval", system_dir(name, seed), seed=seed)

    rows = [summary(work, name, seed, args.max_update) for seed in seeds for name in names]
    cols = ["system", "seed", "updates", "minutes", "valid loss", "valid nll", "BLEU", "chrF2"]
    print(f"\nsmall_parallel_enja test (500 sentences), run.sh PRESET=small, "
          f"{args.max_update} updates, beam 5\n")
    print("| " + " | ".join(cols) + " |")
    print("|" + "---|" * len(cols))
    for row in rows:
        print("| " + " | ".join(str(row[c]) for c in cols) + " |")
    if len(seeds) > 1:
        print()
        for name in names:
            bleus = [float(r["BLEU"]) for r in rows if r["system"] == name]
            print(f"{name}: mean BLEU {sum(bleus) / len(bleus):.2f} over seeds {args.seeds} "
                  f"(min {min(bleus):.2f}, max {max(bleus):.2f})")
    print(f"\nBLEU signature: {rows[0]['bleu signature']}")


if __name__ == "__main__":
    main()
