#!/usr/bin/env python3
"""Give every SentencePiece piece the id of its phrase, binarized for fairseq (`--help`).

The code is fairseq_luong.data.chunk_projection.main; this file is its command line.
"""
from pathlib import Path
import sys

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # a checkout without pip install -e

from fairseq_luong.data.chunk_projection import main  # noqa: E402

if __name__ == "__main__":
    main()
