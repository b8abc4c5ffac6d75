#!/usr/bin/env python3
"""Train, apply and undo a SentencePiece model (the pip package has no command-line tools).

Usage:
  python spm_tool.py train  --input train.ja --model-prefix spm/ja --vocab-size 8000
  python spm_tool.py encode --model spm/ja.model < raw.ja > pieces.ja
  python spm_tool.py decode --model spm/ja.model < pieces.ja > raw.ja

encode writes space-separated pieces, one sentence a line, as fairseq-preprocess
reads them; decode undoes it (fairseq-generate's hypotheses -> raw text).
"""
import argparse
import sys

import sentencepiece as spm


def main(argv=None):
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        epilog=__doc__.split("\n\n", 1)[1],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = parser.add_subparsers(dest="command", required=True)
    train = sub.add_parser("train", help="train a unigram model on one text file")
    train.add_argument("--input", required=True,
                       help="text file(s), comma-separated: one model for all (a joint vocabulary)")
    train.add_argument("--model-prefix", required=True, help="writes PREFIX.model, PREFIX.vocab")
    train.add_argument("--vocab-size", type=int, required=True)
    train.add_argument("--character-coverage", type=float, default=0.9995,
                       help="0.9995 suits Japanese; 1.0 for small alphabets")
    train.add_argument("--input-sentence-size", type=int, default=2000000,
                       help="train on a random sample of at most this many lines")
    for name in ("encode", "decode"):
        p = sub.add_parser(name, help=f"{name} stdin to stdout, line by line")
        p.add_argument("--model", required=True)
    args = parser.parse_args(argv)

    if args.command == "train":
        spm.SentencePieceTrainer.train(
            input=args.input, model_prefix=args.model_prefix, vocab_size=args.vocab_size,
            character_coverage=args.character_coverage, model_type="unigram",
            input_sentence_size=args.input_sentence_size, shuffle_input_sentence=True,
            hard_vocab_limit=False,  # small corpora may hold fewer pieces
            minloglevel=2,
        )
        return
    sp = spm.SentencePieceProcessor(model_file=args.model)
    for line in sys.stdin:
        line = line.rstrip("\n")
        if args.command == "encode":
            out = " ".join(sp.encode(line, out_type=str))
        else:
            out = sp.decode(line.split())
        sys.stdout.write(out + "\n")


if __name__ == "__main__":
    main()
