#!/usr/bin/env python3
"""Split raw Japanese sentences into phrases (bunsetsu-like chunks), for perSPE.

MeCab, with the IPADIC dictionary of the ``ipadic`` package (the analyser
sacreBLEU's ``ja-mecab`` tokenizer uses), tags each morpheme; nltk's
RegexpParser applies the chunk grammar of scripts/ja_chunk_grammar.txt to the
tag sequence. Oka, Tanaka & Nagata (NLP2022) get their phrases the same way.

Input: raw Japanese, one sentence a line, UTF-8 (no word segmentation: for
KyTea-segmented text such as small_parallel_enja, remove the spaces first).
Output: the same number of lines; each line holds its sentence's phrases
separated by TABs, each phrase being the original text of its morphemes.

Usage:
  python scripts/chunk_japanese.py --input train.ja --output train.chunks.ja [--workers 4]
  echo 'これはペンです。' | python scripts/chunk_japanese.py

Prints the throughput (sentences/s) when done. Errors name the file and line.
"""
import argparse
import contextlib
import os
import re
import sys
import time
from multiprocessing import Pool
from pathlib import Path
from typing import List, Tuple

from tqdm import tqdm

DEFAULT_GRAMMAR = Path(__file__).resolve().parent / "ja_chunk_grammar.txt"

# "私は" as IPADIC tags it; other dictionaries (UniDic, ...) use other POS names
IPADIC_PROBE = ("私は", ["名詞-代名詞", "助詞-係助詞"])


class ChunkerError(RuntimeError):
    """The chunker cannot run: no usable MeCab dictionary, a bad grammar, bad input."""


def load_grammar(path=DEFAULT_GRAMMAR) -> str:
    """The nltk.RegexpParser grammar in ``path``, with its tag classes expanded.

    ``NAME = pattern`` lines define tag classes, ``$NAME`` uses one (see the
    grammar file); comments and blank lines are dropped here, because nltk
    reads any line holding a ':' as the start of a new stage.
    """
    macros, out = {}, []
    try:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
    except OSError as e:
        raise ChunkerError(f"cannot read the chunk grammar {path}: {e.strerror}") from e

    def expand(text, lineno):
        def sub(m):
            if m.group(1) not in macros:
                raise ChunkerError(f"{path}:{lineno}: ${m.group(1)} is not defined above")
            return f"({macros[m.group(1)]})"
        return re.sub(r"\$([A-Za-z_]\w*)", sub, text)

    for lineno, line in enumerate(lines, 1):
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        m = re.fullmatch(r"([A-Za-z_]\w*)\s*=\s*(.+)", line)
        if m:
            macros[m.group(1)] = expand(m.group(2), lineno)
        elif re.fullmatch(r"[A-Za-z_]\w*\s*:", line) or line.startswith("{") or "}{" in line:
            out.append(expand(line, lineno))
        else:
            raise ChunkerError(
                f"{path}:{lineno}: expected 'NAME = pattern', 'STAGE:' or a rule such as "
                f"'{{<名詞-一般>+}}', got {line!r}"
            )
    if not out:
        raise ChunkerError(f"{path}: no chunk rules")
    return "\n".join(out)


def open_mecab(dicdir=None):
    """A MeCab tagger on the IPADIC dictionary in ``dicdir`` (default: the ``ipadic`` package)."""
    try:
        import MeCab
    except ImportError as e:
        raise ChunkerError("MeCab is not installed: pip install mecab-python3 ipadic") from e
    if dicdir is None:
        try:
            import ipadic
        except ImportError as e:
            raise ChunkerError(
                "the IPADIC dictionary is not installed: pip install ipadic "
                "(or pass --dicdir DIR)"
            ) from e
        dicdir = ipadic.DICDIR
    dicdir = str(dicdir)
    for name in ("sys.dic", "dicrc"):
        if not os.path.isfile(os.path.join(dicdir, name)):
            raise ChunkerError(
                f"no MeCab dictionary in {dicdir}: {name} is missing. Install IPADIC "
                f"with `pip install ipadic` (scripts/setup.sh does) or pass --dicdir "
                f"a compiled IPADIC directory"
            )
    rc = os.path.join(dicdir, "mecabrc")
    args = f'-r "{rc if os.path.isfile(rc) else os.devnull}" -d "{dicdir}"'
    try:
        tagger = MeCab.Tagger(args)
    except RuntimeError as e:
        # mecab-python3's message: advice, then "ERROR DETAILS", then MeCab's own error
        details = str(e).split("ERROR DETAILS")[-1].splitlines()
        detail = " ".join(
            line.strip() for line in details
            if line.strip("- ") and not line.startswith(("arguments:", "default dictionary"))
        )
        raise ChunkerError(
            f"MeCab cannot load the dictionary in {dicdir} ({detail}); reinstall it "
            f"with `pip install --force-reinstall ipadic`"
        ) from e
    text, want = IPADIC_PROBE
    got = [tag for _, tag, _, _ in morphemes(tagger, text)]
    if got != want:
        raise ChunkerError(
            f"the MeCab dictionary in {dicdir} is not IPADIC: it tags {text} as {got}, "
            f"IPADIC as {want}; the chunk grammar is written for IPADIC's POS tags"
        )
    return tagger


def ipadic_tag(feature: str) -> str:
    """'名詞,サ変接続,*,...' -> '名詞-サ変接続'; '助動詞,*,...' -> '助動詞'."""
    fields = feature.split(",")
    return fields[0] if len(fields) < 2 or fields[1] == "*" else f"{fields[0]}-{fields[1]}"


def morphemes(tagger, text: str) -> List[Tuple[str, str, int, int]]:
    """(surface, tag, start, end) for each morpheme, with character offsets into ``text``."""
    out, cursor = [], 0
    node = tagger.parseToNode(text)
    while node is not None:
        if node.stat in (0, 1):  # MECAB_NOR_NODE, MECAB_UNK_NODE (not BOS/EOS)
            surface = node.surface
            start = text.find(surface, cursor)
            if start < 0:
                raise ChunkerError(f"MeCab returned {surface!r}, which is not in {text!r}")
            cursor = start + len(surface)
            out.append((surface, ipadic_tag(node.feature), start, cursor))
        node = node.next
    return out


class JapaneseChunker:
    """Raw Japanese sentence -> list of phrases (their original text)."""

    def __init__(self, grammar=DEFAULT_GRAMMAR, dicdir=None):
        import nltk

        self.tagger = open_mecab(dicdir)
        try:
            self.parser = nltk.RegexpParser(load_grammar(grammar))
        except ValueError as e:
            raise ChunkerError(f"{grammar}: nltk rejects the grammar: {e}") from e

    def spans(self, text: str) -> List[Tuple[int, int]]:
        """(start, end) character offsets of each phrase, in order."""
        morphs = morphemes(self.tagger, text)
        if not morphs:
            return []
        tree = self.parser.parse([(i, tag) for i, (_, tag, _, _) in enumerate(morphs)])
        spans = []
        for child in tree:
            # a chunk is a subtree of (index, tag) leaves; a leaf left unchunked
            # by the grammar is a phrase of its own
            leaves = child.leaves() if hasattr(child, "leaves") else [child]
            first, last = leaves[0][0], leaves[-1][0]
            spans.append((morphs[first][2], morphs[last][3]))
        return spans

    def chunk(self, text: str) -> List[str]:
        return [text[start:end] for start, end in self.spans(text)]


_WORKER = None  # (chunker, input name) of this process


def _init_worker(grammar, dicdir, name, chunker=None):
    global _WORKER
    _WORKER = (chunker or JapaneseChunker(grammar, dicdir), name)


def _chunk_line(item):
    lineno, line = item
    chunker, name = _WORKER
    try:
        return "\t".join(chunker.chunk(line))
    except Exception as e:  # name the line, whatever went wrong
        raise ChunkerError(f"{name}:{lineno}: {type(e).__name__}: {e}") from e


def read_lines(path):
    """The lines of ``path`` ('-' = stdin) without line ends; errors name the line."""
    if path == "-":
        path, raw = "<stdin>", sys.stdin.buffer.read()
    else:
        try:
            raw = Path(path).read_bytes()
        except OSError as e:
            raise ChunkerError(f"cannot read {path}: {e.strerror}") from e
    lines = raw.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    out = []
    for lineno, line in enumerate(lines, 1):
        try:
            text = line.decode("utf-8").rstrip("\r")
        except UnicodeDecodeError as e:
            raise ChunkerError(f"{path}:{lineno}: not valid UTF-8 ({e.reason})") from e
        if "\t" in text:
            raise ChunkerError(
                f"{path}:{lineno}: the line holds a TAB, which separates phrases in the output"
            )
        out.append(text)
    return out


def main(argv=None):
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        epilog=__doc__.split("\n\n", 1)[1],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--input", "-i", default="-", help="raw Japanese, one sentence a line (default: stdin)")
    parser.add_argument("--output", "-o", default="-", help="TAB-separated phrases (default: stdout)")
    parser.add_argument("--grammar", default=str(DEFAULT_GRAMMAR), help="chunk grammar file (default: %(default)s)")
    parser.add_argument("--dicdir", default=None, help="compiled IPADIC directory (default: the ipadic package's)")
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1, help="processes (default: %(default)s)")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    args = parser.parse_args(argv)

    try:
        chunker = JapaneseChunker(args.grammar, args.dicdir)  # fail early, in this process
        lines = read_lines(args.input)
        name = "<stdin>" if args.input == "-" else args.input
        t0 = time.time()
        bar = tqdm(total=len(lines), unit="sent", disable=args.quiet or len(lines) < 1000,
                   desc=f"chunking {name}", file=sys.stderr)
        items = enumerate(lines, 1)
        # written to OUTPUT.part and renamed when complete, so that a file at
        # OUTPUT is always whole (recipes skip steps whose output exists)
        part = f"{args.output}.part"
        out = sys.stdout if args.output == "-" else open(part, "w", encoding="utf-8")
        with contextlib.ExitStack() as stack:
            stack.callback(bar.close)
            if out is not sys.stdout:
                stack.enter_context(out)
            if args.workers <= 1:
                _init_worker(args.grammar, args.dicdir, name, chunker)
                results = map(_chunk_line, items)
            else:
                pool = stack.enter_context(
                    Pool(args.workers, _init_worker, (args.grammar, args.dicdir, name))
                )
                results = pool.imap(_chunk_line, items, chunksize=500)
            for text in results:
                out.write(text + "\n")
                bar.update()
        if out is not sys.stdout:
            os.replace(part, args.output)
    except ChunkerError as e:
        sys.exit(f"chunk_japanese.py: error: {e}")
    seconds = max(time.time() - t0, 1e-9)
    print(
        f"chunked {len(lines)} sentences in {seconds:.1f} s "
        f"({len(lines) / seconds:.0f} sentences/s, {max(args.workers, 1)} worker(s))",
        file=sys.stderr,
    )


if __name__ == "__main__":
    main()
