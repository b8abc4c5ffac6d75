#!/usr/bin/env python3
"""Systems of Oka et al. (2022) on small_parallel_enja over several seeds: mean and spread.

Runs the recipe examples/perspe/run.sh with --preset small --table 1 (a
2+2-layer, 128-dim Transformer with shared embeddings on a joint 8000-piece
SentencePiece vocabulary, 2048-token batches, for a CPU): prepare the data once, train each
system once per seed with the same data, model and budget, translate the
test set (beam 5) and score it (sacreBLEU ja-mecab on normalised text), then
print the recipe's table: BLEU per seed, mean, sample standard deviation,
range, chrF2, updates and minutes. Finished steps are reused, so a rerun only
prints the table.

Usage:
  python scripts/bench/benchmark_perspe.py [--systems spe/spe,spe/perspe] [--seeds 1,2,3] \\
      [--max-update 2000] [--work runs/perspe/small_parallel_enja]

Training and translation run under `flock --lock` (default
/tmp/fairseq_luong_heavy.lock; --lock '' to run without), one step at a time.
"""
import argparse
import os
import subprocess
import sys
from pathlib import Path

from fairseq_luong.protocols import oka2022

REPO = Path(__file__).resolve().parents[2]
RUN = REPO / "examples" / "perspe" / "run.sh"

# encoder/decoder positions, as in Oka et al. (2022), Tables 1-4 (fairseq_luong/protocols/oka2022.py),
# named ENCODER/DECODER: spe/spe, spe/perspe, spe/pertoken2, ...
SYSTEMS = {s.name.replace("_", "/", 1): list(s.options) for s in oka2022.SYSTEMS}


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
    parser.add_argument("--seeds", default="1,2,3", help="comma-separated (default: %(default)s)")
    parser.add_argument("--max-update", type=int, default=2000, help="budget per system (default: %(default)s)")
    parser.add_argument("--lock", default="/tmp/fairseq_luong_heavy.lock",
                        help="flock file for the heavy steps; '' for none (default: %(default)s)")
    args = parser.parse_args(argv)

    names = [s.strip() for s in args.systems.split(",") if s.strip()]
    unknown = [n for n in names if n not in SYSTEMS]
    if unknown:
        parser.error(f"unknown system(s) {', '.join(unknown)}; choose from {', '.join(SYSTEMS)}")
    if not (Path(args.data) / "train.ja").exists():
        sys.exit(f"benchmark_perspe.py: error: {args.data}/train.ja not found")

    env = dict(os.environ)
    flags = ["--data", args.data, "--work-dir", args.work, "--preset", "small", "--table", "1", "--ja-segmented", "1",
             "--max-update", str(args.max_update), "--seeds", " ".join(args.seeds.split(",")), "--lock", args.lock]
    bin_dir = str(Path(sys.executable).parent)
    if bin_dir not in env.get("PATH", "").split(os.pathsep):
        env["PATH"] = bin_dir + os.pathsep + env.get("PATH", "")

    def run(*words):
        print(f"+ {' '.join(['run.sh', *flags, *words])}", file=sys.stderr)
        subprocess.run(["bash", str(RUN), *flags, *words], env=env, check=True)

    dirs = [name.replace("/", "_") for name in names]
    run("prepare")
    for name, sdir in zip(names, dirs):
        run("train", sdir, "--", *SYSTEMS[name])
        run("eval", sdir)
    print(f"\nsmall_parallel_enja test (500 sentences), run.sh --preset small --table 1, "
          f"{args.max_update} updates, beam 5, last checkpoint\n")
    sys.stdout.flush()
    run("table", *dirs)


if __name__ == "__main__":
    main()
