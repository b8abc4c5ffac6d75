"""Phrases onto SentencePiece pieces: one phrase id per target token, binarized for fairseq.

Input, line-aligned: the target pieces exactly as fed to fairseq-preprocess
(space-separated) and the phrases of the same sentences from
:mod:`fairseq_luong.data.japanese_chunker` (TAB-separated). A piece gets the
id (0, 1, 2, ... within its sentence) of the phrase holding its first real
character; a piece that is only the word boundary mark "▁" gets the id of the
piece it precedes. The final ``</s>`` that fairseq appends gets one more id of
its own, so the ids line up 1:1 with the binarized target tokens. Characters
are compared after the SentencePiece model's normalizer (NFKC without one),
whitespace ignored.

Output: PREFIX.bin and PREFIX.idx, a fairseq mmap dataset with one row of ids
per sentence, named as ``--task translation_chunks`` expects:
``DATA-BIN/{split}.{src}-{tgt}.{tgt}.chunks``.
Command line: ``scripts/data/project_chunks.py`` (:func:`main`).
"""
import itertools
import sys
import unicodedata
from pathlib import Path
from typing import Callable, List, Tuple

from .text import DataError, count_lines, iter_lines

SPACE_MARK = "\u2581"  # SentencePiece's "▁"
MAX_REPORTED = 20  # bad lines named one by one; the rest are counted


class ProjectionError(DataError):
    """Pieces and phrases do not spell the same sentence."""


def nfkc(text: str) -> str:
    return unicodedata.normalize("NFKC", text)


def project_chunks(pieces: List[str], chunks: List[str],
                   normalize: Callable[[str], str] = nfkc) -> List[int]:
    """The phrase id of each piece (without the final </s>)."""
    return project_with_crossings(pieces, chunks, normalize)[0]


def project_with_crossings(pieces, chunks, normalize=nfkc) -> Tuple[List[int], int]:
    """(phrase id of each piece, number of pieces that run into the next phrase).

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

    ids, waiting, cursor, crossing = [], 0, 0, 0  # waiting: "▁" pieces before the next character
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
        crossing += char_phrase[cursor + len(chars) - 1] != char_phrase[cursor]
        waiting = 0
        cursor += len(chars)
    if cursor != len(text):
        raise ProjectionError(
            f"the pieces end at character {cursor} of the phrases' {len(text)}: "
            f"{text[cursor:]!r} is left over"
        )
    if waiting:  # trailing "▁" pieces go with the last phrase
        ids.extend([ids[-1] if ids else 0] * waiting)
    return ids, crossing


def with_eos(ids: List[int]) -> List[int]:
    """Append the id of fairseq's final </s>: one more than any phrase's."""
    return ids + [max(ids) + 1 if ids else 0]


def aligned_lines(pieces_path, chunks_path):
    """(line number, pieces line, chunks line); a line-count difference is an error."""
    for (p_line, p), (c_line, c) in itertools.zip_longest(
            iter_lines(pieces_path), iter_lines(chunks_path), fillvalue=(None, None)):
        if p is None or c is None:
            shorter, longer, n = ((pieces_path, chunks_path, c_line) if p is None
                                  else (chunks_path, pieces_path, p_line))
            raise ProjectionError(
                f"{shorter} has {n - 1} lines but {longer} has more: {longer}:{n} has no "
                f"counterpart (both hold one line per sentence of the same text)"
            )
        lineno = p_line
        yield lineno, p, c


def project_files(pieces_path, chunks_path, normalize=nfkc, on_mismatch="stop",
                  quiet=False, report=print):
    """Phrase ids (</s> included) for every line; ``report(message)`` for each bad line.

    A line whose pieces and phrases differ is reported naming both files and
    the line; then ``on_mismatch`` "stop" raises :class:`ProjectionError` once
    all lines were read, and "token" gives such a sentence one phrase per
    piece (token-level perturbation) and goes on. Returns (rows, statistics).
    """
    from tqdm import tqdm

    rows, bad = [], []
    stats = {"sentences": 0, "phrases": 0, "pieces": 0, "multi-piece phrases": 0,
             "crossing pieces": 0, "lines given one phrase per piece": 0}
    lines = tqdm(aligned_lines(pieces_path, chunks_path), total=count_lines(pieces_path),
                 unit="sent", file=sys.stderr, desc=f"projecting {chunks_path}",
                 disable=True if quiet else None)
    for lineno, p, c in lines:
        pieces = p.split()
        try:
            ids, crossing = project_with_crossings(pieces, c.split("\t") if c else [], normalize)
        except ProjectionError as e:
            bad.append(lineno)
            if len(bad) <= MAX_REPORTED:
                report(f"{pieces_path}:{lineno} and {chunks_path}:{lineno}: {e}")
            elif len(bad) == MAX_REPORTED + 1:
                report("more lines cannot be projected; they are counted, not shown")
            ids, crossing = list(range(len(pieces))), 0
            stats["lines given one phrase per piece"] += 1
        ids = with_eos(ids)
        rows.append(ids)
        stats["sentences"] += 1
        stats["phrases"] += ids[-1]  # the </s> id equals the sentence's phrase count
        stats["pieces"] += len(ids) - 1
        stats["multi-piece phrases"] += sum(n > 1 for n in _run_lengths(ids[:-1]))
        stats["crossing pieces"] += crossing
    if bad and on_mismatch == "stop":
        raise ProjectionError(
            f"{len(bad)} line(s) of {pieces_path} do not spell the same text as their "
            f"phrases in {chunks_path} (lines {', '.join(map(str, bad[:10]))}"
            f"{', ...' if len(bad) > 10 else ''}). Make both from the same normalised text "
            f"(scripts/data/normalize_text.py) and pass --spm-model, or --on-mismatch token to "
            f"give those sentences one phrase per piece"
        )
    return rows, stats


def _run_lengths(ids):
    return [len(list(group)) for _, group in itertools.groupby(ids)]


def write_ids(rows, prefix):
    """Binarize ``rows`` as fairseq's mmap dataset PREFIX.{bin,idx}."""
    import torch
    from fairseq.data import indexed_dataset

    Path(prefix).parent.mkdir(parents=True, exist_ok=True)
    builder = indexed_dataset.MMapIndexedDatasetBuilder(
        indexed_dataset.data_file_path(str(prefix)),
        dtype=indexed_dataset.best_fitting_int_dtype(max((len(r) for r in rows), default=1)),
    )
    for ids in rows:
        builder.add_item(torch.tensor(ids, dtype=torch.int64))
    builder.finalize(indexed_dataset.index_file_path(str(prefix)))


def spm_normalizer(model_path):
    import sentencepiece as spm

    if not Path(model_path).is_file():
        raise DataError(f"no SentencePiece model at {model_path}")
    return spm.SentencePieceProcessor(model_file=str(model_path)).normalize


def main(argv=None):
    """Command line of scripts/data/project_chunks.py."""
    import argparse

    parser = argparse.ArgumentParser(
        prog="project_chunks.py",
        description="Give every SentencePiece piece the id of its phrase, and binarize the "
                    "ids for fairseq (--task translation_chunks).",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="Examples:\n"
               "  python scripts/data/project_chunks.py --pieces train.spm.ja --chunks train.chunks.ja \\\n"
               "      --spm-model spm.model --output data-bin/train.en-ja.ja.chunks\n"
               "  python scripts/data/project_chunks.py --pieces train.spm.ja dev.spm.ja \\\n"
               "      --chunks train.chunks.ja dev.chunks.ja --spm-model spm.model \\\n"
               "      --output data-bin/train.en-ja.ja.chunks data-bin/valid.en-ja.ja.chunks\n"
               "--pieces must be the very file given to fairseq-preprocess. Prints sentences,\n"
               "phrases and pieces per phrase; lines that cannot be projected are named.",
    )
    parser.add_argument("--pieces", required=True, nargs="+",
                        help="space-separated pieces, as binarized")
    parser.add_argument("--chunks", required=True, nargs="+",
                        help="TAB-separated phrases (chunk_japanese.py), one file per --pieces")
    parser.add_argument("--output", required=True, nargs="+",
                        help="output prefix per --pieces: writes PREFIX.bin, PREFIX.idx")
    parser.add_argument("--spm-model", default=None,
                        help="the SentencePiece model that made the pieces (its normalizer "
                             "is applied to the phrases; default: NFKC)")
    parser.add_argument("--on-mismatch", choices=["stop", "token"], default="stop",
                        help="a line whose pieces and phrases differ is named; then stop "
                             "(write nothing) or give that sentence one phrase per piece "
                             "(default: %(default)s)")
    parser.add_argument("--quiet", action="store_true", help="no progress bar, no summary")
    args = parser.parse_args(argv)
    if not len(args.pieces) == len(args.chunks) == len(args.output):
        parser.error("give as many --chunks and --output as --pieces")
    level = "error" if args.on_mismatch == "stop" else "warning"

    def report(message):
        print(f"project_chunks.py: {level}: {message}", file=sys.stderr)

    try:
        normalize = spm_normalizer(args.spm_model) if args.spm_model else nfkc
        for pieces, chunks, output in zip(args.pieces, args.chunks, args.output):
            rows, stats = project_files(pieces, chunks, normalize, args.on_mismatch,
                                        args.quiet, report)
            write_ids(rows, output)
            if not args.quiet:
                print(summary(output, stats), file=sys.stderr)
    except DataError as e:
        sys.exit(f"project_chunks.py: error: {e}")


def summary(output, stats):
    phrases, pieces = max(stats["phrases"], 1), max(stats["pieces"], 1)
    return (
        f"{output}.{{bin,idx}}: {stats['sentences']} sentences, {stats['phrases']} phrases, "
        f"{stats['pieces']} pieces ({stats['pieces'] / phrases:.2f} pieces per phrase; "
        f"{100 * stats['multi-piece phrases'] / phrases:.1f}% of phrases have more than one "
        f"piece, {100 * stats['crossing pieces'] / pieces:.1f}% of pieces run into the next "
        f"phrase); {stats['lines given one phrase per piece']} line(s) given one phrase per piece"
    )
