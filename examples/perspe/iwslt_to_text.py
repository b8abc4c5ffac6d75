#!/usr/bin/env python3
"""Plain-text English and Japanese for the perSPE paper's Table 2: IWSLT17 En-Ja, cleaned
with clean-corpus-n, plus random JParaCrawl pairs.

Usage:
  python iwslt_to_text.py --iwslt DIR --jparacrawl FILE --pairs 4000000 --output raw/ \\
      [--dev dev2010] [--test tst2015] [--min 1] [--max 80] [--ratio 9] [--seed 1]

IWSLT17 (WIT3, texts/en/ja/en-ja.tgz unpacked):
  DIR/train.tags.en-ja.en, DIR/train.tags.en-ja.ja   one sentence a line; lines that start with
                                                     "<" are talk metadata (<url>, <talkid>,
                                                     <title>, ...) and are dropped
  DIR/IWSLT17.TED.{dev,test set}.en-ja.{en,ja}.xml   sentences in <seg id="N"> ... </seg>
JParaCrawl (en-ja TSV): one pair a line, the last two of its tab-separated fields English
and Japanese; --pairs of its lines are drawn at random (--seed; two passes over the file,
memory for the drawn line numbers only). Lines without at least 3 fields are skipped and
counted.

The IWSLT17 training pairs go through clean-corpus-n (Moses' scripts/training/
clean-corpus-n.perl, same rules): runs of whitespace become one space and none at an end;
"|" is removed (unless the first line has one: factored data); a pair is dropped when a
side is empty, has fewer than --min or more than --max words, a side has more than --ratio
times the words of the other, or a word is longer than 1000 characters. Words are
space-separated tokens; the Japanese side has no spaces, so its words are counted by MeCab
(IPADIC, the segmentation sacreBLEU's ja-mecab uses; --ja-words spaces counts spaces, as
the Perl script would). The JParaCrawl pairs are added as drawn. Lines end at "\\n" only.

writes OUTPUT/{train,dev,test}.{en,ja} and prints the counts.
"""
import argparse
import random
import re
import sys
from pathlib import Path

from fairseq_luong.data.text import DataError, count_lines, iter_lines, whole_output

SEG = re.compile(r"<seg[^>]*>(.*)</seg>")
MAX_WORD_LENGTH = 1000  # clean-corpus-n.perl's default


def train_pairs(iwslt):
    """(English, Japanese) of IWSLT17's training files, metadata lines dropped."""
    en, ja = iwslt / "train.tags.en-ja.en", iwslt / "train.tags.en-ja.ja"
    for path in (en, ja):
        if not path.is_file():
            raise DataError(f"{path} not found (IWSLT17 En-Ja's training file)")
    lines_en, lines_ja = list(iter_lines(en)), list(iter_lines(ja))
    if len(lines_en) != len(lines_ja):
        raise DataError(f"{en} has {len(lines_en)} lines but {ja} has {len(lines_ja)}")
    for (lineno, e), (_, j) in zip(lines_en, lines_ja):
        tag_e, tag_j = e.lstrip().startswith("<"), j.lstrip().startswith("<")
        if tag_e != tag_j:
            raise DataError(f"{en}:{lineno} and {ja}:{lineno}: a metadata line on one side only")
        if not tag_e:
            yield e, j


def xml_segments(iwslt, name, lang):
    path = iwslt / f"IWSLT17.TED.{name}.en-ja.{lang}.xml"
    if not path.is_file():
        raise DataError(f"{path} not found (IWSLT17 En-Ja's {name} set)")
    return [m.group(1).strip() for _, line in iter_lines(path) for m in [SEG.search(line)] if m]


def clean_corpus_n(pairs, lo, hi, ratio, ja_words):
    """clean-corpus-n.perl's rules on (English, Japanese) pairs; yields the kept, cleaned pairs."""
    factored = None
    for e, j in pairs:
        if factored is None:
            factored = "|" in e or "|" in j
        if not factored:
            e, j = e.replace("|", ""), j.replace("|", "")
        e, j = " ".join(e.split()), " ".join(j.split())
        if not e or not j:
            continue
        ne, nj = len(e.split(" ")), ja_words(j)
        if not (lo <= ne <= hi and lo <= nj <= hi) or ne / nj > ratio or nj / ne > ratio:
            continue
        if any(len(w) > MAX_WORD_LENGTH for w in e.split(" ") + j.split(" ")):
            continue
        yield e, j


def mecab_words():
    import ipadic
    import MeCab

    tagger = MeCab.Tagger(ipadic.MECAB_ARGS + " -Owakati")
    return lambda text: len(tagger.parse(text).split())


def jparacrawl_pairs(path, n, seed):
    """``n`` pairs drawn at random from JParaCrawl's TSV (all of them when it has fewer)."""
    if n <= 0:
        return [], 0
    if not Path(path).is_file():
        raise DataError(f"{path} not found (JParaCrawl's en-ja TSV)")
    total = count_lines(path)
    chosen = sorted(random.Random(seed).sample(range(1, total + 1), min(n, total)))
    pairs, skipped, k = [], 0, 0
    for lineno, line in iter_lines(path):
        if k == len(chosen):
            break
        if lineno != chosen[k]:
            continue
        k += 1
        fields = line.split("\t")
        if len(fields) < 3:
            skipped += 1
            continue
        pairs.append((fields[-2].strip(), fields[-1].strip()))
    return pairs, skipped


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], epilog=__doc__.split("\n\n", 1)[1],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--iwslt", required=True, help="IWSLT17 En-Ja's folder")
    parser.add_argument("--jparacrawl", default="", help="JParaCrawl's en-ja TSV")
    parser.add_argument("--pairs", type=int, default=4_000_000, help="JParaCrawl pairs to draw (default: %(default)s)")
    parser.add_argument("--dev", default="dev2010", help="IWSLT17 set for dev (default: %(default)s)")
    parser.add_argument("--test", default="tst2015", help="IWSLT17 set for test (default: %(default)s)")
    parser.add_argument("--min", type=int, default=1)
    parser.add_argument("--max", type=int, default=80)
    parser.add_argument("--ratio", type=float, default=9)
    parser.add_argument("--ja-words", choices=["mecab", "spaces"], default="mecab")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--output", required=True)
    args = parser.parse_args(argv)
    iwslt, out = Path(args.iwslt), Path(args.output)
    ja_words = mecab_words() if args.ja_words == "mecab" else (lambda text: len(text.split(" ")))
    try:
        raw = list(train_pairs(iwslt))
        kept = list(clean_corpus_n(raw, args.min, args.max, args.ratio, ja_words))
        crawl, skipped = jparacrawl_pairs(args.jparacrawl, args.pairs, args.seed)
        splits = {"train": kept + crawl}
        for split, name in (("dev", args.dev), ("test", args.test)):
            en, ja = xml_segments(iwslt, name, "en"), xml_segments(iwslt, name, "ja")
            if len(en) != len(ja):
                raise DataError(f"IWSLT17 {name}: {len(en)} English segments but {len(ja)} Japanese")
            splits[split] = list(zip(en, ja))
        for split, pairs in splits.items():
            with whole_output(out / f"{split}.en") as fe, whole_output(out / f"{split}.ja") as fj:
                for e, j in pairs:
                    fe.write(e + "\n")
                    fj.write(j + "\n")
    except DataError as e:
        sys.exit(f"iwslt_to_text.py: error: {e}")
    print(f"train: {len(kept)} of {len(raw)} IWSLT17 pairs kept by clean-corpus-n ({args.min}-{args.max} words, "
          f"ratio {args.ratio:g}, Japanese words by {args.ja_words}) + {len(crawl)} JParaCrawl pairs"
          + (f" ({skipped} drawn lines without 3 fields skipped)" if skipped else "")
          + f"; dev ({args.dev}): {len(splits['dev'])}; test ({args.test}): {len(splits['test'])}", file=sys.stderr)


if __name__ == "__main__":
    main()
