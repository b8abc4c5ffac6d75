#!/usr/bin/env python3
"""Normalise raw text once, before SentencePiece and chunking (`--help`).

The code is fairseq_luong.data.text.normalize_main; this file is its command line.
"""
from pathlib import Path
import sys

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # a checkout without pip install -e

from fairseq_luong.data.text import normalize_main  # noqa: E402

if __name__ == "__main__":
    normalize_main()
