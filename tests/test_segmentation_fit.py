"""Whether a SentencePiece model made a dictionary (fairseq_patches/segmentation.py's
sentencepiece_misfit), on real text: 10,000 Multi30k pairs encoded with a unigram and a BPE
model of 2,000 pieces, binarized as fairseq-preprocess does with the dictionary whole, cut to
its 600 most frequent pieces (--nwordssrc) and cut at 20 sightings (--thresholdsrc). The model
the data was encoded with fits each; a model of another size, kind or language fits none. A
cut dictionary lacks most of its model's pieces: the check that counted them refused the
model the data was encoded with."""
import argparse
import math

import pytest
import sentencepiece as spm
from fairseq.data import Dictionary
from fairseq.tasks.translation import TranslationTask

from fairseq_luong.errors import UserError
from fairseq_luong.fairseq_patches import segmentation
from fairseq_luong.fairseq_patches.segmentation import STRAY, sentencepiece_misfit
from tests.helpers import SHARED_DATA, cli

LINES = 10_000
CUTS = {"whole": [], "600 pieces": ["--nwordssrc", "600", "--nwordstgt", "600"],
        "20 sightings": ["--thresholdsrc", "20", "--thresholdtgt", "20"]}
# the models: what each is trained on, its kind and size
MODELS = {"unigram": ("multi30k", "unigram", 2000), "bpe": ("multi30k", "bpe", 2000),
          "unigram 4000": ("multi30k", "unigram", 4000), "bpe 4000": ("multi30k", "bpe", 4000),
          "unigram 1000": ("multi30k", "unigram", 1000), "japanese": ("kftt", "unigram", 4000)}
ENCODED = ("unigram", "bpe")  # the models the data is encoded with


def _head(path, n=LINES):
    with open(path, encoding="utf-8") as f:
        return [next(f) for _ in range(n)]


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    """The models (root/NAME.model) and the dictionaries of the data each of ENCODED encoded
    (root/ENCODED/CUT/dict.{en,de}.txt)."""
    root = tmp_path_factory.mktemp("segmentation_fit")
    raw = {lang: _head(SHARED_DATA / "multi30k_en_de" / f"train.{lang}") for lang in ("en", "de")}
    (root / "multi30k.txt").write_text("".join(raw["en"] + raw["de"]), encoding="utf-8")
    (root / "kftt.txt").write_text("".join(_head(SHARED_DATA / "kftt_30k_ja_en" / "train.ja")), encoding="utf-8")
    for name, (text, kind, size) in MODELS.items():
        spm.SentencePieceTrainer.train(input=str(root / f"{text}.txt"), model_prefix=str(root / name.replace(" ", "_")),
                                       model_type=kind, vocab_size=size, minloglevel=2,
                                       character_coverage=0.9995 if text == "kftt" else 1.0)  # SentencePiece's advice
    for name in ENCODED:
        sp = _model(root, name)
        for lang, lines in raw.items():
            (root / f"{name}.{lang}").write_text("".join(" ".join(sp.encode(line.strip(), out_type=str)) + "\n"
                                                         for line in lines), encoding="utf-8")
        for cut, options in CUTS.items():
            cli("preprocess", ["-s", "en", "-t", "de", "--trainpref", root / name, "--destdir", root / name / cut,
                               "--dict-only", "--workers", "1", *options])
    return root


def _model(root, name):
    return spm.SentencePieceProcessor(model_file=str(root / f"{name.replace(' ', '_')}.model"))


def _dictionaries(root, encoded, cut):
    return [Dictionary.load(str(root / encoded / cut / f"dict.{lang}.txt")) for lang in ("en", "de")]


@pytest.mark.parametrize("cut", CUTS)
@pytest.mark.parametrize("encoded", ENCODED)
def test_the_model_the_data_was_encoded_with_fits_its_dictionaries_whole_or_cut(made, encoded, cut):
    en, de = _dictionaries(made, encoded, cut)
    sp = _model(made, encoded)
    assert sentencepiece_misfit(sp, en, [en, de]) is None
    assert sentencepiece_misfit(sp, de, [en, de]) is None


@pytest.mark.parametrize("cut", CUTS)
@pytest.mark.parametrize("encoded", ENCODED)
def test_a_model_of_another_size_kind_or_language_fits_no_dictionary(made, encoded, cut):
    en, de = _dictionaries(made, encoded, cut)
    others = [name for name in MODELS if name != encoded]
    if encoded == "bpe" and cut != "whole":
        # a BPE model scores its pieces by rank, not by how often it cuts them: with most of its
        # pieces left out, one of the same text with more pieces fits too (what the check cannot tell)
        others.remove("bpe 4000")
    # a dictionary cut to a smaller model's size holds only pieces a smaller model has too: a
    # smaller model (of the same kind and text) may fit it (the ambiguity the check leaves)
    for name in others:
        misfit = sentencepiece_misfit(_model(made, name), en, [en, de])
        assert misfit is not None, f"{name} fits the {cut} dictionary of the text {encoded} encoded"
        assert "are in neither dictionary (for the model the data was encoded with: about 100%" in misfit


@pytest.mark.parametrize("encoded", ENCODED)
def test_a_cut_dictionary_lacks_most_of_its_models_pieces(made, encoded):
    """What the fit allows for: the share of the model's pieces in neither cut dictionary is
    far above what a whole one lacks (the rule that counted it refused these)."""
    sp = _model(made, encoded)
    pieces = {sp.id_to_piece(i) for i in range(sp.get_piece_size()) if not (sp.is_control(i) or sp.is_unknown(i))}
    for cut in CUTS:
        known = {s for d in _dictionaries(made, encoded, cut) for s in d.symbols}
        share = sum(p not in known for p in pieces) / len(pieces)
        assert (share > STRAY) == (cut != "whole"), (cut, share)


def test_the_unigram_models_scores_are_its_probabilities_the_bpe_models_its_ranks(made):
    for name, (_, kind, _) in MODELS.items():
        sp = _model(made, name)
        ids = [i for i in range(sp.get_piece_size()) if not (sp.is_control(i) or sp.is_unknown(i))]
        scores = segmentation._log_probabilities(sp, ids)
        assert (scores is None) == (kind == "bpe"), name
        if scores is not None:
            assert abs(math.log(sum(map(math.exp, scores)))) < 0.1, name


@pytest.mark.parametrize("cut", CUTS)
def test_fairseq_takes_the_model_the_cut_data_was_encoded_with_and_refuses_another(made, cut):
    """TranslationTask.build_bpe, as fairseq-interactive and fairseq-generate call it, under
    the plugin's patch (patch_bpe_fit)."""
    task = TranslationTask.setup_task(argparse.Namespace(
        data=str(made / "unigram" / cut), source_lang="en", target_lang="de", left_pad_source=True,
        left_pad_target=False))

    def bpe(name):
        return task.build_bpe(argparse.Namespace(bpe="sentencepiece", sentencepiece_model=str(made / f"{name}.model")))

    assert bpe("unigram").encode("A man rides a horse .") == " ".join(_model(made, "unigram").encode(
        "A man rides a horse .", out_type=str))
    with pytest.raises(UserError, match=f"^--sentencepiece-model {made / 'japanese.model'} did not make the "
                                        f"dictionaries of {made / 'unigram' / cut}: "):
        bpe("japanese")
