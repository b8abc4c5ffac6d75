#!/usr/bin/env python3
"""Repair C1 mojibake (U+0080-U+009F) in web-crawled text, line for line (`--help`).

The code is fairseq_luong.data.text.repair_c1_main; this file is its command line.
"""
from fairseq_luong.data.text import repair_c1_main as main

if __name__ == "__main__":
    main()
