"""The Python interface (models/hub_interface.py, README "From Python"): one call loads a
checkpoint trained on SentencePiece pieces; translate, n-best with scores and alignments, score
a given translation, move to another dtype. Each family against fairseq-generate's own output
(its H-, D-, P- and A- lines) for the same checkpoint and test set."""
import ast
import contextlib
import io
import math
import re

import pytest
import torch
from fairseq import hub_utils
from fairseq.models import FairseqModel

from fairseq_luong.analysis.generate_output import read_nbest
from fairseq_luong.models import LuongLSTMModel, RNNsearchModel, TransformerPerSPEModel, TranslationHubInterface
from tests.helpers import REPO, USER_DIR, build_piece_corpus, cli

TRAIN = ["--optimizer", "adam", "--lr", "0.005", "--max-tokens", "2000", "--share-all-embeddings",
         "--dropout", "0", "--disable-validation", "--no-epoch-checkpoints", "--num-workers", "0", "--seed", "1"]
TINY_LUONG = ["--encoder-embed-dim", "16", "--encoder-hidden-size", "16", "--decoder-embed-dim", "16",
              "--decoder-hidden-size", "16"]
# family: (model class, its fairseq-train options, updates)
FAMILIES = {
    "luong": (LuongLSTMModel, ["--arch", "luong_tiny"], 150),
    "rnnsearch": (RNNsearchModel, ["--arch", "rnnsearch_tiny", "--maxout-dim", "16"], 150),
    "perspe": (TransformerPerSPEModel, ["--arch", "transformer_perspe_tiny", "--task", "translation_chunks",
                                        "--criterion", "perspe_label_smoothed_cross_entropy",
                                        "--label-smoothing", "0.1"], 150),
    "no_attention": (LuongLSTMModel, ["--arch", "luong_base", *TINY_LUONG], 1),
}


@pytest.fixture(autouse=True)
def _one_thread(one_thread):
    pass


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    """tests/helpers.py: build_piece_corpus (SentencePiece pieces binarized in bin/, spm.model)."""
    return build_piece_corpus(tmp_path_factory.mktemp("hub"))


@pytest.fixture(scope="module")
def checkpoint(corpus):
    """checkpoint(family): the folder of a model of that family trained on ``corpus`` (trained
    on first use)."""
    trained = {}

    def get(family):
        if family not in trained:
            _, options, updates = FAMILIES[family]
            trained[family] = corpus / f"ckpt_{family}"
            cli("train", [corpus / "bin", "--user-dir", USER_DIR, *options, *TRAIN, "--max-update", updates,
                          "--save-dir", trained[family]])
        return trained[family]

    return get


def load(corpus, checkpoint, family, via=None):
    """``via.from_pretrained`` (default: the family's class) with the README's arguments."""
    folder = checkpoint(family)
    via = via or FAMILIES[family][0]
    return via.from_pretrained(str(folder), checkpoint_file="checkpoint_last.pt", data_name_or_path=str(corpus / "bin"),
                               bpe="sentencepiece", sentencepiece_model=str(corpus / "spm.model"))


def test_readme_snippet_runs_on_a_model_trained_as_the_steps_say(corpus, checkpoint):
    """The README's "From Python" code block, as it is, with the paths of a model trained
    here: every line runs, and it prints what it says."""
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    section = readme.split("\n## From Python\n", 1)[1].split("\n## ", 1)[0]
    code = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    paths = {'"ckpt"': f'"{checkpoint("luong")}"', '"avg.pt"': '"checkpoint_last.pt"',
             '"data-bin"': f'"{corpus / "bin"}"', '"spm/joint.model"': f'"{corpus / "spm.model"}"'}
    for readme_path, here in paths.items():
        assert readme_path in code
        code = code.replace(readme_path, here)
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        exec(compile(code, "README.md (From Python)", "exec"), {})
    lines = printed.getvalue().splitlines()
    assert len(lines) == code.count("print(") - 1 + 3  # the n-best loop prints 3 times
    assert len(ast.literal_eval(lines[1])) == 2  # two translations


@pytest.mark.parametrize("family", ["luong", "rnnsearch", "perspe"])
def test_every_way_of_loading_gives_the_interface(corpus, checkpoint, family):
    """The model class's from_pretrained, fairseq's FairseqModel.from_pretrained (the plugin's
    patch) and fairseq's hub_utils.from_pretrained with the interface built from its parts."""
    ours, fairseqs = load(corpus, checkpoint, family), load(corpus, checkpoint, family, via=FairseqModel)
    x = hub_utils.from_pretrained(str(checkpoint(family)), "checkpoint_last.pt", str(corpus / "bin"),
                                  bpe="sentencepiece", sentencepiece_model=str(corpus / "spm.model"))
    parts = TranslationHubInterface(x["args"], x["task"], x["models"])
    source = (corpus / "raw/test.en").read_text(encoding="utf-8").splitlines()[0]
    for hub in (ours, fairseqs, parts):
        assert type(hub) is TranslationHubInterface
        assert hub.score(source, source.title())["alignment"]
    assert ours.translate(source) == fairseqs.translate(source) == parts.translate(source)


def fairseq_generate(corpus, folder, family, *options):
    """fairseq-generate on the test set, one sentence a batch, with --print-alignment: for each
    sentence its hypotheses, best first, from the D-, P- and A- lines: text, score and
    positional scores in base e (fairseq prints base 2), alignment pairs."""
    task = ["--task", "translation_chunks"] if family == "perspe" else []
    out = cli("generate", [corpus / "bin", "--user-dir", USER_DIR, *task, "--path", folder / "checkpoint_last.pt",
                           "--gen-subset", "test", "--batch-size", "1", "--print-alignment",
                           "--post-process", "sentencepiece", *options]).stdout
    found = read_nbest(enumerate(out.splitlines(), 1), "fairseq-generate's output")
    return [[{"translation": h.detokenized, "score": h.score * math.log(2),
              "positional_scores": [p * math.log(2) for p in h.positional_scores],
              "alignment": [tuple(map(int, pair.split("-"))) for pair in h.alignment.split()]}
             for h in sentence.hypotheses] for sentence in found.values()]


def assert_same_hypothesis(ours, fairseqs, text=True):
    if text:
        assert ours["translation"] == fairseqs["translation"]
    assert ours["score"] == pytest.approx(fairseqs["score"], abs=1e-5)
    assert ours["positional_scores"] == pytest.approx(fairseqs["positional_scores"], abs=1e-4)
    assert ours["alignment"] == fairseqs["alignment"]
    assert len(ours["positional_scores"]) == len(ours["pieces"]) and ours["pieces"][-1] == "</s>"
    assert ours["log_prob"] == pytest.approx(sum(ours["positional_scores"]), abs=1e-4)


@pytest.mark.parametrize("family", ["luong", "rnnsearch", "perspe"])
def test_nbest_is_fairseq_generates_nbest(corpus, checkpoint, family):
    """hub.nbest(sentence, n=3, beam=3): the three hypotheses fairseq-generate --nbest 3 prints,
    in its order, with its scores, positional scores and --print-alignment alignments (the
    source read from the binarized test set there, from the raw text here)."""
    expected = fairseq_generate(corpus, checkpoint(family), family, "--beam", "3", "--nbest", "3",
                                "--max-len-b", "20")
    sources = (corpus / "raw/test.en").read_text(encoding="utf-8").splitlines()
    hub = load(corpus, checkpoint, family)
    found = [hub.nbest(source, n=3, beam=3, max_len_b=20) for source in sources]
    assert [len(f) for f in found] == [len(e) for e in expected] == [3] * len(sources)
    assert len({h["translation"] for hypos in found for h in hypos}) > 3  # not one answer for all
    for ours, fairseqs in zip(found, expected):
        for h, e in zip(ours, fairseqs):
            assert_same_hypothesis(h, e)
    # fairseq's own generate (token ids) gives the same alignments now that decoders keep their attention
    assert hub.generate(hub.encode(sources[0]), beam=3, print_alignment="hard", max_len_b=20)[0]["alignment"] \
        == found[0][0]["alignment"]
    for batched, alone in zip(hub.nbest(sources, n=3, beam=3, max_len_b=20), found):  # a batch: the same
        for h, e in zip(batched, alone):
            assert_same_hypothesis(h, e)


@pytest.mark.parametrize("family", ["luong", "rnnsearch", "perspe"])
def test_score_is_fairseq_generates_score_reference(corpus, checkpoint, family):
    """hub.score(sources, targets): for each reference of the test set, what fairseq-generate
    --score-reference --print-alignment prints: log p of each piece and of </s>, their mean,
    the alignment."""
    expected = fairseq_generate(corpus, checkpoint(family), family, "--score-reference")
    sources = (corpus / "raw/test.en").read_text(encoding="utf-8").splitlines()
    targets = (corpus / "raw/test.de").read_text(encoding="utf-8").splitlines()
    hub = load(corpus, checkpoint, family)
    found = hub.score(sources, targets)
    assert len(found) == len(expected) == len(targets)
    for ours, fairseqs, target in zip(found, expected, targets):
        assert_same_hypothesis(ours, fairseqs[0], text=False)
        assert hub.decode(hub.tgt_dict.encode_line(" ".join(ours["pieces"]), add_if_not_exist=False)) == target
        assert ours["score"] == pytest.approx(ours["log_prob"] / len(ours["pieces"]))
    assert_same_hypothesis(hub.score(sources[2], targets[2]), found[2], text=False)  # alone: the same


def test_alignment_links_each_target_piece_to_the_source_piece_it_attends(diagonal_model):
    """The crafted model (tests/helpers.py: build_diagonal_model, reversed source) attends with
    weight 1 to source word t at the step that predicts target word t, and to </s> from
    t = n on, which --print-alignment reads as source word 0; every hypothesis word is <unk>.
    In a batch, the shorter source is left-padded."""
    hub = LuongLSTMModel.from_pretrained(str(diagonal_model), checkpoint_file="crafted.pt",
                                         data_name_or_path=str(diagonal_model / "bin"))
    short, best = [hypos[0] for hypos in hub.nbest(["four", "nineteen cats four"], n=1, beam=2, max_len_b=5)]
    assert best["source_pieces"] == ["nineteen", "cats", "four", "</s>"] and short["source_pieces"] == ["four", "</s>"]
    assert best["pieces"] == short["pieces"] == ["<unk>"] * 5 + ["</s>"]
    assert best["alignment"] == [(0, 0), (1, 1), (2, 2), (0, 3), (0, 4)]
    assert short["alignment"] == [(0, t) for t in range(5)]
    scored = hub.score(["nineteen cats", "five nine four"], ["Eins Zwei Drei", "Zwanzig"])
    assert [s["alignment"] for s in scored] == [[(0, 0), (1, 1), (0, 2)], [(0, 0)]]
    assert [len(s["positional_scores"]) for s in scored] == [4, 2]


def test_a_model_without_attention_translates_and_scores_without_alignments(corpus, checkpoint):
    hub = load(corpus, checkpoint, "no_attention")
    best = hub.nbest("one two", n=2, beam=2, max_len_b=5)
    assert [h["alignment"] for h in best] == [None, None]
    assert best[0]["translation"] == hub.translate("one two", beam=2, max_len_b=5)
    assert hub.score("one two", "One Two")["alignment"] is None


@pytest.mark.parametrize("family", ["luong", "rnnsearch", "perspe"])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_the_interface_moves_its_models_to_another_dtype(corpus, checkpoint, family, dtype):
    """.bfloat16() / .half() (fairseq-generate's --bf16 / --fp16; .cuda() moves the same
    way, which this CPU machine cannot run): every weight of the model changes dtype, and
    translating and scoring in it give what float32 gives, to bfloat16's precision."""
    hub = load(corpus, checkpoint, family)
    source, target = "twenty one seven", "Twenty One Seven"
    before = hub.nbest(source, n=2, beam=2, max_len_b=10), hub.score(source, target)
    moved = hub.to(dtype)
    assert moved is hub and {p.dtype for p in hub.models[0].parameters()} == {dtype}
    after = hub.nbest(source, n=2, beam=2, max_len_b=10), hub.score(source, target)
    assert after[1]["positional_scores"] != before[1]["positional_scores"]  # computed in the new dtype
    assert after[1]["positional_scores"] == pytest.approx(before[1]["positional_scores"], abs=0.1)
    assert after[0][0]["score"] == pytest.approx(before[0][0]["score"], abs=0.1)
    hub.float()
    assert {p.dtype for p in hub.models[0].parameters()} == {torch.float32}
