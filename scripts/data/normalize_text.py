#!/usr/bin/env python3
"""Normalise raw text once, before SentencePiece and chunking (`--help`).

The code is fairseq_luong.data.text.normalize_main; this file is its command line.
"""
from fairseq_luong.data.text import normalize_main

if __name__ == "__main__":
    normalize_main()
