"""Oka, Tanaka & Nagata (NLP2022), perSPE: the systems of Tables 1-4, each with the table it
is from, the paper's BLEU and its fairseq-train options (``--encoder-pos``, ``--decoder-pos``,
``--perturb-range``, ``--perturb-unit`` of ``transformer_perspe``).

Table 3 is ASPEC En->Ja with 8,192-token batches (Table 2: IWSLT17 + JParaCrawl, BLEU in
parentheses); Tables 1 and 4 use 2,048-token batches. ``examples/perspe/run.sh`` reads this
module (``train NAME``, ``all``, ``systems``):

    python -m fairseq_luong.paper_settings.oka2022 names             the systems, one a line
    python -m fairseq_luong.paper_settings.oka2022 options NAME      its options, one a line
    python -m fairseq_luong.paper_settings.oka2022 list              the table run.sh systems prints

Standard library only.
"""
import argparse
import sys
from typing import List, NamedTuple, Tuple


class System(NamedTuple):
    name: str
    table: str
    paper_bleu: str
    options: Tuple[str, ...]


def _positions(encoder: str, decoder: str, *perturb: str) -> Tuple[str, ...]:
    return ("--encoder-pos", encoder, "--decoder-pos", decoder, *perturb)


PHRASE_1 = ("--perturb-range", "1", "--perturb-unit", "phrase")  # perSPE: k = 1, per phrase
TOKEN_2 = ("--perturb-range", "2", "--perturb-unit", "token")    # Table 4: [-2, +2], per token

SYSTEMS: List[System] = [
    System("spe_spe", "3 (2)", "41.0 (IWSLT: 8.5)", _positions("spe", "spe")),
    System("spe_none", "3 (2)", "40.9 (IWSLT: 8.4)", _positions("spe", "none")),
    System("spe_perspe", "3 (2)", "41.4 (IWSLT: 9.3)", _positions("spe", "perspe", *PHRASE_1)),
    System("none_spe", "1", "22.8", _positions("none", "spe")),
    System("rpe_rpe", "1", "39.1", _positions("rpe", "rpe")),
    System("spe_pertoken2", "4", "41.2", _positions("spe", "perspe", *TOKEN_2)),
    System("pertoken2_spe", "4", "37.4", _positions("perspe", "spe", *TOKEN_2)),
    System("pertoken2_pertoken2", "4", "23.7", _positions("perspe", "perspe", *TOKEN_2)),
]
BY_NAME = {s.name: s for s in SYSTEMS}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m fairseq_luong.paper_settings.oka2022",
                                     description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("names")
    sub.add_parser("list")
    sub.add_parser("options").add_argument("name")
    args = parser.parse_args(argv)
    if args.command == "names":
        print("\n".join(s.name for s in SYSTEMS))
    elif args.command == "list":
        rows = [("NAME", "paper table", "paper BLEU", "options")]
        rows += [(s.name, s.table, s.paper_bleu, " ".join(s.options)) for s in SYSTEMS]
        widths = [max(len(r[i]) for r in rows) for i in range(3)]
        for r in rows:
            print("  ".join(f"{c:<{w}}" for c, w in zip(r, widths)) + "  " + r[3])
    elif args.name not in BY_NAME:
        print(f"unknown system '{args.name}' (known: {' '.join(BY_NAME)})", file=sys.stderr)
        return 2
    else:
        print("\n".join(BY_NAME[args.name].options))
    return 0


if __name__ == "__main__":
    sys.exit(main())
