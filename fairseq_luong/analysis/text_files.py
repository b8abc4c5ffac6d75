"""The files and options the analysis scripts are given, with errors that name the file."""
import os
from typing import List, Tuple

from ..data import text


def read_lines(path: str) -> List[str]:
    """The file's lines (``data.text``'s reader: only ``\\n`` ends a line); SystemExit naming
    the file (and line) when it cannot be read or is not UTF-8."""
    try:
        return text.read_lines(path)
    except text.DataError as err:
        raise SystemExit(f"error: {err}")


def named_files(items: List[str]) -> List[Tuple[str, str]]:
    """``NAME=PATH`` items: ["base=a.log", "b.log"] -> [("base", "a.log"), ("b", "b.log")];
    a bare path is named after its file; every path must exist (SystemExit naming it)."""
    out = []
    for item in items:
        name, sep, path = item.partition("=")
        if not sep or not name or os.path.exists(item):
            name, path = os.path.splitext(os.path.basename(item))[0], item
        if not os.path.isfile(path):
            raise SystemExit(f"error: {path}: no such file")
        out.append((name, path))
    return out


def add_model_arguments(parser, target_help):
    """The command-line options of the scripts that read a model's attention over given text
    (scripts/eval/force_align.py, scripts/eval/plot_attention.py): data, checkpoint(s), text, languages,
    footnote 14's convention and SentencePiece models."""
    parser.add_argument("data", help="fairseq data directory with the dictionaries (dict.SRC.txt, dict.TGT.txt)")
    parser.add_argument("--path", required=True, help="checkpoint(s), colon-separated for an ensemble")
    parser.add_argument("--source", required=True, help="source sentences, one a line")
    parser.add_argument("--target", required=target_help is None,
                        help=target_help or "their translations, line-aligned")
    parser.add_argument("-s", "--source-lang", default=None)
    parser.add_argument("-t", "--target-lang", default=None)
    parser.add_argument("--paper-convention", action="store_true",
                        help="footnote 14: a content-based a_t aligns the input word y_{t-1}")
    parser.add_argument("--spm-model", default=None, help="SentencePiece model to segment words into pieces")
    parser.add_argument("--spm-model-target", default=None, help="the target side's, if it differs")
