#!/usr/bin/env python3
"""Generate a synthetic English -> German parallel corpus of number phrases.

Why this corpus: it needs no download, it is learnable in a minute or two on
a CPU, and translating it needs attention and reordering. German says the
units before the tens ("twenty one" -> "ein und zwanzig", "ninety seven"
-> "sieben und neunzig"), so a model must look back at the right source
word, and long numbers make the source long enough for attention to matter.

Each sentence is a small template over 1-3 numbers between 0 and 999,999:

    twenty one cats and four hundred dogs
    ein und zwanzig katzen und vier hundert hunde

Usage:
    python scripts/data/make_number_corpus.py --out DIR [--train 30000 --valid 500 --test 500 --seed 1]
writes DIR/{train,valid,test}.{en,de}. The same seed gives the same files.
It also writes DIR/lexicon.tsv: each German word that translates English words of its own
("zwanzig" <- "twenty", "hundert" <- "hundred", nouns, "oder", "plus"), a TAB, and those
English words; ``und`` is not in it (it is also the joiner inside a German number). An
alignment that links a German word to one of its partners is right
(``scripts/eval/lexicon_alignment.py``).
``--phrases`` also writes DIR/{split}.de.phrases: each German sentence's phrases (a
number with its noun, a joiner), TAB-separated, the input of ``scripts/data/project_chunks.py``
(perSPE's target phrases, as ``scripts/data/chunk_japanese.py`` makes them for Japanese).
"""
import argparse
import os
import random
import sys

EN_ONES = "zero one two three four five six seven eight nine".split()
EN_TEENS = "ten eleven twelve thirteen fourteen fifteen sixteen seventeen eighteen nineteen".split()
EN_TENS = "_ _ twenty thirty forty fifty sixty seventy eighty ninety".split()
DE_ONES = "null eins zwei drei vier fünf sechs sieben acht neun".split()
DE_TEENS = "zehn elf zwölf dreizehn vierzehn fünfzehn sechzehn siebzehn achtzehn neunzehn".split()
DE_TENS = "_ _ zwanzig dreißig vierzig fünfzig sechzig siebzig achtzig neunzig".split()

# (English singular, English plural, German singular, German plural)
NOUNS = [
    ("cat", "cats", "katze", "katzen"),
    ("dog", "dogs", "hund", "hunde"),
    ("house", "houses", "haus", "häuser"),
    ("book", "books", "buch", "bücher"),
    ("tree", "trees", "baum", "bäume"),
    ("car", "cars", "auto", "autos"),
]


def en_below_1000(n):
    words = []
    if n >= 100:
        words += [EN_ONES[n // 100], "hundred"]
        n %= 100
    if n >= 20:
        words.append(EN_TENS[n // 10])
        if n % 10:
            words.append(EN_ONES[n % 10])
    elif n >= 10:
        words.append(EN_TEENS[n - 10])
    elif n > 0 or not words:
        words.append(EN_ONES[n])
    return words


def de_below_1000(n, final):
    """German words for 0 < n < 1000; ``final``: no word follows (eins vs ein)."""
    words = []
    if n >= 100:
        words += ["ein" if n // 100 == 1 else DE_ONES[n // 100], "hundert"]
        n %= 100
    if n >= 20:
        if n % 10:
            # the units come first: 21 -> ein und zwanzig
            words += ["ein" if n % 10 == 1 else DE_ONES[n % 10], "und"]
        words.append(DE_TENS[n // 10])
    elif n >= 10:
        words.append(DE_TEENS[n - 10])
    elif n > 0:
        words.append(("eins" if final else "ein") if n == 1 else DE_ONES[n])
    return words


def english(n):
    if n == 0:
        return ["zero"]
    words = []
    if n >= 1000:
        words += en_below_1000(n // 1000) + ["thousand"]
        n %= 1000
    if n:
        words += en_below_1000(n)
    return words


def german(n, before_noun=False):
    if n == 0:
        return ["null"]
    words = []
    if n >= 1000:
        words += de_below_1000(n // 1000, final=False) + ["tausend"]
        n %= 1000
    if n:
        words += de_below_1000(n, final=not before_noun)
    return words


def sample_number(rng):
    # mostly small numbers, some long ones: a spread of sentence lengths
    magnitude = rng.choice([10, 100, 1000, 1000, 10000, 1000000])
    return rng.randrange(0, magnitude)


def phrase(rng):
    n = sample_number(rng)
    if rng.random() < 0.5:
        return english(n), german(n)
    en_sg, en_pl, de_sg, de_pl = rng.choice(NOUNS)
    if n == 1:
        return ["one", en_sg], ["ein", de_sg]
    return english(n) + [en_pl], german(n, before_noun=True) + [de_pl]


def sentence(rng):
    """(English, German, German phrases): one to three number phrases joined by a word."""
    en, de = phrase(rng)
    phrases = [de]
    for _ in range(rng.choice([0, 1, 1, 2])):
        joiner = rng.choice([("and", "und"), ("plus", "plus"), ("or", "oder")])
        en2, de2 = phrase(rng)
        en, de = en + [joiner[0]] + en2, de + [joiner[1]] + de2
        phrases += [[joiner[1]], de2]
    return " ".join(en), " ".join(de), "\t".join(" ".join(p) for p in phrases)


def lexicon():
    """German word -> the English words it translates (the generator's own tables)."""
    pairs = list(zip(EN_ONES, DE_ONES)) + list(zip(EN_TEENS, DE_TEENS)) + list(zip(EN_TENS[2:], DE_TENS[2:]))
    pairs += [("one", "ein"), ("hundred", "hundert"), ("thousand", "tausend"), ("or", "oder"), ("plus", "plus")]
    for en_sg, en_pl, de_sg, de_pl in NOUNS:
        pairs += [(en_sg, de_sg), (en_pl, de_pl)]
    out = {}
    for en, de in pairs:
        out.setdefault(de, set()).add(en)
    return out


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True, help="output directory")
    parser.add_argument("--train", type=int, default=30000, help="training sentences")
    parser.add_argument("--valid", type=int, default=500, help="validation sentences")
    parser.add_argument("--test", type=int, default=500, help="test sentences")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--phrases", action="store_true",
                        help="also write {split}.de.phrases (TAB-separated German phrases)")
    args = parser.parse_args(argv)
    rng = random.Random(args.seed)
    os.makedirs(args.out, exist_ok=True)
    seen = set()
    for split, size in (("test", args.test), ("valid", args.valid), ("train", args.train)):
        pairs = []
        while len(pairs) < size:
            en, de, phrases = sentence(rng)
            # held-out sentences never occur in training
            if split != "train":
                if en in seen:
                    continue
                seen.add(en)
            elif en in seen:
                continue
            pairs.append((en, de, phrases))
        files = [("en", 0), ("de", 1)] + ([("de.phrases", 2)] if args.phrases else [])
        for lang, idx in files:
            with open(os.path.join(args.out, f"{split}.{lang}"), "w", encoding="utf-8") as f:
                f.writelines(p[idx] + "\n" for p in pairs)
    with open(os.path.join(args.out, "lexicon.tsv"), "w", encoding="utf-8") as f:
        f.writelines(f"{de}\t{' '.join(sorted(en))}\n" for de, en in sorted(lexicon().items()))
    print(f"wrote {args.train}/{args.valid}/{args.test} sentence pairs to {args.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
