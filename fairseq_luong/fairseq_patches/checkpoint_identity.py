"""A checkpoint knows its languages and dictionaries; a run that gives it others is refused.

fairseq loads a checkpoint with the dictionaries of the data folder the command names and
checks only that the embedding sizes fit. So a model trained en->ja, run with ``-s ja -t
en`` on the same folder, translates garbage with exit status 0 when the two dictionaries
have the same size (a joined dictionary always does), and so does a model run on a folder
binarized with another dictionary of the same size: its token ids mean other words.

Every checkpoint fairseq-train writes now records, in its ``extra_state``, the source and
target languages and a hash of each dictionary's symbols in order
(``Trainer.save_checkpoint``). Loading it for translation or scoring
(``load_model_ensemble_and_task``, given the run's task) or to resume training
(``Trainer.load_checkpoint``) compares the record with the run's task and refuses a
mismatch in one line naming the checkpoint, both directions or the dictionary file, and
what to give. Checkpoints written before this record are loaded as before.
"""
import functools
import hashlib
import os

from fairseq import checkpoint_utils
from fairseq.trainer import Trainer

from ..errors import UserError
from .patching import wrap_once

KEY = "fairseq_luong_data"
_RECORDS = {}  # checkpoint path -> its record, as load_checkpoint_to_cpu last read it


def dictionary_hash(dictionary):
    """A hash of the symbols in index order: what a token id means."""
    return hashlib.sha1("\n".join(dictionary.symbols).encode("utf-8")).hexdigest()[:16]


def _side(task, side):
    lang = getattr(getattr(task, "cfg", None), f"{side}_lang", None)
    try:
        dictionary = getattr(task, f"{side}_dictionary")
    except (NotImplementedError, AttributeError):
        dictionary = None
    return lang, dictionary


def data_record(task):
    """{"source_lang", "target_lang", "source_dict", "target_dict", "*_size"} of a task."""
    record = {}
    for side in ("source", "target"):
        lang, dictionary = _side(task, side)
        record[f"{side}_lang"] = lang
        if dictionary is not None:
            record[f"{side}_dict"] = dictionary_hash(dictionary)
            record[f"{side}_size"] = len(dictionary)
    return record


def check(path, record, task):
    """Raise UserError when checkpoint PATH's record does not fit the run's TASK."""
    if not record or task is None:
        return
    now = data_record(task)
    trained = (record.get("source_lang"), record.get("target_lang"))
    asked = (now.get("source_lang"), now.get("target_lang"))
    if None not in trained and None not in asked and trained != asked:
        data = getattr(getattr(task, "cfg", None), "data", "the data folder")
        raise UserError(f"{path} was trained {trained[0]}->{trained[1]}, and this run translates "
                        f"{asked[0]}->{asked[1]} (-s/-t, or the language pair found in {data}): give -s "
                        f"{trained[0]} -t {trained[1]}, or a model trained {asked[0]}->{asked[1]}")
    for side in ("source", "target"):
        want, have = record.get(f"{side}_dict"), now.get(f"{side}_dict")
        if want and have and want != have:
            data = str(getattr(getattr(task, "cfg", None), "data", "the data folder")).split(os.pathsep)[0]
            lang = now.get(f"{side}_lang") or side
            raise UserError(f"{path} was trained with another {side} dictionary than {data}/dict.{lang}.txt "
                            f"({record.get(f'{side}_size')} symbols then, {now.get(f'{side}_size')} now, or the "
                            "same symbols in another order), so its token ids would mean other words: use the "
                            "data folder it was trained on, or binarize with fairseq-preprocess --srcdict/"
                            "--tgtdict from its training data")


def _recording(save_checkpoint):
    @functools.wraps(save_checkpoint)
    def wrapper(self, filename, extra_state, *args, **kwargs):
        extra_state = dict(extra_state, **{KEY: data_record(self.task)})
        return save_checkpoint(self, filename, extra_state, *args, **kwargs)

    return wrapper


def _remembering(load_checkpoint_to_cpu):
    @functools.wraps(load_checkpoint_to_cpu)
    def wrapper(path, *args, **kwargs):
        state = load_checkpoint_to_cpu(path, *args, **kwargs)
        _RECORDS[str(path)] = (state.get("extra_state") or {}).get(KEY)
        return state

    return wrapper


def _checked_ensemble(load_ensemble):
    @functools.wraps(load_ensemble)
    def load_model_ensemble_and_task(filenames, arg_overrides=None, task=None, *args, **kwargs):
        out = load_ensemble(filenames, arg_overrides, task, *args, **kwargs)
        for filename in filenames:
            check(filename, _RECORDS.get(str(filename)), task)
        return out

    return load_model_ensemble_and_task


def _checked_resume(load_checkpoint):
    @functools.wraps(load_checkpoint)
    def wrapper(self, filename, *args, **kwargs):
        out = load_checkpoint(self, filename, *args, **kwargs)
        if out is not None:  # a checkpoint was there and was loaded
            check(filename, _RECORDS.get(str(filename)), self.task)
        return out

    return wrapper


def patch_checkpoint_identity():
    """``Trainer.save_checkpoint`` records the data; ``load_checkpoint_to_cpu`` remembers the
    record; ``load_model_ensemble_and_task`` and ``Trainer.load_checkpoint`` check it."""
    wrap_once(Trainer, "save_checkpoint", _recording)
    wrap_once(checkpoint_utils, "load_checkpoint_to_cpu", _remembering)
    wrap_once(checkpoint_utils, "load_model_ensemble_and_task", _checked_ensemble)
    wrap_once(Trainer, "load_checkpoint", _checked_resume)
