#!/usr/bin/env python3
"""Check parallel text files before preprocessing, with errors that name file and line.

For each PREFIX, PREFIX.SRC and PREFIX.TGT must exist, be UTF-8, have the same
number of lines, and hold no sentence longer than --max-tokens tokens (fairseq
would drop it from training silently and refuse it at test time). A line that
is empty on one side only is reported (it usually means the files are out of
step); lines empty on both sides are allowed but counted.

Usage: python scripts/check_parallel.py PREFIX [PREFIX ...] -s en -t de
Exit status 1 with a message naming the file and line on the first problem.
"""
import argparse
import sys


def read_lines(path):
    try:
        with open(path, "rb") as f:
            raw = f.read().split(b"\n")
    except FileNotFoundError:
        raise SystemExit(f"error: {path}: no such file")
    if raw and raw[-1] == b"":
        raw.pop()
    lines = []
    for i, line in enumerate(raw, 1):
        try:
            lines.append(line.decode("utf-8").rstrip("\r"))
        except UnicodeDecodeError as e:
            raise SystemExit(f"error: {path}:{i}: not valid UTF-8 ({e.reason} at byte {e.start})")
    return lines


def check_pair(prefix, src, tgt, max_tokens):
    src_path, tgt_path = f"{prefix}.{src}", f"{prefix}.{tgt}"
    src_lines, tgt_lines = read_lines(src_path), read_lines(tgt_path)
    if len(src_lines) != len(tgt_lines):
        raise SystemExit(
            f"error: {src_path} has {len(src_lines)} lines but {tgt_path} has {len(tgt_lines)}: "
            "parallel files must be line-aligned"
        )
    if not src_lines:
        raise SystemExit(f"error: {src_path}: empty file")
    both_empty = 0
    for i, (s, t) in enumerate(zip(src_lines, tgt_lines), 1):
        s_len, t_len = len(s.split()), len(t.split())
        if (s_len == 0) != (t_len == 0):
            empty, other = (src_path, tgt_path) if s_len == 0 else (tgt_path, src_path)
            raise SystemExit(
                f"error: {empty}:{i}: empty line, but {other}:{i} is not: are the files out of step?"
            )
        both_empty += s_len == 0
        for path, n in ((src_path, s_len), (tgt_path, t_len)):
            if n > max_tokens:
                raise SystemExit(
                    f"error: {path}:{i}: {n} tokens, more than --max-tokens {max_tokens} "
                    "(split or drop the sentence, or raise the limit and --max-source/target-positions)"
                )
    if both_empty:
        print(f"note: {prefix}: {both_empty} line pairs are empty on both sides", file=sys.stderr)
    return len(src_lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("prefixes", nargs="+", help="file prefixes (PREFIX.SRC, PREFIX.TGT)")
    parser.add_argument("-s", "--source-lang", required=True)
    parser.add_argument("-t", "--target-lang", required=True)
    parser.add_argument("--max-tokens", type=int, default=1024, help="longest sentence allowed")
    args = parser.parse_args(argv)
    for prefix in args.prefixes:
        n = check_pair(prefix, args.source_lang, args.target_lang, args.max_tokens)
        print(f"ok: {prefix}.{{{args.source_lang},{args.target_lang}}}: {n} sentence pairs", file=sys.stderr)


if __name__ == "__main__":
    main()
