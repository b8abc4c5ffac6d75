#!/usr/bin/env python3
"""Plain-text English and Japanese from the ASPEC-JE release files.

ASPEC-JE (Nakazawa et al. 2016) has one sentence pair a line, fields separated
by " ||| ":
  train/train-N.txt:        score ||| document id ||| sentence id ||| Japanese ||| English
  dev/dev.txt, test/test.txt, devtest/devtest.txt:
                            document id ||| sentence id ||| Japanese ||| English

Usage:
  python aspec_to_text.py --aspec /path/to/ASPEC/ASPEC-JE --output raw/ [--train train-1.txt]

writes raw/{train,dev,test}.{ja,en}, line-aligned, and prints the line counts.
A line without the expected fields stops the run, naming the file and line.
Only "\\n" ends a line, so a stray \\r inside a sentence stays in it (the
normalisation step turns it into a space).
"""
import argparse
import sys
from pathlib import Path

from fairseq_luong.data.text import DataError, iter_lines, whole_output

SEPARATOR = " ||| "
FIELDS = {"train": 5, "dev": 4, "test": 4}  # Japanese and English are the last two


def extract(files, n_fields, out_ja, out_en):
    n = 0
    for path in files:
        for lineno, line in iter_lines(path):
            fields = line.split(SEPARATOR)
            if len(fields) != n_fields:
                raise DataError(
                    f"{path}:{lineno}: expected {n_fields} fields separated by '|||', found "
                    f"{len(fields)} (is this the {'train' if n_fields == 5 else 'dev/test'} "
                    f"file of ASPEC-JE?)"
                )
            out_ja.write(fields[-2] + "\n")
            out_en.write(fields[-1] + "\n")
            n += 1
    return n


def main(argv=None):
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        epilog=__doc__.split("\n\n", 1)[1],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--aspec", required=True, help="the ASPEC-JE folder (train/, dev/, test/)")
    parser.add_argument("--output", required=True, help="folder for {train,dev,test}.{ja,en}")
    parser.add_argument("--train", nargs="+", default=["train-1.txt"],
                        help="training files under train/ (default: %(default)s, the 1M "
                             "pairs with the best alignment scores)")
    args = parser.parse_args(argv)

    aspec, out = Path(args.aspec), Path(args.output)
    sources = {"train": [aspec / "train" / f for f in args.train],
               "dev": [aspec / "dev" / "dev.txt"], "test": [aspec / "test" / "test.txt"]}
    try:
        for split, files in sources.items():
            for f in files:
                if not f.is_file():
                    raise DataError(f"{f} not found (ASPEC-JE's {split} file)")
            with whole_output(out / f"{split}.ja") as ja, whole_output(out / f"{split}.en") as en:
                n = extract(files, FIELDS[split], ja, en)
            print(f"{split}: {n} sentence pairs from {', '.join(map(str, files))}", file=sys.stderr)
    except DataError as e:
        sys.exit(f"aspec_to_text.py: error: {e}")


if __name__ == "__main__":
    main()
