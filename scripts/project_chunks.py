#!/usr/bin/env python3
"""Give every SentencePiece piece the id of its phrase, and binarize the ids for fairseq.

Input, line-aligned: the target pieces exactly as fed to fairseq-preprocess
(space-separated SentencePiece pieces, e.g. from ``spm.encode(..., out_type=str)``)
and the phrases of the same sentences from scripts/chunk_japanese.py
(TAB-separated). A piece gets the id (0, 1, 2, ... within its sentence) of the
phrase holding its first real character; a piece that is only the word
boundary mark "▁" gets the id of the piece it precedes. The final </s> that
fairseq appends gets one more id of its own, so the ids line up 1:1 with the
binarized target tokens. Characters are compared after SentencePiece's
normalization (--spm-model; NFKC without it), ignoring whitespace.

Output: PREFIX.bin and PREFIX.idx, a fairseq mmap dataset with one row of ids
per sentence. Put them next to the binarized target and name them as the
translation_chunks task expects: DATA-BIN/{split}.{src}-{tgt}.{tgt}.chunks.

Usage:
  python scripts/project_chunks.py --pieces train.spm.ja --chunks train.chunks.ja \\
      --spm-model spm.ja.model --output data-bin/train.en-ja.ja.chunks
"""
import argparse
import os
import sys
import unicodedata
from pathlib import Path
from typing import Callable, List

SPACE_MARK = "\u2581"  # SentencePiece's "▁"


class ProjectionError(ValueError):
    """Pieces and phrases do not spell the same sentence."""


def nfkc(text: str) -> str:
    return unicodedata.normalize("NFKC", text)


def project_chunks(pieces: List[str], chunks: List[str], normalize: Callable[[str], str] = nfkc) -> List[int]:
    """The phrase id of each piece (without the final </s>).

    ``normalize`` maps a phrase to the characters SentencePiece would produce
    for it; whitespace and "▁" are ignored on both sides. Phrases that
    normalize to nothing (whitespace only) take no id.
    """
    text, char_phrase = [], []  # the phrases' characters, and each one's phrase id
    for chunk in chunks:
        chars = "".join(normalize(chunk).replace(SPACE_MARK, "").split())
        if chars:
            char_phrase.extend([len(text)] * len(chars))
            text.append(chars)
    text = "".join(text)

    ids, waiting, cursor = [], 0, 0  # waiting: "▁" pieces before the next real character
    for piece in pieces:
        chars = piece.replace(SPACE_MARK, "")
        if not chars:
            waiting += 1
            continue
        if text[cursor:cursor + len(chars)] != chars:
            raise ProjectionError(
                f"piece {len(ids) + waiting + 1} {piece!r} does not match the phrases at "
                f"character {cursor}: {text[cursor:cursor + len(chars) + 5]!r}... "
                f"(pieces spell {''.join(pieces).replace(SPACE_MARK, '')!r}, "
                f"phrases {text!r})"
            )
        ids.extend([char_phrase[cursor]] * (waiting + 1))
        waiting = 0
        cursor += len(chars)
    if cursor != len(text):
        raise ProjectionError(
            f"the pieces end at character {cursor} of the phrases' {len(text)}: "
            f"{text[cursor:]!r} is left over"
        )
    if waiting:  # trailing "▁" pieces go with the last phrase
        ids.extend([ids[-1] if ids else 0] * waiting)
    return ids


def with_eos(ids: List[int]) -> List[int]:
    """Append the id of fairseq's final </s>: one more than any phrase's."""
    return ids + [max(ids) + 1 if ids else 0]


def read_lines(path):
    try:
        with open(path, encoding="utf-8") as f:
            return [line.rstrip("\n").rstrip("\r") for line in f]
    except OSError as e:
        raise SystemExit(f"project_chunks.py: error: cannot read {path}: {e.strerror}")
    except UnicodeDecodeError as e:
        raise SystemExit(f"project_chunks.py: error: {path}: not valid UTF-8 ({e.reason})")


def main(argv=None):
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        epilog=__doc__.split("\n\n", 1)[1],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--pieces", required=True, help="space-separated pieces, as binarized")
    parser.add_argument("--chunks", required=True, help="TAB-separated phrases (chunk_japanese.py)")
    parser.add_argument("--output", required=True, help="output prefix: writes PREFIX.bin, PREFIX.idx")
    parser.add_argument("--spm-model", default=None,
                        help="the SentencePiece model that made the pieces (its normalizer "
                             "is applied to the phrases; default: NFKC)")
    args = parser.parse_args(argv)

    normalize = nfkc
    if args.spm_model:
        import sentencepiece as spm

        if not os.path.isfile(args.spm_model):
            sys.exit(f"project_chunks.py: error: no SentencePiece model at {args.spm_model}")
        normalize = spm.SentencePieceProcessor(model_file=args.spm_model).normalize

    pieces, chunks = read_lines(args.pieces), read_lines(args.chunks)
    if len(pieces) != len(chunks):
        sys.exit(
            f"project_chunks.py: error: {args.pieces} has {len(pieces)} lines but "
            f"{args.chunks} has {len(chunks)}; they must be line-aligned"
        )

    import torch
    from fairseq.data import indexed_dataset
    from tqdm import tqdm

    rows, n_ids = [], 0
    for lineno, (p, c) in enumerate(
        tqdm(zip(pieces, chunks), total=len(pieces), unit="sent", file=sys.stderr,
             disable=len(pieces) < 10000, desc=f"projecting {args.chunks}"), 1
    ):
        try:
            ids = with_eos(project_chunks(p.split(), c.split("\t") if c else [], normalize))
        except ProjectionError as e:
            sys.exit(f"project_chunks.py: error: {args.pieces}:{lineno} and {args.chunks}:{lineno}: {e}")
        rows.append(ids)
        n_ids = max(n_ids, len(ids))

    Path(args.output).parent.mkdir(parents=True, exist_ok=True)
    builder = indexed_dataset.MMapIndexedDatasetBuilder(
        indexed_dataset.data_file_path(args.output),
        dtype=indexed_dataset.best_fitting_int_dtype(n_ids),
    )
    for ids in rows:
        builder.add_item(torch.tensor(ids, dtype=torch.int64))
    builder.finalize(indexed_dataset.index_file_path(args.output))
    n_phrases = sum(r[-1] for r in rows)  # the </s> id equals the sentence's phrase count
    n_pieces = sum(len(r) - 1 for r in rows)
    print(
        f"{args.output}.{{bin,idx}}: {len(rows)} sentences, {n_phrases} phrases, "
        f"{n_pieces} pieces ({n_pieces / max(n_phrases, 1):.2f} pieces per phrase)",
        file=sys.stderr,
    )


if __name__ == "__main__":
    main()
