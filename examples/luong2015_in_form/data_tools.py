#!/usr/bin/env python3
"""The study's data preparation (called by run.sh prepare; its hash keys the prepared data).

  kftt-split DIR           KFTT 30K + tune without the gold-aligned sentences -> DIR
  tokenize LANG            Moses-tokenise stdin (sacremoses, case kept, no escaping)
  ibm1 SRC TGT OUT         an IBM Model 1 word dictionary (src -> most probable tgt)
"""
import argparse
import collections
import json
import os
import sys
import unicodedata
from typing import Dict, Sequence

from fairseq_luong.data.text import read_lines


def _key(ja: str) -> str:
    """How a gold-aligned sentence is found in KFTT: its Japanese, NFKC-normalised (the gold
    file writes full-width brackets where KFTT has ASCII ones), spaces removed (the two
    segment words differently), lower-cased. All 582 gold sentences are KFTT tune lines
    this way, and 6 are also training lines."""
    return unicodedata.normalize("NFKC", ja).replace(" ", "").lower()


def write_plain(path: str, lines: Sequence[str]) -> None:
    with open(path, "w", encoding="utf-8", newline="") as f:
        f.writelines(line + "\n" for line in lines)


def cmd_kftt_split(args):
    """KFTT train and tune without any gold-aligned sentence; tune split into valid (the
    first --valid lines left) and test (the rest). Writes DIR/{train,valid,test}.{ja,en}
    (en as given: Moses-tokenised, true case) and DIR/split.json (counts)."""
    kftt, gold = args.kftt, args.gold
    gold_ja = {_key(j) for j in read_lines(f"{gold}/jaen.ja")}
    counts = {}
    os.makedirs(args.out, exist_ok=True)

    def keep(ja_lines, en_lines, name):
        if len(ja_lines) != len(en_lines):
            raise SystemExit(f"error: {kftt}/{name}.ja has {len(ja_lines)} lines, {name}.en {len(en_lines)}")
        kept = [(j, e) for j, e in zip(ja_lines, en_lines) if _key(j) not in gold_ja]
        counts[f"{name}_gold_dropped"] = len(ja_lines) - len(kept)
        return kept

    train = keep(read_lines(f"{kftt}/train.ja"), read_lines(f"{kftt}/train.en"), "train")
    tune = keep(read_lines(f"{kftt}/tune.ja"), read_lines(f"{kftt}/tune.en"), "tune")
    splits = {"train": train, "valid": tune[: args.valid], "test": tune[args.valid:]}
    for split, pairs in splits.items():
        write_plain(f"{args.out}/{split}.ja", [j for j, _ in pairs])
        write_plain(f"{args.out}/{split}.en", [e for _, e in pairs])
        counts[split] = len(pairs)
    with open(f"{args.out}/split.json", "w") as f:
        json.dump(counts, f, indent=1)
    print(f"KFTT without the gold-aligned sentences: {json.dumps(counts)}", file=sys.stderr)


def cmd_tokenize(args):
    from sacremoses import MosesTokenizer

    tok = MosesTokenizer(lang=args.lang)
    for raw in sys.stdin.buffer:
        line = raw.rstrip(b"\n").decode("utf-8")
        sys.stdout.write(tok.tokenize(line, escape=False, return_str=True) + "\n")


def cmd_ibm1(args):
    """IBM Model 1 (Brown et al. 1993), EM with a NULL source word, t(f | e) for every
    co-occurring pair; the dictionary keeps, for every source word, its most probable
    target word (the word unk replacement puts in place of an <unk> aligned to it)."""
    src, tgt = read_lines(args.src), read_lines(args.tgt)
    pairs = [(s.split(), t.split()) for s, t in zip(src, tgt)]
    t_prob: Dict[str, Dict[str, float]] = collections.defaultdict(dict)
    for s, t in pairs:  # uniform start over co-occurrences
        for e in s + ["<NULL>"]:
            row = t_prob[e]
            for f in t:
                row[f] = 1.0
    for it in range(args.iterations):
        counts: Dict[str, Dict[str, float]] = collections.defaultdict(lambda: collections.defaultdict(float))
        for s, t in pairs:
            es = s + ["<NULL>"]
            for f in t:
                z = sum(t_prob[e][f] for e in es)
                for e in es:
                    counts[e][f] += t_prob[e][f] / z
        t_prob = collections.defaultdict(dict)
        for e, row in counts.items():
            total = sum(row.values())
            t_prob[e] = {f: c / total for f, c in row.items()}
        print(f"IBM Model 1: iteration {it + 1} of {args.iterations}", file=sys.stderr)
    with open(args.out, "w", encoding="utf-8") as out:
        for e in sorted(t_prob):
            if e == "<NULL>" or not t_prob[e]:
                continue
            best = max(sorted(t_prob[e]), key=lambda f: t_prob[e][f])
            out.write(f"{e} {best}\n")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], epilog=__doc__.split("\n\n", 1)[1],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("kftt-split")
    p.add_argument("out")
    p.add_argument("--kftt", required=True, help="kftt_30k_ja_en: train.{ja,en}, tune.{ja,en}")
    p.add_argument("--gold", required=True, help="kftt_gold_align_ja_en: jaen.{ja,en}")
    p.add_argument("--valid", type=int, default=300, help="tune lines (after the gold ones are dropped) for valid")
    p.set_defaults(fn=cmd_kftt_split)
    p = sub.add_parser("tokenize")
    p.add_argument("lang")
    p.set_defaults(fn=cmd_tokenize)
    p = sub.add_parser("ibm1")
    p.add_argument("src")
    p.add_argument("tgt")
    p.add_argument("out")
    p.add_argument("--iterations", type=int, default=5)
    p.set_defaults(fn=cmd_ibm1)
    args = parser.parse_args(argv)
    args.fn(args)


if __name__ == "__main__":
    main()
