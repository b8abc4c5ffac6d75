"""Generation options of fairseq-generate and fairseq-interactive do what they promise, or are
refused in one line before any model is loaded (fairseq_fixes/generation_options.py,
option_checks.py, length_limit.py), for every family: Luong global with and without input
feeding, local-m, local-p, RNNsearch, the perSPE Transformer.

The patched functions are tested on their own first (seconds); the end-to-end tests train
each family once, for a few dozen updates (the full tier): enough to make models that repeat
themselves, which is what --no-repeat-ngram-size is for."""
import argparse
import math
import types
from collections import defaultdict

import pytest
import torch
from fairseq.ngram_repeat_block import NGramRepeatBlock
from fairseq.search import DiverseBeamSearch

import fairseq_luong  # noqa: F401  (applies the patches)
from fairseq_fixes.generation_options import banned_ngram_completions
from fairseq_luong.analysis.generate_output import read_nbest
from fairseq_luong.errors import ConfigError, UserError
from tests.helpers import (
    USER_DIR,
    bin_path,
    build_model,
    cli,
    cli_error,
    dict_dir,
    error_line,
    make_dictionary,
    random_batch,
)

# ---------------------------------------------------------------- the patched functions


def reference_ngram_bans(prefix, n):
    """{(row, token)} that fairseq's CUDA kernel bans (ngram_repeat_block_cuda_kernel.cu),
    one n-gram at a time: the n-grams of BOS + generated tokens whose first n-1 tokens are
    the last n-1 generated; for n = 1 every generated token (BOS is no word)."""
    banned = set()
    for row, tokens in enumerate(prefix.tolist()):
        generated = tokens[1:] if n == 1 else tokens
        last = generated[len(generated) - (n - 1):] if n > 1 else []
        for start in range(len(generated) - n + 1):
            if generated[start:start + n - 1] == last:
                banned.add((row, generated[start + n - 1]))
    return banned


@pytest.mark.parametrize("n", [1, 2, 3, 4])
def test_ngram_blocking_bans_what_the_generated_prefix_repeats(n):
    """Through NGramRepeatBlock as the generator calls it: the whole token buffer, whose
    columns after step + 1 are padding (fairseq compared those)."""
    g = torch.Generator().manual_seed(n)
    bsz, beam, step, vocab, pad = 3, 5, 9, 7, 1
    tokens = torch.full((bsz * beam, step + 13), pad)  # bsz*beam x (max_len + 2)
    tokens[:, 0] = 2  # BOS (fairseq's EOS)
    tokens[:, 1:step + 1] = torch.randint(4, vocab, (bsz * beam, step), generator=g)  # few words: repeats
    lprobs = torch.zeros(bsz * beam, vocab)
    blocked = NGramRepeatBlock(n, use_extension=False)(tokens, lprobs, bsz, beam, step)
    expected = reference_ngram_bans(tokens[:, :step + 1], n)
    assert expected  # the test means something
    assert {tuple(rc) for rc in torch.isinf(blocked).nonzero().tolist()} == expected
    rows, banned = banned_ngram_completions(tokens[:, :step + 1], n)
    assert set(zip(rows.tolist(), banned.tolist())) == expected


def test_ngram_blocking_waits_for_a_whole_ngram():
    tokens = torch.tensor([[2, 5, 5, 1, 1]])  # BOS, two words, padding
    lprobs = torch.zeros(1, 8)
    assert not torch.isinf(NGramRepeatBlock(3, use_extension=False)(tokens, lprobs, 1, 1, 2)).any()
    assert torch.isinf(NGramRepeatBlock(2, use_extension=False)(tokens, lprobs, 1, 1, 2)).nonzero().tolist() == [
        [0, 5]]


def diverse_steps(lprobs_by_step, ids, keep_after=None):
    """Run a DiverseBeamSearch (2 groups) over the steps' lprobs (bsz x beam x vocab),
    dropping the batch rows not in ``keep_after[step]`` before that step, as the generator
    does when sentences finish. Returns {sample id: [(scores, indices, beams) per step]}."""
    search = DiverseBeamSearch(make_dictionary(), num_groups=2, diversity_strength=0.3)
    rows = torch.arange(len(ids))
    out = defaultdict(list)
    for step, lprobs in enumerate(lprobs_by_step):
        if keep_after and step in keep_after:
            rows = rows[keep_after[step]]
        beam = lprobs.size(1)
        got = search.step(step, lprobs[rows].clone(), torch.zeros(len(rows), beam, step),
                          None, torch.tensor(ids)[rows])
        for i, row in enumerate(rows.tolist()):
            out[ids[row]].append(tuple(t[i].tolist() for t in got))
    return out


def test_diverse_beam_search_of_a_sentence_ignores_the_rest_of_its_batch():
    """Each sentence's diverse search is the same alone, in a batch, and after the batch
    lost a finished sentence; sample ids as fairseq-generate's later batches have them
    (fairseq: IndexError at the second step, or another sentence's group overlap)."""
    g = torch.Generator().manual_seed(3)
    steps = [torch.randn(3, 4, 5, generator=g).log_softmax(-1) for _ in range(4)]  # bsz x beam x vocab
    ids = [7, 3, 12]
    together = diverse_steps(steps, ids, keep_after={2: torch.tensor([1, 2])})  # sentence 7 finished
    for i, sample_id in enumerate(ids):
        alone = diverse_steps([s[i:i + 1] for s in steps], [sample_id])
        n = len(together[sample_id])
        assert together[sample_id] == alone[sample_id][:n]
    assert len(together[3]) == 4 and len(together[7]) == 2


def test_sampling_topk_above_the_vocabulary_samples_from_all_of_it():
    """fairseq: RuntimeError (torch.topk: selected index k out of range) at the first step."""
    from fairseq.data import Dictionary
    from fairseq.search import Sampling

    vocab = Dictionary()
    for word in "abcdef":
        vocab.add_symbol(word)
    search = Sampling(vocab, sampling_topk=10 * len(vocab))
    assert search.sampling_topk == len(vocab)
    torch.manual_seed(0)
    lprobs = torch.randn(2, 3, len(vocab)).log_softmax(-1)  # bsz x beam x vocab
    scores, indices, beams = search.step(0, lprobs, torch.zeros(2, 3, 1))
    assert indices.shape == (2, 3) and bool((indices < len(vocab)).all())


def test_match_source_len_gives_each_hypothesis_its_sources_length():
    """Random weights, sources of 6, 4 and 0 words (+ EOS): fairseq gave longer hypotheses,
    and an empty source never finished (AssertionError)."""
    torch.manual_seed(0)
    model, task, _ = build_model("luong_tiny")
    model.eval()
    batch = random_batch(task, srclens=(7, 5, 1))
    generator = task.build_generator([model], argparse.Namespace(beam=3, match_source_len=True))
    sample = {"net_input": {k: batch[k] for k in ("src_tokens", "src_lengths")}, "id": torch.tensor([5, 9, 2])}
    hypos = generator.generate([model], sample)
    assert [[len(h["tokens"]) - 1 for h in sentence] for sentence in hypos] == [[6] * 3, [4] * 3, [0]]


def test_min_len_above_a_batchs_length_limit_is_one_line():
    """A limit that grows with the source (--max-len-a): only the batch tells (fairseq:
    AssertionError: min_len cannot be larger than max_len)."""
    model, task, _ = build_model("luong_tiny")
    generator = task.build_generator([model], argparse.Namespace(beam=2, min_len=5, max_len_a=0.5, max_len_b=1))
    batch = random_batch(task, srclens=(7, 5, 3))  # the longest source: 7 tokens, a limit of 4
    with pytest.raises(UserError, match=r"^--min-len 5 is more than the length limit of a batch, 4 = "
                                        r"min\(--max-len-a 0.5 x 7 \(longest source\) \+ --max-len-b 1"):
        generator.generate([model], {"net_input": {k: batch[k] for k in ("src_tokens", "src_lengths")}})


# ---------------------------------------------------------------- refused before any work

REFUSED = [
    ("generate", ["--print-step"], "--print-step prints the refinement steps of fairseq's iterative-refinement"),
    ("generate", ["--retain-iter-history"], "--retain-iter-history prints the refinement history"),
    ("interactive", ["--print-step"], "--print-step prints the refinement steps"),
    ("generate", ["--iter-decode-max-iter", "3"], "--iter-decode-max-iter is for fairseq's iterative-refinement"),
    ("generate", ["--iter-decode-with-beam", "2"], "the beam is --beam"),
    ("generate", ["--decoding-format", "unigram"], "--decoding-format is for fairseq's iterative-refinement"),
    ("generate", ["--eos-token", "x"], "--eos-token is for fairseq's speech translation tasks"),
    ("generate", ["--beam-mt", "3"], "--beam-mt is for the first-pass decoder"),
    ("generate", ["--lenpen-mt", "2"], "use --lenpen"),
    ("generate", ["--sampling-topk", "3"], "--sampling-topk qualifies --sampling, which is not given"),
    ("generate", ["--sampling-topp", "0.5"], "--sampling-topp qualifies --sampling"),
    ("generate", ["--diverse-beam-strength", "2"], "--diverse-beam-strength qualifies --diverse-beam-groups"),
    ("generate", ["--lm-weight", "0.5"], "--lm-weight qualifies --lm-path"),
    ("generate", ["--retain-dropout-modules", "LuongDecoder"], "--retain-dropout-modules qualifies --retain-dropout"),
    ("generate", ["--sampling", "--beam", "2", "--nbest", "2", "--match-source-len"],
     "--sampling and --match-source-len each choose how to search"),
    ("generate", ["--diverse-beam-groups", "2", "--beam", "4", "--diversity-rate", "0.5"],
     "--diverse-beam-groups and --diversity-rate each choose how to search"),
    ("interactive", ["--constraints", "--sampling", "--beam", "2", "--nbest", "2"],
     "--sampling and --constraints each choose how to search"),
    ("generate", ["--sampling", "--sampling-topk", "3", "--sampling-topp", "0.5", "--beam", "1"],
     "fairseq samples from the top-p words and ignores --sampling-topk"),
    ("generate", ["--sampling", "--sampling-topk", "0", "--beam", "1"], "--sampling-topk 0: give a number"),
    ("generate", ["--sampling", "--sampling-topp", "1.5", "--beam", "1"], "--sampling-topp 1.5: give a probability"),
    ("generate", ["--sampling", "--beam", "4"], "give --nbest 4 (or --beam 1)"),
    ("interactive", ["--sampling", "--beam", "3", "--nbest", "2"], "give --nbest 3 (or --beam 2)"),
    ("generate", ["--temperature", "0"], "--temperature 0.0: give a temperature above 0"),
    ("generate", ["--diverse-beam-groups", "3", "--beam", "4"], "--diverse-beam-groups 3 does not divide --beam 4"),
    ("generate", ["--match-source-len", "--min-len", "3"], "which --min-len 3 would contradict"),
    ("generate", ["--match-source-len", "--max-len-b", "30"], "which --max-len-b 30 would contradict"),
    ("generate", ["--match-source-len", "--prefix-size", "1"], "which --prefix-size 1 would contradict"),
    ("generate", ["--min-len", "300"], "--min-len 300 is more than the length limit --max-len-b 200"),
    ("generate", ["--constraints"], "fairseq-generate reads no constraints; give them to fairseq-interactive"),
    ("interactive", ["--prefix-size", "2"], "--prefix-size takes the prefix from the reference translation"),
    ("interactive", ["--score-reference"], "--score-reference scores the reference translations"),
    ("interactive", ["--lm-path", "lm.pt"], "--lm-path adds a language model's scores"),
    ("generate", ["--lm-path", "lm.pt"], "dict.txt, which does not exist: copy the target dictionary"),
]


@pytest.mark.parametrize("command,args,message", REFUSED, ids=[" ".join([c, *a]) for c, a, _ in REFUSED])
def test_options_beam_search_cannot_honour_are_refused_before_loading(tmp_path, command, args, message):
    """The checkpoint does not exist: a refusal that came after loading would name it."""
    langs = ["-s", "src", "-t", "tgt"]
    err = cli_error(command, [dict_dir(), "--user-dir", USER_DIR, *langs, "--path", str(tmp_path / "none.pt"), *args])
    assert message in err, err
    assert "none.pt" not in err and "\n" not in err


@pytest.mark.parametrize("interactive", [False, True], ids=["generate", "interactive"])
def test_a_task_with_a_generator_of_its_own_keeps_its_options(interactive):
    """translation_lev decodes with fairseq's iterative-refinement generator, which reads
    --print-step, --retain-iter-history and --iter-decode-*: the checks of beam search's options
    stand aside (checks/generation.py's premise), for fairseq-generate and -interactive alike."""
    from fairseq import options

    parser = options.get_generation_parser(interactive=interactive)
    args = options.parse_args_and_arch(parser, [
        dict_dir(), "--user-dir", USER_DIR, "--task", "translation_lev", "-s", "src", "-t", "tgt", "--path", "x.pt",
        "--iter-decode-max-iter", "9", "--print-step", "--retain-iter-history", "--beam", "1", "--nbest", "2"])
    assert args.print_step and args.retain_iter_history and args.iter_decode_max_iter == 9


def test_the_python_interface_leaves_a_task_with_its_own_generator_its_options():
    """from_pretrained of a Levenshtein transformer: its generation config's refinement options pass;
    the same options for a translation task are refused."""
    from fairseq.dataclass.configs import GenerationConfig
    from fairseq.tasks.translation import TranslationTask
    from fairseq.tasks.translation_lev import TranslationLevenshteinTask
    from omegaconf import OmegaConf

    from fairseq_luong.checks.generation import check_generation_keywords

    # as a checkpoint holds it
    generation = OmegaConf.structured(GenerationConfig(print_step=True, iter_decode_max_iter=9))
    check_generation_keywords("from_pretrained", {}, generation, task=TranslationLevenshteinTask)
    with pytest.raises(ConfigError, match="print_step prints the refinement steps"):
        check_generation_keywords("from_pretrained", {}, generation, task=TranslationTask)


def test_num_shards_split_the_subset_between_runs(diagonal_model):
    """fairseq-generate --num-shards 4 --shard-id I (fairseq_fixes/generate_shards.py; fairseq
    0.12 translated the whole subset in each run): the four runs translate disjoint parts that
    together are the subset, each sentence as the unsharded run translates it; a shard id out
    of range, or shards beside a world size, is one line."""
    args = [diagonal_model / "bin", "--dataset-impl", "raw", "--path", diagonal_model / "crafted.pt",
            "--gen-subset", "test", "--batch-size", "1", "--beam", "2", "--user-dir", USER_DIR]

    def translations(argv):
        return {line.split("\t")[0]: line.split("\t")[2] for line in cli("generate", argv).stdout.splitlines()
                if line.startswith("H-")}

    whole = translations(args)
    parts = [translations([*args, "--num-shards", "4", "--shard-id", str(i)]) for i in range(4)]
    assert len(whole) == 6 and [len(part) for part in parts] == [2, 2, 1, 1]
    assert {k: v for part in parts for k, v in part.items()} == whole
    assert cli_error("generate", [*args, "--num-shards", "4", "--shard-id", "4"]) == (
        "fairseq-generate: error: --shard-id 4 with --num-shards 4: give an id from 0 to 3")
    assert cli_error("generate", [*args, "--num-shards", "2", "--distributed-world-size", "2"]) == (
        "fairseq-generate: error: --num-shards 2 with --distributed-world-size 2: fairseq-generate shards by the "
        "world size; give one of the two")


def test_a_refusal_is_one_line_with_an_error_status():
    """The command itself: exit status 1, no traceback, nothing translated."""
    line = error_line([bin_path("fairseq-generate"), dict_dir(), "--user-dir", USER_DIR, "-s", "src", "-t", "tgt",
                       "--path", "none.pt", "--print-step"])
    assert line.startswith("fairseq-generate: error: --print-step prints the refinement steps")


# ---------------------------------------------------------------- each family, end to end

TINY = ["--encoder-embed-dim", "16", "--encoder-hidden-size", "16", "--decoder-embed-dim", "16",
        "--decoder-hidden-size", "16"]
FAMILIES = {  # name: (training arguments, generation arguments)
    "luong_global": (["--arch", "luong_tiny"], []),
    "luong_global_no_feed": (["--arch", "luong_tiny", "--no-input-feed"], []),
    "luong_localm": (["--arch", "luong_localm", *TINY], []),
    "luong_localp": (["--arch", "luong_localp", *TINY], []),
    "rnnsearch": (["--arch", "rnnsearch_tiny"], []),
    "perspe": (["--arch", "transformer_perspe_tiny", "--task", "translation_chunks", "--share-all-embeddings"],
               ["--task", "translation_chunks"]),
}
TRAIN = ["--optimizer", "adam", "--lr", "0.005", "--max-tokens", "1500", "--criterion", "label_smoothed_cross_entropy",
         "--label-smoothing", "0.1", "--no-epoch-checkpoints", "--num-workers", "0", "--seed", "1",
         "--disable-validation", "--max-update", "30"]


class Family:
    """A family's trained checkpoint, and its generate/interactive in this process."""

    def __init__(self, name, data_bin, save_dir):
        train, self.extra = FAMILIES[name]
        cli("train", [str(data_bin / "bin"), "--user-dir", USER_DIR, *train, *TRAIN, "--save-dir", str(save_dir)])
        self.name, self.data = name, str(data_bin / "bin")
        self.path = str(save_dir / "checkpoint_last.pt")

    def generate(self, *args):
        """{sample id: Sentence} of fairseq-generate on the 12 test sentences, in batches of 5."""
        out = cli("generate", [self.data, "--user-dir", USER_DIR, "--path", self.path, *self.extra,
                               "--batch-size", "5", "--num-workers", "0", *args]).stdout
        return read_output(out, 12)

    def interactive(self, lines, *args):
        out = cli("interactive", [self.data, "--user-dir", USER_DIR, "--path", self.path, *self.extra, "-s", "en",
                                  "-t", "de", "--num-workers", "0", *args],
                  input="".join(f"{line}\n" for line in lines)).stdout
        return read_output(out, len(lines))


def read_output(out, n):
    """Each sentence's source and reference words and every hypothesis (--nbest), best first,
    with its score and positional scores (the package's reader of generate output)."""
    found = read_nbest(enumerate(out.splitlines(), 1), "fairseq-generate's output")
    assert sorted(found) == list(range(n)), out[-3000:]
    words = lambda text: None if text is None else text.split()  # noqa: E731
    return [types.SimpleNamespace(source=words(s.source), target=words(s.target),
                                  hypotheses=[h.tokens.split() for h in s.hypotheses],
                                  scores=[h.score for h in s.hypotheses],
                                  positional=[h.positional_scores for h in s.hypotheses])
            for s in (found[i] for i in range(n))]


@pytest.fixture(scope="module", params=list(FAMILIES))
def family(request, data_bin, tmp_path_factory):
    return Family(request.param, data_bin, tmp_path_factory.mktemp(request.param))


def hypotheses(sentences):
    return [h for s in sentences for h in s.hypotheses]


def repeats(hypothesis, n):
    ngrams = [tuple(hypothesis[i:i + n]) for i in range(len(hypothesis) - n + 1)]
    return len(ngrams) != len(set(ngrams))


def test_no_repeat_ngram_size_leaves_no_repeated_ngram(family):
    plain = hypotheses(family.generate("--beam", "4", "--nbest", "4", "--max-len-b", "30"))
    assert sum(repeats(h, 2) for h in plain) > len(plain) // 2  # models that repeat themselves
    for n in (2, 3):
        blocked = hypotheses(family.generate("--beam", "4", "--nbest", "4", "--max-len-b", "30",
                                             "--no-repeat-ngram-size", str(n)))
        assert len(blocked) == 48 and not [h for h in blocked if repeats(h, n)]


def test_match_source_len_gives_each_translation_its_sources_length(family):
    for s in family.generate("--match-source-len", "--beam", "3", "--nbest", "3"):
        assert [len(h) for h in s.hypotheses] == [len(s.source)] * 3
    lines = ["twenty one", "", "seventy five houses or one thousand books", "four"]
    got = family.interactive(lines, "--match-source-len", "--buffer-size", "4", "--batch-size", "4")
    assert [len(s.hypotheses[0]) for s in got] == [2, 0, 7, 1]


def test_diverse_beam_groups_differ_and_the_first_is_greedy(family):
    """Two groups of one hypothesis each, the second kept off the first's words (strength
    100): they differ from the first word on, and the first group searches greedily. In
    batches of 5, with sentences finishing at different steps (fairseq: IndexError)."""
    greedy = [s.hypotheses[0] for s in family.generate("--beam", "1", "--max-len-b", "20")]
    diverse = family.generate("--beam", "2", "--nbest", "2", "--diverse-beam-groups", "2",
                              "--diverse-beam-strength", "100", "--max-len-b", "20")
    for s, best in zip(diverse, greedy):
        first, second = s.hypotheses
        assert first[0] != second[0] and best in s.hypotheses
    assert len(hypotheses(family.generate("--beam", "4", "--nbest", "4", "--diverse-beam-groups", "2",
                                          "--max-len-b", "20"))) == 48


def test_nbest_gives_that_many_distinct_hypotheses_best_first(family):
    for s in family.generate("--beam", "3", "--nbest", "3", "--max-len-b", "20"):
        assert len(s.hypotheses) == 3 and len({tuple(h) for h in s.hypotheses}) == 3
        assert s.scores == sorted(s.scores, reverse=True)


def test_sampling_follows_the_seed_and_top_one_is_greedy(family):
    def sample(*args):
        return hypotheses(family.generate("--sampling", "--beam", "2", "--nbest", "2", "--max-len-b", "20", *args))

    assert sample("--seed", "1") == sample("--seed", "1") != sample("--seed", "2")
    greedy = hypotheses(family.generate("--beam", "1", "--max-len-b", "20"))
    for narrowest in (["--sampling-topk", "1"], ["--sampling-topp", "0.000001"]):
        got = hypotheses(family.generate("--sampling", "--beam", "1", "--max-len-b", "20", *narrowest))
        assert got == greedy


def test_min_len_holds_for_every_hypothesis(family):
    """Samples at temperature 100 (nearly uniform: EOS about 1 in 90) end anywhere."""
    def shortest(*args):
        return min(len(h) for h in hypotheses(family.generate(
            "--sampling", "--temperature", "100", "--beam", "16", "--nbest", "16", "--max-len-b", "12", *args)))

    assert shortest() < 4
    assert shortest("--min-len", "4") >= 4


def test_prefix_size_keeps_the_references_first_words(family):
    for s in family.generate("--prefix-size", "2", "--beam", "3", "--max-len-b", "20"):
        assert s.hypotheses[0][:2] == s.target[:2]


def test_scores_follow_lenpen_and_unnormalized(family):
    """The H- score: the sum of the P- scores (base 2) over the length (EOS counted) to the
    power --lenpen, or the sum itself with --unnormalized."""
    for args, power in ((["--lenpen", "2"], 2), (["--unnormalized"], 0)):
        for s in family.generate("--beam", "3", "--max-len-b", "20", *args):
            positional = s.positional[0]
            assert s.scores[0] == pytest.approx(sum(positional) / len(positional) ** power, abs=1e-3)


def test_score_reference_scores_the_reference(family):
    for s in family.generate("--score-reference"):
        assert s.hypotheses == [s.target]


def test_retain_dropout_draws_masks_from_the_seed(family):
    def scores(*args):
        return [s.positional[0] for s in family.generate("--beam", "2", "--max-len-b", "10", *args)]

    assert scores("--seed", "1") == scores("--seed", "2")
    kept = scores("--retain-dropout", "--seed", "1")
    assert kept == scores("--retain-dropout", "--seed", "1") != scores("--retain-dropout", "--seed", "2")


def test_interactive_constraints_appear_in_each_translation(family):
    got = family.interactive(["twenty one\tzwei\tund", "four hundred thousand six\tvier hundert"],
                             "--constraints", "--beam", "4", "--max-len-b", "30")
    first, second = (" ".join(s.hypotheses[0]) for s in got)
    assert "zwei" in first.split() and "und" in first.split() and "vier hundert" in second


def test_lm_path_adds_a_language_models_scores(data_bin, tmp_path):
    """A fairseq language model over the target dictionary (its dict.txt in the data
    directory) changes the scores by --lm-weight; a translation checkpoint is refused."""
    lm_data = tmp_path / "lm"
    cli("preprocess", ["--only-source", "--trainpref", str(data_bin / "raw" / "train.de"),
                       "--srcdict", str(data_bin / "bin" / "dict.de.txt"), "--destdir", str(lm_data),
                       "--workers", "1"])
    cli("train", [str(lm_data), "--task", "language_modeling", "--arch", "transformer_lm", "--decoder-layers", "1",
                  "--decoder-embed-dim", "16", "--decoder-ffn-embed-dim", "16", "--decoder-attention-heads", "2",
                  "--tokens-per-sample", "64", "--optimizer", "adam", "--lr", "0.005", "--max-tokens", "1000",
                  "--max-update", "5", "--save-dir", str(tmp_path / "lm_ckpt"), "--no-epoch-checkpoints",
                  "--disable-validation", "--num-workers", "0"])
    data = tmp_path / "data"
    data.mkdir()
    for f in (data_bin / "bin").iterdir():
        (data / f.name).symlink_to(f)
    (data / "dict.txt").symlink_to(data_bin / "bin" / "dict.de.txt")
    translation = Family("luong_global", data_bin, tmp_path / "ckpt")
    translation.data = str(data)
    lm = ["--lm-path", str(tmp_path / "lm_ckpt" / "checkpoint_last.pt")]
    scores = {w: [s.scores[0] for s in translation.generate(*lm, "--lm-weight", w, "--beam", "2", "--max-len-b", "8")]
              for w in ("0", "0.5")}
    plain = [s.scores[0] for s in translation.generate("--beam", "2", "--max-len-b", "8")]
    assert scores["0"] == plain and all(not math.isclose(a, b) for a, b in zip(scores["0.5"], plain))
    err = cli_error("generate", [str(data), "--user-dir", USER_DIR, "--path", translation.path,
                                 "--lm-path", translation.path])
    assert "--lm-path: the checkpoint holds a LuongLSTMModel, not a language model" in err, err
