#!/usr/bin/env python3
"""Copies of the plugin with one change each, for ``benchmark_speed.py --before COPY``.

A change whose worth only a GPU can show is measured there before it goes into the plugin:
this writes ``fairseq_luong/`` of a commit into DEST with that one change applied, and
``benchmark_speed.py --before DEST`` runs it as ``NAME@before`` rows beside the plugin as it
is, in the same run. Each change replaces one passage of one file and must match exactly
once, so a variant that no longer fits the code stops here instead of measuring the code
unchanged.

Variants:
  all_rows  the input-feeding decoder runs every row at every target step in training: no
            sorting by length, no narrowing of the loop's state when sentences end, no
            unpacking (``RowSchedule`` without lengths, as in beam search). The padded steps
            cost arithmetic; the schedule costs operations, which a launch-bound GPU pays for.
  one_gemm  on CUDA, the layers above the first feed the fused LSTM cell one GEMM on
            [input; h] with the bias as its input gates (expanded, not copied), where the
            plugin adds the bias with a GEMM on the input and multiplies h in a second one.
            ``benchmark_compile.py``'s "fused cell, one GEMM" row is this step alone.

Usage: python scripts/bench/plugin_variants.py NAME DEST [--commit main]
"""
import argparse
import os
import shutil
import subprocess
import sys
from typing import NamedTuple

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


class Change(NamedTuple):
    path: str  # relative to the repository
    old: str
    new: str


DECODER = "fairseq_luong/modules/luong_decoder.py"
VARIANTS = {
    "all_rows": Change(
        DECODER,
        "skip_padding=incremental_state is None and not need_weights)",
        "skip_padding=False)"),
    "one_gemm": Change(
        DECODER,
        "    n = below.size(1)\n    return fused_lstm_cell(torch.addmm(gates, below, W[:n]), h.mm(W[n:]), c)\n",
        "    hidden = torch.cat((below, h), 1).mm(W)  # rows x 4H\n"
        "    return fused_lstm_cell(gates.expand_as(hidden), hidden, c)  # the bias (4H) as the input gates\n"),
}


def make(name: str, dest: str, commit: str = "HEAD") -> str:
    """DEST/fairseq_luong: the plugin at COMMIT with variant NAME applied; DEST/COMMIT names
    both. Returns the changed file's path."""
    change = VARIANTS[name]
    if os.path.exists(dest):
        shutil.rmtree(dest)
    os.makedirs(dest)
    archive = subprocess.run(["git", "-C", REPO, "archive", commit, "fairseq_luong"], capture_output=True)
    if archive.returncode != 0:
        raise SystemExit(f"error: git archive {commit} failed: {archive.stderr.decode().strip()}")
    subprocess.run(["tar", "-x", "-C", dest], input=archive.stdout, check=True)
    target = os.path.join(dest, change.path)
    with open(target, encoding="utf-8") as f:
        text = f.read()
    found = text.count(change.old)
    if found != 1:
        raise SystemExit(f"error: variant {name}: {change.path} at {commit} holds the passage to change "
                         f"{found} times, not once: update VARIANTS in {os.path.relpath(__file__, REPO)}")
    with open(target, "w", encoding="utf-8") as f:
        f.write(text.replace(change.old, change.new))
    short = subprocess.run(["git", "-C", REPO, "rev-parse", "--short", commit], capture_output=True,
                           text=True).stdout.strip()
    with open(os.path.join(dest, "COMMIT"), "w", encoding="utf-8") as f:
        f.write(f"{short}+{name}\n")
    return target


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], epilog=__doc__.split("\n\n", 1)[1],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("name", choices=sorted(VARIANTS))
    parser.add_argument("dest", help="folder to write (replaced): DEST/fairseq_luong, DEST/COMMIT")
    parser.add_argument("--commit", default="HEAD", help="the plugin's commit to change (default: HEAD)")
    args = parser.parse_args(argv)
    target = make(args.name, args.dest, args.commit)
    print(f"plugin_variants.py: {args.dest}: fairseq_luong at {args.commit} with {args.name} ({target})",
          file=sys.stderr)


if __name__ == "__main__":
    main()
