#!/usr/bin/env python3
"""Split normalised Japanese sentences into phrases for perSPE (`--help`).

The code is fairseq_luong.data.japanese_chunker.main; this file is its command line.
"""
from fairseq_luong.data.japanese_chunker import main

if __name__ == "__main__":
    main()
