#!/usr/bin/env python3
"""The rows of the WMT'14 recipe's table, as data: the paper's rows of Tables 1, 2, 4 and 6
(``fairseq_luong.protocols.luong2015.ROWS``) and RNNsearch beside them.

run.sh asks this file, never a string it cuts:

  rows.py names                  the rows, one a line, in the table's order
  rows.py check ROW              exit 2 with one line unless ROW is a row
  rows.py field ROW FIELD        one field: models (space-separated), unk (no, yes, both),
                                 paper_ppl, paper_bleu, what, paper_aer (- when none), split
                                 (test = newstest2014, test1 = newstest2015)
  rows.py shell ROW              every field as shell assignments (ROW_MODELS=..., quoted)
  rows.py list                   name, models and what of each row, aligned (run.sh rows)
"""
import argparse
import shlex
import sys

from fairseq_luong.protocols.luong2015 import ROWS, Row

RNNSEARCH = Row("rnnsearch", ("rnnsearch",), "no", None, None,
                "RNNsearch-50 (Bahdanau et al. 2014) with the same data and evaluation", None, "test")
TABLE = [*ROWS, RNNSEARCH]
BY_NAME = {r.name: r for r in TABLE}
FIELDS = ("models", "unk", "paper_ppl", "paper_bleu", "what", "paper_aer", "split")


def value(row: Row, field: str) -> str:
    v = getattr(row, field)
    if field == "models":
        return " ".join(v)
    if field == "paper_aer":
        return "-" if v is None else f"{v:.2f}"
    return "" if v is None else v


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="rows.py", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("names")
    sub.add_parser("list")
    for name in ("check", "field", "shell"):
        p = sub.add_parser(name)
        p.add_argument("row")
        if name == "field":
            p.add_argument("field", choices=FIELDS)
    args = parser.parse_args(argv)
    if args.command == "names":
        print("\n".join(r.name for r in TABLE))
        return 0
    if args.command == "list":
        width = [max(len(r.name) for r in TABLE), max(len(value(r, "models")) for r in TABLE)]
        for r in TABLE:
            print(f"{r.name:<{width[0]}}  {value(r, 'models'):<{width[1]}}  {r.what}")
        return 0
    row = BY_NAME.get(args.row)
    if row is None:
        print(f"unknown row '{args.row}' (known: {' '.join(BY_NAME)})", file=sys.stderr)
        return 2
    if args.command == "field":
        print(value(row, args.field))
    elif args.command == "shell":
        print(" ".join(f"ROW_{f.upper()}={shlex.quote(value(row, f))}" for f in FIELDS))
    return 0


if __name__ == "__main__":
    sys.exit(main())
