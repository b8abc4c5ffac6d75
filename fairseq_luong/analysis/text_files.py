"""Reading the text files the scripts are given, with errors that name the file."""
import os
from typing import List, Tuple


def read_lines(path: str) -> List[str]:
    """The file's lines without their line ends; SystemExit naming the file if unreadable."""
    try:
        with open(path, encoding="utf-8") as f:
            return [line.rstrip("\r\n") for line in f]
    except (OSError, UnicodeDecodeError) as err:
        raise SystemExit(f"error: {path}: {err}")


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
