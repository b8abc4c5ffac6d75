#!/usr/bin/env python3
"""Split normalised Japanese sentences into phrases for perSPE (`--help`).

The code is fairseq_luong.data.japanese_chunker.main; this file is its command line.
"""
from pathlib import Path
import sys

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # a checkout without pip install -e

from fairseq_luong.data.japanese_chunker import main  # noqa: E402

if __name__ == "__main__":
    main()
