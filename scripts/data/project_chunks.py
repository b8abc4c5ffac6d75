#!/usr/bin/env python3
"""Give every SentencePiece piece the id of its phrase, binarized for fairseq (`--help`).

The code is fairseq_luong.data.chunk_projection.main; this file is its command line.
"""
from fairseq_luong.data.chunk_projection import main

if __name__ == "__main__":
    main()
