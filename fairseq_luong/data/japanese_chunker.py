"""Raw Japanese sentences -> phrases (bunsetsu-like chunks), for perSPE.

MeCab, with the IPADIC dictionary of the ``ipadic`` package (the analyser
sacreBLEU's ``ja-mecab`` tokenizer uses), tags each morpheme; nltk's
RegexpParser applies the chunk grammar of ``ja_chunk_grammar.txt`` (beside
this file) to the tag sequence. Oka, Tanaka & Nagata (NLP2022) get their
phrases the same way.

Input: Japanese normalised by :func:`fairseq_luong.data.text.normalize_line`
(``scripts/data/normalize_text.py``), one sentence a line, no word segmentation.
Output: the same number of lines; each holds its sentence's phrases separated
by TABs, each phrase being the text of its morphemes.
Command line: ``scripts/data/chunk_japanese.py`` (:func:`main`).
"""
import contextlib
import os
import re
import sys
import time
from multiprocessing import Pool
from pathlib import Path
from typing import List, Tuple

from .text import (
    DataError,
    add_file_pair_arguments,
    count_lines,
    file_pairs,
    iter_lines,
    normalize_line,
    read_lines,
    whole_output,
    why_not_normalized,
)

DEFAULT_GRAMMAR = Path(__file__).resolve().parent / "ja_chunk_grammar.txt"

# "私は" as IPADIC tags it; other dictionaries (UniDic, ...) use other POS names
IPADIC_PROBE = ("私は", ["名詞-代名詞", "助詞-係助詞"])

# Printable ASCII -> its full-width form, one character for one. MeCab reads the
# normalised (NFKC) text in the full-width form IPADIC was built on: IPADIC tags
# "，" 記号-読点, "．" 記号-句点 (名詞-数 inside "７．４"), "（" 記号-括弧開 and
# "％" 名詞-接尾, but their ASCII forms all 記号-一般. Offsets are unchanged,
# so phrases are still slices of the normalised text.
FULL_WIDTH = {c: c + 0xFEE0 for c in range(0x21, 0x7F)}


class ChunkerError(DataError):
    """The chunker cannot run: no usable MeCab dictionary, a bad grammar, bad input."""


def load_grammar(path=DEFAULT_GRAMMAR) -> str:
    """The nltk.RegexpParser grammar in ``path``, with its tag classes expanded.

    ``NAME = pattern`` lines define tag classes, ``$NAME`` uses one (see the
    grammar file); comments and blank lines are dropped here, because nltk
    reads any line holding a ':' as the start of a new stage.
    """
    macros, out = {}, []
    try:
        lines = read_lines(path)
    except DataError as e:
        raise ChunkerError(f"the chunk grammar: {e}") from e

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
        morphs = morphemes(self.tagger, text.translate(FULL_WIDTH))
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
    if normalize_line(line) != line:
        raise ChunkerError(
            f"{name}:{lineno}: the line is not normalised ({why_not_normalized(line)}); "
            f"run scripts/data/normalize_text.py on the raw text first and give its output "
            f"to SentencePiece too"
        )
    try:
        return "\t".join(chunker.chunk(line))
    except Exception as e:  # name the line, whatever went wrong
        raise ChunkerError(f"{name}:{lineno}: {type(e).__name__}: {e}") from e


def chunk_file(input, output, grammar=DEFAULT_GRAMMAR, dicdir=None, workers=1, quiet=False):
    """Chunk every line of ``input`` into ``output``; returns the number of lines."""
    from tqdm import tqdm

    chunker = JapaneseChunker(grammar, dicdir)  # fail early, in this process
    name = "<stdin>" if input == "-" else str(input)
    n = 0
    with contextlib.ExitStack() as stack:
        out = stack.enter_context(whole_output(output))
        bar = stack.enter_context(tqdm(
            total=count_lines(input), unit="sent", desc=f"chunking {name}",
            file=sys.stderr, disable=True if quiet else None))
        if workers <= 1:
            _init_worker(grammar, dicdir, name, chunker)
            results = map(_chunk_line, iter_lines(input, name))
        else:
            pool = stack.enter_context(Pool(workers, _init_worker, (grammar, dicdir, name)))
            results = pool.imap(_chunk_line, iter_lines(input, name), chunksize=500)
        for n, text in enumerate(results, 1):
            out.write(text + "\n")
            bar.update()
    return n


def main(argv=None):
    """Command line of scripts/data/chunk_japanese.py."""
    import argparse

    parser = argparse.ArgumentParser(
        prog="chunk_japanese.py",
        description="Split normalised Japanese sentences into phrases (MeCab + IPADIC, "
                    "nltk RegexpParser) for perSPE; one TAB-separated line per input line.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="Examples:\n"
               "  python scripts/data/normalize_text.py -i train.raw.ja -o train.ja\n"
               "  python scripts/data/chunk_japanese.py -i train.ja -o train.chunks.ja --workers 4\n"
               "  python scripts/data/chunk_japanese.py -i train.ja dev.ja -o train.chunks.ja dev.chunks.ja\n"
               "  echo 'これはペンです。' | python scripts/data/chunk_japanese.py\n"
               "Prints the throughput (sentences/s) when done. Errors name the file and line.",
    )
    add_file_pair_arguments(parser, "normalised Japanese, one sentence a line",
                            "TAB-separated phrases")
    parser.add_argument("--grammar", default=str(DEFAULT_GRAMMAR), help="chunk grammar file (default: %(default)s)")
    parser.add_argument("--dicdir", default=None, help="compiled IPADIC directory (default: the ipadic package's)")
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1, help="processes (default: %(default)s)")
    parser.add_argument("--quiet", action="store_true", help="no progress bar, no summary")
    args = parser.parse_args(argv)
    for input, output in file_pairs(parser, args):
        t0 = time.time()
        try:
            n = chunk_file(input, output, args.grammar, args.dicdir, args.workers, args.quiet)
        except DataError as e:
            sys.exit(f"chunk_japanese.py: error: {e}")
        seconds = max(time.time() - t0, 1e-9)
        if not args.quiet:
            print(f"{input}: chunked {n} sentences in {seconds:.1f} s ({n / seconds:.0f} "
                  f"sentences/s, {max(args.workers, 1)} worker(s))", file=sys.stderr)
