#!/usr/bin/env python3
"""Average the parameters of several fairseq checkpoints into one checkpoint.

fairseq's own scripts/average_checkpoints.py is not installed with the wheel;
this is the same operation with the same options: the model parameters of the
inputs are averaged (in float64, then cast back to each tensor's dtype); the
rest (config, optimizer state, training counters) is taken from the newest
input, so the result loads in fairseq-generate like any checkpoint.
Checkpoints load through fairseq (torch weights_only=True, the plugin's
allowlist).

Usage:
  python scripts/train/average_checkpoints.py --inputs ckpt/checkpoint3.pt ckpt/checkpoint4.pt --output avg.pt
  python scripts/train/average_checkpoints.py --inputs ckpt --num-update-checkpoints 5 --output avg.pt
  python scripts/train/average_checkpoints.py --inputs ckpt --num-epoch-checkpoints 5 --output avg.pt
"""
import argparse
import os
import re
import sys

import torch
from fairseq import checkpoint_utils
from omegaconf import OmegaConf
from tqdm import tqdm

import fairseq_luong  # noqa: F401  (checkpoint allowlist, clear load errors)
from fairseq_luong.errors import UserError

PATTERNS = {
    "update": re.compile(r"^checkpoint_\d+_(\d+)\.pt$"),
    "epoch": re.compile(r"^checkpoint(\d+)\.pt$"),
}


def last_checkpoints(folder, kind, n, upper_bound=None):
    """The ``n`` newest ``checkpoint{E}.pt`` (kind "epoch") or
    ``checkpoint_{E}_{U}.pt`` (kind "update") in ``folder``, oldest first."""
    found = []
    for name in os.listdir(folder):
        m = PATTERNS[kind].match(name)
        if m and (upper_bound is None or int(m.group(1)) <= upper_bound):
            found.append((int(m.group(1)), os.path.join(folder, name)))
    if len(found) < n:
        raise SystemExit(
            f"error: {folder}: {len(found)} {kind} checkpoints "
            f"({PATTERNS[kind].pattern}), --num-{kind}-checkpoints asks for {n}"
        )
    return [path for _, path in sorted(found)[-n:]]


def average(paths):
    """The newest checkpoint's state with ``model`` replaced by the mean over ``paths``."""
    total, keys, state = None, None, None
    for path in tqdm(paths, desc="averaging", unit="ckpt", disable=len(paths) < 3):
        state = checkpoint_utils.load_checkpoint_to_cpu(path)
        params = state["model"]
        if keys is None:
            keys = list(params)
            total = {k: params[k].to(torch.float64).clone() for k in keys}
        elif list(params) != keys:
            missing = set(keys) ^ set(params)
            raise SystemExit(
                f"error: {path}: its parameters differ from {paths[0]}'s "
                f"({sorted(missing)[:3]}...): checkpoints of different models cannot be averaged"
            )
        else:
            for k in keys:
                if params[k].shape != total[k].shape:
                    raise SystemExit(
                        f"error: {path}: parameter {k} has shape {tuple(params[k].shape)}, "
                        f"{paths[0]} has {tuple(total[k].shape)}"
                    )
                total[k] += params[k].to(torch.float64)
    dtypes = {k: v.dtype for k, v in state["model"].items()}
    state["model"] = {k: (total[k] / len(paths)).to(dtypes[k]) for k in keys}
    if OmegaConf.is_config(state.get("cfg")):
        # loading made it a DictConfig: store plain containers, as fairseq's trainer does
        state["cfg"] = OmegaConf.to_container(state["cfg"], resolve=True, enum_to_str=True)
    return state


def main(argv=None):
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        epilog=__doc__.split("\n\n", 1)[1],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--inputs", nargs="+", required=True,
                        help="checkpoint files, or one folder with --num-*-checkpoints")
    parser.add_argument("--output", required=True, help="where to write the averaged checkpoint")
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--num-update-checkpoints", type=int,
                       help="average the last N checkpoint_{epoch}_{update}.pt of the folder")
    group.add_argument("--num-epoch-checkpoints", type=int,
                       help="average the last N checkpoint{epoch}.pt of the folder")
    parser.add_argument("--checkpoint-upper-bound", type=int,
                        help="ignore checkpoints past this epoch (or update) number")
    args = parser.parse_args(argv)

    n = args.num_update_checkpoints or args.num_epoch_checkpoints
    if n is not None:
        if len(args.inputs) != 1 or not os.path.isdir(args.inputs[0]):
            parser.error("--num-*-checkpoints needs --inputs to be one folder")
        kind = "update" if args.num_update_checkpoints else "epoch"
        paths = last_checkpoints(args.inputs[0], kind, n, args.checkpoint_upper_bound)
    else:
        paths = args.inputs
        for path in paths:
            if not os.path.isfile(path):
                raise SystemExit(f"error: {path}: no such checkpoint file")
    state = average(paths)
    try:  # the plugin's save: a whole file or none (fairseq_fixes/whole_checkpoints.py)
        checkpoint_utils.torch_persistent_save(state, args.output)
    except (UserError, OSError) as err:
        cause = err.__cause__ if isinstance(err, UserError) and err.__cause__ is not None else err
        raise SystemExit(f"error: cannot write {args.output}: {getattr(cause, 'strerror', None) or cause}; nothing "
                         "half-written is left and the checkpoints averaged are unchanged: free space (or give "
                         "another --output) and run the same command again")
    print(f"averaged {len(paths)} checkpoints -> {args.output}: {' '.join(map(os.path.basename, paths))}",
          file=sys.stderr)


if __name__ == "__main__":
    main()
