"""``from_pretrained`` checks what the command line checks (a check).

**The same checks as the command line** (:func:`patch_hub_loading`). fairseq's
``hub_utils.from_pretrained`` (which the plugin's classes, fairseq's
``BaseFairseqModel.from_pretrained`` and a caller's own code all go through) checks nothing of
what it is given: a model folder or data folder that does not exist fails inside fairseq
(``TypeError: expected str, bytes or os.PathLike object, not NoneType``), a checkpoint file
given as the folder in ``tarfile`` (``CompressionError``), ``bpe='sentencepiece'`` without its
model in omegaconf (``MissingMandatoryValue``), a model file that is not there in ``file_utils``
(``OSError``), a ``pathlib.Path`` as the data folder in ``str.startswith`` (``AttributeError``:
paths are now made str); and it passes no task, so the checks of the checkpoint's data ran only
on the command line. We check the folders and files first, then load inside
``python_call("from_pretrained")``, so that each check fairseq's loading runs (fairseq_fixes'
``checkpoint_loading.py``, ``model_overrides.py``, ``checkpoint_identity.py``: the direction,
the dictionaries, the weights, an option that is not there) names ``from_pretrained``'s keyword,
and last check the subword model against the dictionary (``segmentation.py``) and the generation
options (``checks/generation.py``, for a task that generates with fairseq's beam search). Each
refusal is one ``UserError``.
"""
import difflib
import functools
import os
import tarfile

from fairseq import hub_utils
from fairseq.data import encoders

from fairseq_fixes.checkpoint_loading import folder_holds
from fairseq_fixes.option_names import python_call
from fairseq_fixes.patching import CHECK, patch, wrap_once

from ..checks.generation import check_generation_keywords
from ..errors import UserError
from . import segmentation

_SUBWORD_FILES = ("sentencepiece_model", "bpe_codes", "bpe_vocab", "bpe_merges")  # fairseq's own names
_PREPROCESS = "the folder fairseq-preprocess wrote (its --destdir), which holds dict.SRC.txt and dict.TGT.txt"


def _local(name, archive_map):
    return isinstance(name, str) and "://" not in name and not (archive_map and name in archive_map)


def _check_model_folder(folder, checkpoint_file):
    if not os.path.exists(folder):
        raise UserError(f"from_pretrained: no model folder {folder} (it does not exist): give the folder that holds "
                        "the checkpoint (fairseq-train's --save-dir), and checkpoint_file= the file in it")
    if os.path.isfile(folder):
        if tarfile.is_tarfile(folder):
            return  # an archive fairseq unpacks
        head, name = os.path.split(folder)
        raise UserError(f"from_pretrained: {folder} is a file, not the folder of a checkpoint: give "
                        f"from_pretrained({head or '.'!r}, checkpoint_file={name!r}, ...)")
    for name in checkpoint_file.split(os.pathsep):
        path = os.path.join(folder, name)
        if not os.path.exists(path):
            raise UserError(f"from_pretrained: no checkpoint {path} ({folder} {folder_holds(folder)}): give "
                            "checkpoint_file= one of them (default: model.pt)")


def _check_data_folder(data, given):
    """A data folder that is not there, or a file: every task reads its dictionaries from the folder.
    Which dictionaries is the task's to say (dict.txt for fairseq's language models and RoBERTa,
    dict.SRC.txt and dict.TGT.txt for translation, input0/dict.txt for sentence prediction): a
    missing one is named when the task reads it (input_errors.py)."""
    what = "it does not exist" if not os.path.exists(data) else "it is a file" if not os.path.isdir(data) else None
    if what:
        default = " (inside the model folder)" if given.startswith(".") else ""
        raise UserError(f"from_pretrained: data_name_or_path={given!r}{default} gives {data}, and {what}: give "
                        f"{_PREPROCESS}")


def _check_registry_name(key, value, registry, what):
    if value is not None and value not in registry:
        near = difflib.get_close_matches(str(value), sorted(registry), n=1)
        hint = f" (did you mean {near[0]!r}?)" if near else ""
        raise UserError(f"from_pretrained: {key}={value!r} is no {what} fairseq knows{hint}; give one of "
                        f"{', '.join(map(repr, sorted(registry)))}")


def check_from_pretrained(model_name_or_path, checkpoint_file, data_name_or_path, archive_map, kwargs):
    """Raise UserError for a folder or file ``from_pretrained`` is given that is not there, or
    a subword model it cannot build: before fairseq reads anything."""
    folder = model_name_or_path if _local(model_name_or_path, archive_map) else None
    if folder is not None:
        _check_model_folder(folder, checkpoint_file)
    if isinstance(data_name_or_path, str) and data_name_or_path.startswith("."):
        if folder is not None and os.path.isdir(folder):
            _check_data_folder(os.path.abspath(os.path.join(folder, data_name_or_path)), data_name_or_path)
    elif _local(data_name_or_path, archive_map):
        _check_data_folder(data_name_or_path, data_name_or_path)
    for key in _SUBWORD_FILES:
        value = kwargs.get(key)
        if isinstance(value, str) and "://" not in value and not os.path.isfile(value):
            raise UserError(f"from_pretrained: {key}={value!r}: no such file")
    _check_registry_name("bpe", kwargs.get("bpe"), encoders.BPE_REGISTRY, "subword model")
    _check_registry_name("tokenizer", kwargs.get("tokenizer"), encoders.TOKENIZER_REGISTRY, "tokenizer")
    bundled = folder is not None and os.path.isfile(os.path.join(folder, "sentencepiece.bpe.model"))
    if kwargs.get("bpe") == "sentencepiece" and not kwargs.get("sentencepiece_model") and not bundled:
        raise UserError("from_pretrained: bpe='sentencepiece' needs sentencepiece_model=, the SentencePiece model the "
                        "data was encoded with")


def _check_languages_used(task, kwargs):
    """fairseq's translation task takes the language pair from the data folder's file names
    unless both languages are given: one alone was ignored without a word."""
    for key in ("source_lang", "target_lang"):
        if kwargs.get(key) is not None and hasattr(task.cfg, key) and getattr(task.cfg, key) != kwargs[key]:
            raise UserError(f"from_pretrained: {key}={kwargs[key]!r} was not used: fairseq took the language pair "
                            f"{task.cfg.source_lang}->{task.cfg.target_lang} from the files in {task.cfg.data}, as it "
                            "does unless source_lang= and target_lang= are both given: give both")


def _as_str(name, value):
    """A folder or file argument as fairseq takes it: a str (a pathlib.Path is made one; fairseq's
    ``data_name_or_path.startswith`` failed on it with ``AttributeError``)."""
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    if not isinstance(value, str):
        raise UserError(f"from_pretrained: {name}={value!r}: give a path, as a str or a pathlib.Path")
    return value


def _checked_from_pretrained(from_pretrained):
    @functools.wraps(from_pretrained)
    def wrapper(model_name_or_path, checkpoint_file="model.pt", data_name_or_path=".", archive_map=None, **kwargs):
        with python_call("from_pretrained"):
            model_name_or_path = _as_str("model_name_or_path", model_name_or_path)
            checkpoint_file = _as_str("checkpoint_file", checkpoint_file)
            data_name_or_path = _as_str("data_name_or_path", data_name_or_path)
            kwargs = {k: os.fspath(v) if isinstance(v, os.PathLike) else v for k, v in kwargs.items()}
            check_from_pretrained(model_name_or_path, checkpoint_file, data_name_or_path, archive_map, kwargs)
            x = from_pretrained(model_name_or_path, checkpoint_file, data_name_or_path, archive_map, **kwargs)
            if x.get("task") is not None:
                _check_languages_used(x["task"], kwargs)
                segmentation.check_hub_segmentation(x["args"], x["task"])
                check_generation_keywords("from_pretrained", {}, x["args"].generation, task=x["task"])
        return x

    return wrapper


@patch(CHECK, "hub_utils.from_pretrained, for every model: a folder, file, subword model or option that is not "
       "there or does not fit, refused in one line; no dictionary asked for before the task says which it "
       "reads")
def patch_hub_loading():
    """``hub_utils.from_pretrained``: folders, files and options checked, and every check of
    loading in ``from_pretrained``'s terms."""
    wrap_once(hub_utils, "from_pretrained", _checked_from_pretrained)
