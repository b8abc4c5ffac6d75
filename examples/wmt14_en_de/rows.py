#!/usr/bin/env python3
"""The rows of the WMT'14 recipe's table, as data: the paper's rows of Tables 1, 2, 4 and 6
(``fairseq_luong.paper_settings.luong2015.ROWS``) and RNNsearch beside them.

run.sh asks this file, never a string it cuts:

  rows.py all                    every row's every field for bash, read once by run.sh:
                                 ROW_NAMES=(...), the rows in the table's order, and
                                 ROW_FIELDS[ROW/FIELD] (quoted)
  rows.py field ROW FIELD        one field: models (space-separated), unk (no, yes, both),
                                 paper_ppl, paper_bleu, what, paper_aer (- when none), split
                                 (test = newstest2014, test1 = newstest2015); exit 2 with one
                                 line when ROW is not a row
  rows.py list                   name, models and what of each row, aligned (run.sh rows)
"""
import argparse
import shlex
import sys

from fairseq_luong.paper_settings.luong2015 import ROWS, Row

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
    sub.add_parser("all")
    sub.add_parser("list")
    p = sub.add_parser("field")
    p.add_argument("row")
    p.add_argument("field", choices=FIELDS)
    args = parser.parse_args(argv)
    if args.command == "list":
        width = [max(len(r.name) for r in TABLE), max(len(value(r, "models")) for r in TABLE)]
        for r in TABLE:
            print(f"{r.name:<{width[0]}}  {value(r, 'models'):<{width[1]}}  {r.what}")
        return 0
    if args.command == "all":
        print("ROW_NAMES=(" + " ".join(shlex.quote(r.name) for r in TABLE) + ")")
        print("declare -A ROW_FIELDS=(" + " ".join(f"[{shlex.quote(f'{r.name}/{f}')}]={shlex.quote(value(r, f))}"
                                                   for r in TABLE for f in FIELDS) + ")")
        return 0
    row = BY_NAME.get(args.row)
    if row is None:
        print(f"unknown row '{args.row}' (known: {' '.join(BY_NAME)})", file=sys.stderr)
        return 2
    print(value(row, args.field))
    return 0


if __name__ == "__main__":
    sys.exit(main())
