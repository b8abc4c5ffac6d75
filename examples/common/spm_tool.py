#!/usr/bin/env python3
"""Train, apply and undo a SentencePiece model (the pip package has no command-line tools).

Usage:
  python spm_tool.py train  --input train.en train.ja --model-prefix spm/joint --vocab-size 16000
  python spm_tool.py encode --model spm/joint.model < raw.ja > pieces.ja
  python spm_tool.py decode --model spm/joint.model < pieces.ja > raw.ja

train makes one unigram model from all --input files (space- or comma-separated:
a joint vocabulary for all of them, as Oka et al. 2022 and Multi30k's recipe use),
and says how many pieces it has: fewer than --vocab-size when the text holds no
more (SentencePiece's hard_vocab_limit=False).
--normalization-rule-name identity keeps the text as it is, for text normalised
beforehand (examples/perspe: scripts/data/normalize_text.py), so that the pieces spell
exactly that text. encode writes space-separated pieces, one sentence a line, as
fairseq-preprocess reads them; decode undoes it (fairseq-generate's hypotheses ->
raw text). Lines are read as everywhere in fairseq_luong (its data/text.py): only "\\n"
ends a line (a lone "\\r" inside a line stays in it).
"""
import argparse
import os
import sys

import sentencepiece as spm
from recipe_tools import text_lines  # beside this file


def report_size(model_path, asked):
    """One line on stderr: the pieces the model has, and why when fewer than asked."""
    pieces = spm.SentencePieceProcessor(model_file=model_path).get_piece_size()
    if pieces < asked:
        print(f"spm_tool.py: {model_path} has {pieces} pieces, not the {asked} asked for: the training "
              "text holds no more (SentencePiece's hard_vocab_limit=False); give a smaller --vocab-size "
              "to choose the size yourself", file=sys.stderr)
    else:
        print(f"spm_tool.py: {model_path} has {pieces} pieces", file=sys.stderr)


def main(argv=None):
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        epilog=__doc__.split("\n\n", 1)[1],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = parser.add_subparsers(dest="command", required=True)
    train = sub.add_parser("train", help="train a unigram model on one or more text files")
    train.add_argument("--input", required=True, nargs="+",
                       help="text file(s), space- or comma-separated: one model for all "
                            "(a joint vocabulary)")
    train.add_argument("--model-prefix", required=True, help="writes PREFIX.model, PREFIX.vocab")
    train.add_argument("--vocab-size", type=int, required=True)
    train.add_argument("--character-coverage", type=float, default=0.9995,
                       help="0.9995 suits Japanese; 1.0 for small alphabets")
    train.add_argument("--normalization-rule-name", default="nmt_nfkc",
                       help="SentencePiece's normalizer (default: %(default)s, SentencePiece's "
                            "own; identity for text normalised beforehand)")
    train.add_argument("--input-sentence-size", type=int, default=2000000,
                       help="train on a random sample of at most this many lines")
    for name in ("encode", "decode"):
        p = sub.add_parser(name, help=f"{name} stdin to stdout, line by line")
        p.add_argument("--model", required=True)
    args = parser.parse_args(argv)

    if args.command == "train":
        # SentencePiece cannot create the folder of PREFIX ("RuntimeError: NOT_FOUND")
        os.makedirs(os.path.dirname(os.path.abspath(args.model_prefix)), exist_ok=True)
        spm.SentencePieceTrainer.train(
            input=",".join(args.input), model_prefix=args.model_prefix,
            vocab_size=args.vocab_size, character_coverage=args.character_coverage,
            normalization_rule_name=args.normalization_rule_name, model_type="unigram",
            input_sentence_size=args.input_sentence_size, shuffle_input_sentence=True,
            hard_vocab_limit=False,  # small corpora may hold fewer pieces
            minloglevel=2,
        )
        report_size(f"{args.model_prefix}.model", args.vocab_size)
        return
    sp = spm.SentencePieceProcessor(model_file=args.model)
    out = sys.stdout
    for line in text_lines("-"):
        if args.command == "encode":
            out.write(" ".join(sp.encode(line, out_type=str)) + "\n")
        else:
            out.write(sp.decode(line.split()) + "\n")


if __name__ == "__main__":
    main()
