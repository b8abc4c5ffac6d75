"""The Python interface refuses what the command line refuses (fairseq_patches/hub_checks.py,
checkpoint_identity.py, model_overrides.py, segmentation.py, option_checks.py and
models/hub_interface.py): each mistake a user makes through from_pretrained, translate, nbest or
score is one line naming the file or keyword and what to give, for every family and every way
of loading, before any work; what succeeds returns what it says.

The models are trained two updates (what is checked does not depend on what they learnt);
tests/test_hub.py checks what trained ones translate against fairseq-generate."""
import shutil

import pytest
import sentencepiece as spm
import torch
from fairseq import hub_utils
from fairseq.models import FairseqModel

from fairseq_luong.errors import ArgumentError, ConfigError, UserError
from fairseq_luong.fairseq_patches.checkpoint_identity import KEY
from fairseq_luong.models import LuongLSTMModel, RNNsearchModel, TransformerPerSPEModel, TranslationHubInterface
from tests.helpers import USER_DIR, build_piece_corpus, cli, fairseq_cli

TRAIN = ["--optimizer", "adam", "--lr", "0.005", "--max-tokens", "2000", "--share-all-embeddings", "--dropout", "0",
         "--disable-validation", "--no-epoch-checkpoints", "--num-workers", "0", "--seed", "1", "--max-update", "2"]
# family: (its class, its fairseq-train options, a model setting that changes the weights' sizes)
FAMILIES = {
    "luong": (LuongLSTMModel, ["--arch", "luong_tiny"], ("encoder_hidden_size", 24)),
    "rnnsearch": (RNNsearchModel, ["--arch", "rnnsearch_tiny", "--maxout-dim", "16"], ("encoder_hidden_size", 24)),
    "perspe": (TransformerPerSPEModel, ["--arch", "transformer_perspe_tiny", "--task", "translation_chunks",
                                        "--criterion", "perspe_label_smoothed_cross_entropy"],
               ("encoder_ffn_embed_dim", 24)),
}
ARCHS = {"luong": "luong_tiny", "rnnsearch": "rnnsearch_tiny", "perspe": "transformer_perspe_tiny"}
WAYS = ["class", "FairseqModel", "hub_utils"]


@pytest.fixture(autouse=True)
def _one_thread(one_thread):
    pass


def _rewrite_dictionaries(folder, change):
    for lang in ("en", "de"):
        path = folder / f"dict.{lang}.txt"
        path.write_text("".join(line + "\n" for line in change(path.read_text(encoding="utf-8").splitlines())),
                        encoding="utf-8")


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    """build_piece_corpus, and what users mix up with it: SentencePiece models of the same text
    with fewer pieces (spm55.model: some of the dictionary's pieces are not among its own) or
    more (spm70.model: it would cut much of the text into pieces that are in no dictionary),
    and of the German side only (spm_de.model: more of the dictionary's pieces are not its own); data
    folders with the same dictionary's symbols in another order
    (reordered/) or 8 more symbols (bigger/), and the words binarized (words/)."""
    root = build_piece_corpus(tmp_path_factory.mktemp("hub_checks"))
    for name, inputs, size in (("spm55", "train.en,train.de", 55), ("spm70", "train.en,train.de", 70),
                               ("spm_de", "train.de", 40)):
        spm.SentencePieceTrainer.train(input=",".join(f"{root}/raw/{f}" for f in inputs.split(",")),
                                       model_prefix=str(root / name), vocab_size=size, character_coverage=1.0,
                                       minloglevel=2)
    shutil.copytree(root / "bin", root / "reordered")
    _rewrite_dictionaries(root / "reordered", lambda lines: lines[::-1])
    shutil.copytree(root / "bin", root / "bigger")
    _rewrite_dictionaries(root / "bigger", lambda lines: lines + [f"extra{i} 1" for i in range(8)])
    cli("preprocess", ["-s", "en", "-t", "de", "--trainpref", root / "raw/train", "--destdir", root / "words",
                       "--joined-dictionary", "--workers", "1"])
    return root


def _train(data_folder, save, options):
    cli("train", [data_folder, "--user-dir", USER_DIR, *options, *TRAIN, "--save-dir", save])
    return save


@pytest.fixture(scope="module")
def folder(data):
    """folder(family): the save dir of a model of that family trained on the pieces (on first
    use); folder(family, "old"): the same checkpoint without the record of its data, as
    written before checkpoints had one."""
    made = {}

    def get(family, kind="new"):
        if (family, kind) not in made:
            if kind == "new":
                made[family, kind] = _train(data / "bin", data / f"ckpt_{family}", FAMILIES[family][1])
            else:
                state = torch.load(get(family) / "checkpoint_last.pt", weights_only=True)
                del state["extra_state"][KEY]
                (data / f"old_{family}").mkdir()
                torch.save(state, data / f"old_{family}" / "checkpoint_last.pt")
                made[family, kind] = data / f"old_{family}"
        return made[family, kind]

    return get


def load(way, family, model_folder, checkpoint_file="checkpoint_last.pt", data_folder=None, **kwargs):
    """from_pretrained one of three ways: the family's class, fairseq's FairseqModel, or
    fairseq's hub_utils (which returns the parts)."""
    args = (model_folder, checkpoint_file) + (() if data_folder is None else (data_folder,))
    if way == "hub_utils":
        return hub_utils.from_pretrained(*args, **kwargs)
    return {"class": FAMILIES[family][0], "FairseqModel": FairseqModel}[way].from_pretrained(*args, **kwargs)


def _pieces(data, **changes):
    """from_pretrained's arguments for the piece data (the README's), with ``changes``."""
    return {"data_folder": data / "bin", "bpe": "sentencepiece", "sentencepiece_model": str(data / "spm.model"),
            **changes}


def _holds(path):
    return ", ".join(sorted(p.name for p in path.glob("*.pt")))


# the SentencePiece models of the data fixture that did not make the dictionary: why each does not fit
SENTENCEPIECE = {
    "fewer pieces": ("spm55.model", "96.4% of the dictionary's text is in its pieces, 0.0% of the text is in "
                     "pieces it would cut less than a third as often, and it would cut 0.0% of the text into "
                     "pieces that are in neither dictionary (for the model the data was encoded with: about "
                     "100%, 0% and 0%)"),
    "more pieces": ("spm70.model", "100.0% of the dictionary's text is in its pieces, 0.0% of the text is in "
                     "pieces it would cut less than a third as often, and it would cut 17.9% of the text into "
                     "pieces that are in neither dictionary (for the model the data was encoded with: about "
                     "100%, 0% and 0%)"),
    "other text": ("spm_de.model", "84.3% of the dictionary's text is in its pieces, 0.0% of the text is in "
                     "pieces it would cut less than a third as often, and it would cut 0.0% of the text into "
                     "pieces that are in neither dictionary (for the model the data was encoded with: about "
                     "100%, 0% and 0%)"),
}


def mistake(case, family, data, folder):
    """(arguments of ``load`` after the way and family, the one line it must raise) for each
    mistake loading a checkpoint."""
    ckpt = folder(family)
    path = ckpt / "checkpoint_last.pt"
    arch = ARCHS[family]
    bin_ = data / "bin"
    refit = "give data_name_or_path= the data folder it was trained on (fairseq-preprocess's --destdir)"
    preprocess = "give the folder fairseq-preprocess wrote (its --destdir), which holds dict.SRC.txt and dict.TGT.txt"
    if case == "the other direction":
        return ((ckpt,), _pieces(data, source_lang="de", target_lang="en")), (
            f"{path} was trained en->de, and from_pretrained loads it for de->en (source_lang=, target_lang=, or the "
            f"language pair of {bin_}): give source_lang='en', target_lang='de', or a model trained de->en")
    if case == "one language alone":
        return ((ckpt,), _pieces(data, source_lang="de")), (
            f"from_pretrained: source_lang='de' was not used: fairseq took the language pair en->de from the files in "
            f"{bin_}, as it does unless source_lang= and target_lang= are both given: give both")
    if case == "a language without a dictionary":
        return ((ckpt,), _pieces(data, source_lang="fr", target_lang="de")), (
            f"no dictionary {bin_}/dict.fr.txt ({bin_} holds dict.de.txt, dict.en.txt): give source_lang= and "
            "target_lang= the languages of its dictionaries, or data_name_or_path= the --destdir of "
            "fairseq-preprocess, which holds dict.SRC.txt, dict.TGT.txt and the binarized splits")
    if case == "the same symbols in another order":
        return ((ckpt,), _pieces(data, data_folder=data / "reordered")), (
            f"{path} was trained with another source dictionary than {data / 'reordered'}/dict.en.txt (the same "
            f"number of symbols, 56, but other symbols or another order), so its token ids would mean other words: "
            f"{refit}")
    if case == "a dictionary of another size":
        return ((ckpt,), _pieces(data, data_folder=data / "bigger", dropout=0.1)), (
            f"{path} was trained with another source dictionary than {data / 'bigger'}/dict.en.txt (56 symbols then, "
            f"64 now), so its token ids would mean other words: {refit}")
    if case == "a dictionary of another size, checkpoint without a record":
        old = folder(family, "old")
        return ((old,), _pieces(data, data_folder=data / "bigger")), (
            f"{old / 'checkpoint_last.pt'} was trained with another source dictionary than "
            f"{data / 'bigger'}/dict.en.txt (its source embeddings have 56 rows, the dictionary 64 symbols), so its "
            f"token ids would mean other words: {refit}")
    if case == "a model setting that changes the sizes":
        key, value = FAMILIES[family][2]
        return ((ckpt,), _pieces(data, **{key: value})), (
            f"checkpoint {path}: the weights do not fit the model built with from_pretrained({key}={value}) (")
    if case == "another architecture":
        return ((ckpt,), _pieces(data, arch="luong_base")), (
            f"from_pretrained(arch='luong_base'): the architecture of a trained model cannot change (checkpoint {path} "
            f"holds {arch} weights); train a new model instead")
    if case == "a misspelt keyword":
        return ((ckpt,), _pieces(data, beem=4)), (
            f"from_pretrained: no option 'beem' (did you mean beam?): checkpoint {path} ({arch}) has no setting of "
            "that name, so fairseq would ignore it")
    if case == "a generation option out of range":
        return ((ckpt,), _pieces(data, beam=0)), "from_pretrained: beam=0: give a beam of at least 1 (1: greedy search)"
    if case == "no model folder":
        return ((data / "nosuch",), _pieces(data)), (
            f"from_pretrained: no model folder {data / 'nosuch'} (it does not exist): give the folder that holds the "
            "checkpoint (fairseq-train's --save-dir), and checkpoint_file= the file in it")
    if case == "the checkpoint file as the folder":
        return ((path,), _pieces(data)), (
            f"from_pretrained: {path} is a file, not the folder of a checkpoint: give from_pretrained({str(ckpt)!r}, "
            "checkpoint_file='checkpoint_last.pt', ...)")
    if case == "the default checkpoint_file":
        return ((ckpt, "model.pt"), _pieces(data)), (
            f"from_pretrained: no checkpoint {ckpt / 'model.pt'} ({ckpt} holds {_holds(ckpt)}): give checkpoint_file= "
            "one of them (default: model.pt)")
    if case == "a file that is not a checkpoint":
        (ckpt / "notes.pt").write_text("what I trained\n", encoding="utf-8")
        return ((ckpt, "notes.pt"), _pieces(data)), (
            f"{ckpt / 'notes.pt'} is not a checkpoint: it holds text (it starts with 'what I trained'); give a "
            "checkpoint file (fairseq-train writes checkpoint_best.pt, checkpoint_last.pt and checkpointN.pt into its "
            "--save-dir)")
    if case == "no data folder":
        return ((ckpt,), _pieces(data, data_folder=data / "nosuch")), (
            f"from_pretrained: data_name_or_path={str(data / 'nosuch')!r} gives {data / 'nosuch'}, and it does not "
            f"exist: {preprocess}")
    if case == "the default data folder":
        return ((ckpt,), _pieces(data, data_folder=None)), (
            f"data directory {ckpt} holds no binarized data (fairseq takes the language pair from file names such "
            "as train.en-de.en.idx): give the --destdir of fairseq-preprocess, which holds dict.SRC.txt, dict.TGT.txt "
            "and the binarized splits, or give -s SRC -t TGT")  # the translation task's premise (data_directories.py)
    if case == "no bpe for a dictionary of pieces":
        return ((ckpt,), _pieces(data, bpe=None, sentencepiece_model=None)), (
            f"{bin_}/dict.en.txt holds SentencePiece pieces ('▁', '▁Four', '▁four', '▁Nineteen', ...), and "
            "from_pretrained was given no bpe=: source words would be symbols the model does not know; give "
            "bpe='sentencepiece', sentencepiece_model= the SentencePiece model the data was encoded with")
    if case.startswith("a SentencePiece model of"):
        model = data / SENTENCEPIECE[case.split(" of ", 1)[1]][0]
        numbers = SENTENCEPIECE[case.split(" of ", 1)[1]][1]
        return ((ckpt,), _pieces(data, sentencepiece_model=str(model))), (
            f"sentencepiece_model={str(model)!r} did not make {bin_}/dict.en.txt: {numbers}; give the "
            "SentencePiece model the data was encoded with (the one fairseq-preprocess read pieces of)")
    if case == "no SentencePiece model":
        return ((ckpt,), _pieces(data, sentencepiece_model=None)), (
            "from_pretrained: bpe='sentencepiece' needs sentencepiece_model=, the SentencePiece model the data was "
            "encoded with")
    if case == "a SentencePiece model that is not there":
        return ((ckpt,), _pieces(data, sentencepiece_model=str(data / "spm.modle"))), (
            f"from_pretrained: sentencepiece_model={str(data / 'spm.modle')!r}: no such file")
    if case == "a misspelt subword model":
        return ((ckpt,), _pieces(data, bpe="sentencepeice")), (
            "from_pretrained: bpe='sentencepeice' is no subword model fairseq knows (did you mean 'sentencepiece'?); "
            "give one of 'bert', 'byte_bpe', 'bytes', 'characters', 'fastbpe', 'gpt2', 'hf_byte_bpe', 'sentencepiece', "
            "'subword_nmt'")
    raise KeyError(case)


MISTAKES = ["the other direction", "one language alone", "a language without a dictionary",
            "the same symbols in another order", "a dictionary of another size",
            "a dictionary of another size, checkpoint without a record", "a model setting that changes the sizes",
            "another architecture", "a misspelt keyword", "a generation option out of range", "no model folder",
            "the checkpoint file as the folder", "the default checkpoint_file", "a file that is not a checkpoint",
            "no data folder", "the default data folder", "no bpe for a dictionary of pieces",
            "a SentencePiece model of fewer pieces", "a SentencePiece model of more pieces",
            "a SentencePiece model of other text", "no SentencePiece model",
            "a SentencePiece model that is not there", "a misspelt subword model"]


@pytest.mark.parametrize("case", MISTAKES)
@pytest.mark.parametrize("way", WAYS)
@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_every_way_of_loading_refuses_each_mistake_in_one_line(data, folder, family, way, case):
    """What fairseq-generate refuses (direction, dictionaries, weights, files) and what only
    Python gets wrong (folders, keywords, the subword model), in from_pretrained's terms: a
    dictionary of another size blamed on the data folder, never on the keywords (which always
    hold data= and bpe=)."""
    (args, kwargs), message = mistake(case, family, data, folder)
    kwargs = {k: v for k, v in kwargs.items() if v is not None or k == "data_folder"}
    with pytest.raises(UserError) as err:
        load(way, family, *args, **kwargs)
    assert "\n" not in str(err.value)
    if case == "a model setting that changes the sizes":
        assert str(err.value).startswith(message) and str(err.value).endswith(
            "from_pretrained's keywords can change how a trained model runs (dropout, max_source_positions, ...), not "
            "its sizes or structure")
    else:
        assert str(err.value) == message
    assert "model-overrides" not in str(err.value)


@pytest.mark.parametrize("way", WAYS)
@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_loading_the_right_files_every_way_gives_a_working_interface(data, folder, family, way):
    loaded = load(way, family, folder(family), **_pieces(data, beam=3))
    hub = TranslationHubInterface(loaded["args"], loaded["task"], loaded["models"]) if way == "hub_utils" else loaded
    assert type(hub) is TranslationHubInterface and hub.cfg.generation.beam == 3
    assert isinstance(hub.translate("one two", max_len_b=3), str)


@pytest.mark.parametrize("way", WAYS)
def test_folders_and_files_may_be_paths_and_nothing_else(data, folder, way):
    """pathlib.Path arguments load (fairseq's data_name_or_path.startswith failed on one);
    None or a number is refused in one line."""
    loaded = load(way, "luong", folder("luong"), checkpoint_file="checkpoint_last.pt", data_folder=data / "bin",
                  bpe="sentencepiece", sentencepiece_model=data / "spm.model")
    assert (loaded["task"] if way == "hub_utils" else loaded.task).cfg.data == str(data / "bin")
    with pytest.raises(UserError) as err:
        load(way, "luong", folder("luong"), checkpoint_file=None, data_folder=data / "bin")
    assert str(err.value) == "from_pretrained: checkpoint_file=None: give a path, as a str or a pathlib.Path"


def test_bpe_for_a_dictionary_of_words_is_refused(data):
    """A model trained on words (fairseq-preprocess of the raw text), loaded with a subword model."""
    save = _train(data / "words", data / "ckpt_words", FAMILIES["luong"][1])
    with pytest.raises(UserError) as err:
        LuongLSTMModel.from_pretrained(str(save), checkpoint_file="checkpoint_last.pt",
                                       data_name_or_path=str(data / "words"), bpe="sentencepiece",
                                       sentencepiece_model=str(data / "spm.model"))
    assert str(err.value) == (
        f"{data / 'words'}/dict.en.txt holds words, not subword pieces (none starts with ▁ or ends with @@), and "
        "from_pretrained was given bpe='sentencepiece': its pieces would be symbols the model does not know; leave "
        "bpe= out")
    hub = LuongLSTMModel.from_pretrained(str(save), checkpoint_file="checkpoint_last.pt",
                                         data_name_or_path=str(data / "words"))
    assert hub.nbest("one two", n=1, beam=2, max_len_b=3)[0]["source_pieces"] == ["one", "two", "</s>"]


@pytest.mark.parametrize("which", ["the one it was encoded with", *SENTENCEPIECE])
def test_the_command_lines_sentencepiece_model_must_have_made_a_dictionary(data, folder, which):
    """fairseq-interactive --bpe sentencepiece with a model of fewer or more pieces, or of the
    German side only: refused; with the model the data was encoded with: one H- line a line."""
    model, numbers = SENTENCEPIECE.get(which, ("spm.model", None))
    argv = [data / "bin", "--user-dir", USER_DIR, "--path", folder("luong") / "checkpoint_last.pt", "--bpe",
            "sentencepiece", "--sentencepiece-model", data / model, "--max-len-b", "3"]
    if numbers is None:
        out, _ = fairseq_cli("interactive", argv, stdin="one two\nthree\n")
        assert [line.split("\t")[0] for line in out.splitlines() if line.startswith("H-")] == ["H-0", "H-1"]
        return
    with pytest.raises(UserError) as err:
        fairseq_cli("interactive", argv, stdin="one two\n")
    assert str(err.value) == (
        f"--sentencepiece-model {data / model} did not make the dictionaries of {data / 'bin'}: {numbers}; give the "
        "SentencePiece model the data was encoded with (the one fairseq-preprocess read pieces of)")


# ------------------------------------------------------------------ the calls' arguments
@pytest.fixture(scope="module")
def hub(data, folder):
    """hub(family): the interface of that family's model, loaded as the README says (once)."""
    loaded = {}

    def get(family):
        if family not in loaded:
            loaded[family] = load("class", family, folder(family), **_pieces(data))
        return loaded[family]

    return get


@pytest.fixture
def no_work(monkeypatch):
    """Encoding or generating anything fails the test: a check must come first."""

    def work(*args, **kwargs):
        raise AssertionError("work started before the arguments were checked")

    monkeypatch.setattr(TranslationHubInterface, "encode", work)
    monkeypatch.setattr(TranslationHubInterface, "encode_target", work)
    monkeypatch.setattr(TranslationHubInterface, "_run", work)


SENTENCES = {  # what users pass instead of a str or a list of str: the line each call gives
    "None": (None, "give a str or a list of str as {name}, not None"),
    "a number": (3, "give a str or a list of str as {name}, not int"),
    "bytes": (b"one two", "{name} is bytes: decode it (.decode('utf-8')) and give a str or a list of str"),
    "a list holding bytes": (["one", b"two"], "item 2 of {name} is bytes: decode it (.decode('utf-8')); give a str or "
                                              "a list of str"),
    "a list holding None": (["one", "two", None], "item 3 of {name} is None, not str; give a str or a list of str"),
    "a generator": ((s for s in ["one"]), "give a str or a list of str as {name}, not generator (list(...) makes one "
                                          "of it)"),
    "a dict": ({"one": 1}, "give a str or a list of str as {name}, not dict (list(...) makes one of it)"),
}


@pytest.mark.parametrize("given", sorted(SENTENCES))
@pytest.mark.parametrize("call", ["translate", "sample", "nbest", "score sources", "score targets"])
@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_sentences_of_another_type_are_refused_in_one_line(hub, no_work, family, call, given):
    value, message = SENTENCES[given]
    method, _, side = call.partition(" ")
    with pytest.raises(ArgumentError) as err:
        if method == "score":
            getattr(hub(family), "score")(*((value, "One") if side == "sources" else (["one"], value)))
        else:
            getattr(hub(family), method)(value)
    assert isinstance(err.value, TypeError)
    if side == "targets" and value is None:  # the target left out: score(source, None) is score(source)
        message = "score(source, target): give the translation to score"
    else:
        message = f"{method}: " + message.format(name=side or "sentences")
    assert str(err.value) == message


KEYWORDS = [  # (call, keywords, the line it gives)
    ("translate", {"beem": 4}, "translate: no option 'beem' (did you mean beam?); the generation options are "
                               "fairseq-generate's, by keyword: beam, lenpen, max_len_a, max_len_b, min_len, unkpen, "
                               "no_repeat_ngram_size, sampling, ..."),
    ("translate", {"lenpem": 2}, "translate: no option 'lenpem' (did you mean lenpen?); the generation options"),
    ("translate", {"maxlen_b": 2}, "translate: no option 'maxlen_b' (did you mean max_len_b?); the generation"),
    ("nbest", {"nbest": 2}, "nbest: nbest=2: the number of translations is n here; give n=2"),
    ("score", {"beem": 2}, "score: no option 'beem' (did you mean beam?); the generation options"),
    ("generate", {"lenpem": 2}, "generate: no option 'lenpem' (did you mean lenpen?); the generation options"),
    ("translate", {"beam": 0}, "translate: beam=0: give a beam of at least 1 (1: greedy search)"),
    ("translate", {"beam": -1}, "translate: beam=-1: give a beam of at least 1 (1: greedy search)"),
    ("nbest", {"beam": 0}, "nbest: beam=0: give a beam of at least 1 (1: greedy search)"),
    ("generate", {"beam": 0}, "generate: beam=0: give a beam of at least 1 (1: greedy search)"),
    ("translate", {"beam": "5"}, "translate: beam='5': give a whole number"),
    ("translate", {"beam": 2.5}, "translate: beam=2.5: give a whole number"),
    ("translate", {"lenpen": "0.6"}, "translate: lenpen='0.6': give a number"),
    ("translate", {"lenpen": None}, "translate: lenpen=None: give a number"),
    ("translate", {"sampling": 1}, "translate: sampling=1: give True or False"),
    ("translate", {"print_alignment": "hardd"}, "translate: print_alignment='hardd': give one of 'hard', 'soft'"),
    ("translate", {"max_len_a": -1}, "translate: max_len_a=-1: give 0 or more"),
    ("translate", {"max_len_b": -1}, "translate: min_len=1 is more than the length limit max_len_b=-1: give "
                                     "max_len_b=1 or more"),
    ("translate", {"min_len": -1}, "translate: min_len=-1: give 0 or more"),
    ("translate", {"min_len": 5, "max_len_b": 3}, "translate: min_len=5 is more than the length limit max_len_b=3: "
                                                  "give max_len_b=5 or more"),
    ("translate", {"nbest": 6}, "translate: nbest=6 is more than beam=5: beam search keeps 5 hypotheses; give beam=6 "
                                "or more, or nbest=5 or less"),
    ("translate", {"sampling_topk": 3}, "translate: sampling_topk qualifies sampling, which is not given: give both, "
                                        "or leave sampling_topk out"),
    ("translate", {"sampling": True, "sampling_topp": 1.5}, "translate: sampling_topp=1.5: give a probability above 0,"
                                                            " up to 1"),
    ("translate", {"temperature": 0}, "translate: temperature=0: give a temperature above 0"),
    ("translate", {"beam": 3, "diverse_beam_groups": 2}, "translate: diverse_beam_groups=2 does not divide beam=3"),
    ("translate", {"score_reference": True}, "translate: score_reference scores the reference translations: "
                                             "fairseq-generate does, the Python interface does not; score() scores a "
                                             "translation you give"),
    ("translate", {"iter_decode_max_iter": 3}, "translate: iter_decode_max_iter is for fairseq's iterative-refinement"
                                               " generator (non-autoregressive models); the Python interface translates"
                                               " with beam search here, which would ignore it or fail: leave it out"),
    ("score", {"score_reference": False}, "score: score_reference=False is score's own setting; leave it out"),
    ("nbest", {"n": 0}, "nbest: n=0: give at least 1"),
    ("nbest", {"n": 2.5}, "nbest: n=2.5: give a whole number of translations"),
    ("nbest", {"n": 4, "beam": 3}, "nbest: n=4 is more than beam=3: beam search keeps 3 hypotheses; give beam=4 or "
                                   "more, or n=3 or less"),
    ("nbest", {"n": 60, "beam": 80}, "nbest: n=60 is more than the 55 hypotheses beam search keeps for this model "
                                     "(fairseq caps the beam at its target dictionary's 56 symbols less one): give "
                                     "n=55 or less"),
    ("nbest", {"beam": 70}, "nbest: beam=70 (n defaults to it) is more than the 55 hypotheses beam search keeps for "
                            "this model (fairseq caps the beam at its target dictionary's 56 symbols less one): give "
                            "n=55 or less"),
]


@pytest.mark.parametrize("call,keywords,message", KEYWORDS, ids=[f"{c}-{k}" for c, k, _ in KEYWORDS])
@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_generation_keywords_are_checked_before_any_work(hub, no_work, family, call, keywords, message):
    """fairseq ignored a misspelt keyword, and failed deep in the sequence generator on a value
    it cannot use (beam=0: 'cannot reshape tensor of 0 elements'); nbest returned fewer
    hypotheses than asked when fairseq capped the beam at the vocabulary's size."""
    interface = hub(family)
    with pytest.raises(ConfigError) as err:
        if call == "score":
            interface.score("one", "One", **keywords)
        elif call == "generate":
            interface.generate([torch.tensor([4, 2])], **keywords)
        else:
            getattr(interface, call)("one two", **keywords)
    assert str(err.value).startswith(message) and "\n" not in str(err.value)


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_what_the_calls_accept_they_return(hub, family):
    """A str gives one answer; a list (or a tuple) one per sentence, in order; an empty list
    none; nbest gives n hypotheses (beam by default) and score a dict."""
    interface = hub(family)
    one = interface.translate("one two", beam=2, max_len_b=4)
    assert isinstance(one, str)
    assert interface.translate(["one two", "three"], beam=2, max_len_b=4) == [one, interface.translate("three", beam=2,
                                                                                                        max_len_b=4)]
    assert interface.translate(("one two",), beam=2, max_len_b=4) == [one]
    assert interface.translate([]) == [] and interface.nbest([]) == [] and interface.score([], []) == []
    assert [len(interface.nbest("one two", n=n, beam=3, max_len_b=4)) for n in (None, 1, 2, 3)] == [3, 1, 2, 3]
    assert [len(h) for h in interface.nbest(["one", "two three"], n=2, beam=2, max_len_b=4)] == [2, 2]
    assert interface.nbest("one two", n=1, beam=2, max_len_b=4)[0]["translation"] == one
    assert len(interface.nbest("one", n=55, beam=55, max_len_b=2)) == 55  # the most the beam keeps here
    scored = interface.score("one two", "One Two")
    assert scored["pieces"][-1] == "</s>" and scored["log_prob"] < 0
    assert [s["pieces"] for s in interface.score(["one", "two"], ["One", "Two"])] == [
        interface.score("one", "One")["pieces"], interface.score("two", "Two")["pieces"]]
    assert isinstance(interface.translate("one", sampling=True, beam=2, max_len_b=4), str)
    # as long as the source at most: a negative max_len_b is fine with max_len_a
    best = interface.nbest("one two", n=1, beam=2, max_len_a=1, max_len_b=-1)[0]
    assert len(best["pieces"]) <= len(best["source_pieces"])  # both count </s>


# ---------------------------------------------------------------- model archives (archives.py)

def _tar(path, members, mode="w:gz"):
    """A tar archive at ``path`` of (archive name, file on disk or None for a folder, tar type)."""
    import tarfile

    with tarfile.open(path, mode) as tar:
        for name, source, kind in members:
            info = tarfile.TarInfo(name)
            if kind == "link":
                info.type, info.linkname = tarfile.SYMTYPE, source
                tar.addfile(info)
            elif source is None:
                info.type = tarfile.DIRTYPE
                tar.addfile(info)
            else:
                data = source.read_bytes()
                info.size = len(data)
                import io
                tar.addfile(info, io.BytesIO(data))
    return path


def _model_members(data, folder, prefix):
    """The checkpoint and the data's dictionaries, under ``prefix`` in the archive."""
    files = [("model.pt", folder("luong") / "checkpoint_last.pt"), ("dict.en.txt", data / "bin/dict.en.txt"),
             ("dict.de.txt", data / "bin/dict.de.txt")]
    folders = [(prefix.rstrip("/"), None, "dir")] if prefix else []
    return folders + [(prefix + name, source, "file") for name, source in files]


@pytest.mark.parametrize("layout,mode,suffix", [("one top folder", "w:gz", ".tar.gz"),
                                                ("no top folder", "w:bz2", ".tar.bz2"),
                                                ("no top folder", "w:gz", ".tgz")])
def test_a_model_archive_loads_and_stays_as_it_was(data, folder, tmp_path, layout, mode, suffix):
    """fairseq deleted the user's archive and put a folder in its place (with members of no top
    folder sharing the prefix "dict.", it deleted it and failed); it read the compression from the
    last extension only (.tgz failed)."""
    import hashlib

    prefix = "model/" if layout == "one top folder" else ""
    archive = _tar(tmp_path / f"luong{suffix}", _model_members(data, folder, prefix), mode)
    digest = hashlib.sha1(archive.read_bytes()).hexdigest()
    hub = LuongLSTMModel.from_pretrained(str(archive), "model.pt", source_lang="en", target_lang="de",
                                         bpe="sentencepiece", sentencepiece_model=str(data / "spm.model"))
    assert isinstance(hub.translate("one two", max_len_b=3), str)
    assert archive.is_file() and hashlib.sha1(archive.read_bytes()).hexdigest() == digest
    assert sorted(p.name for p in tmp_path.iterdir()) == [archive.name]  # nothing unpacked beside it


@pytest.mark.parametrize("case", ["a path out of the folder", "an absolute path", "a link"])
def test_an_archive_member_that_would_land_elsewhere_is_refused_before_anything_is_written(data, folder, tmp_path,
                                                                                          case):
    outside = tmp_path / "outside"
    bad = {"a path out of the folder": ("model/../../../" + "x" * 3, data / "bin/dict.en.txt", "file"),
           "an absolute path": (str(tmp_path / "abs.txt"), data / "bin/dict.en.txt", "file"),
           "a link": ("model/dict.fr.txt", str(outside), "link")}[case]
    archive = _tar(tmp_path / "bad.tar.gz", _model_members(data, folder, "model/") + [bad])
    with pytest.raises(UserError) as err:
        LuongLSTMModel.from_pretrained(str(archive), "model.pt")
    why = {"a path out of the folder": "a path that leads outside the folder it is unpacked into",
           "an absolute path": "a path that leads outside the folder it is unpacked into",
           "a link": f"a link to {str(outside)!r}"}[case]
    assert str(err.value) == (f"from_pretrained: {archive} holds {bad[0]!r}, {why}: refused, nothing was unpacked; "
                              "unpack the archive yourself and give the folder")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.tar.gz"]


def test_a_url_without_requests_is_one_line(monkeypatch):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "requests" else real(name, *a))
    with pytest.raises(UserError, match=r"^from_pretrained: https://example.org/m.tar.gz is a URL, and fairseq "
                                        r"downloads with the requests package, which is not installed"):
        LuongLSTMModel.from_pretrained("https://example.org/m.tar.gz", "model.pt")
