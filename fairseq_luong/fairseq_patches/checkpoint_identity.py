"""A checkpoint knows its languages and dictionaries; a run that gives it others is refused
before its model is built.

fairseq loads a checkpoint with the dictionaries of the data folder the command names and
checks only that the embedding sizes fit. So a model trained en->ja, run with ``-s ja -t
en`` on the same folder, translates garbage with exit status 0 when the two dictionaries
have the same size (a joined dictionary always does), and so does a model run on a folder
binarized with another dictionary of the same size: its token ids mean other words. A
dictionary of another size stopped in ``load_state_dict``, a traceback about weight shapes
(or, with the plugin, a line blaming ``--model-overrides``). ``from_pretrained`` (fairseq's
``hub_utils``) passes no task, and was not checked at all.

Every checkpoint fairseq-train writes now records, in its ``extra_state``, the source and
target languages and a hash of each dictionary's symbols in order
(``Trainer.save_checkpoint``). Loading it for translation or scoring
(``load_model_ensemble_and_task``), in Python or on the command line, or to resume training
(``Trainer.load_checkpoint``) compares the record with the run's task as soon as both are
known: when the checkpoint is read if the caller gave the task, or when fairseq has set the
task up from the checkpoint's config (``tasks.setup_task``, for ``from_pretrained``), before
the model is built. A mismatch is one line naming the checkpoint, both directions or the
dictionary file, and what to give, as a command-line flag or as ``from_pretrained``'s keyword
(``patching.option``). Checkpoints written before this record are checked by the sizes of
their embeddings against the dictionaries.
"""
import contextvars
import functools
import hashlib
import os
from collections.abc import Mapping

from fairseq import checkpoint_utils, tasks
from fairseq.trainer import Trainer

from fairseq_fixes.option_names import in_python_call
from fairseq_fixes.patching import CHECK, patch, wrap_once

from ..errors import UserError

KEY = "fairseq_luong_data"


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


def one_dictionary_a_side(task):
    """Whether TASK has one source and one target dictionary, the premise of the record. fairseq's
    multilingual tasks (multilingual_translation, translation_multi_simple_epoch, semisupervised_translation,
    speech_dlm_task) hold a dictionary per language in ``task.dicts``: which one is the target's depends
    on the direction asked for (multilingual_translation trains with the first language's on both
    sides), so a record of one of them says nothing of another run."""
    return not isinstance(getattr(task, "dicts", None), Mapping)


def data_record(task):
    """{"source_lang", "target_lang", "source_dict", "target_dict", "*_size"} of a task with one
    dictionary a side; {} of one with a dictionary per language."""
    record = {}
    if not one_dictionary_a_side(task):
        return record
    for side in ("source", "target"):
        lang, dictionary = _side(task, side)
        record[f"{side}_lang"] = lang
        if dictionary is not None:
            record[f"{side}_dict"] = dictionary_hash(dictionary)
            record[f"{side}_size"] = len(dictionary)
    return record


_LOADING = contextvars.ContextVar("fairseq_luong_checkpoint_identity", default=None)  # see _checked_ensemble
_EMBEDDINGS = {"source": "encoder.embed_tokens.weight", "target": "decoder.embed_tokens.weight"}


def embedding_sizes(state):
    """{side: rows of its token embedding} of a checkpoint's weights: the size of the dictionary
    it was trained with (fairseq's encoder-decoder models name them so)."""
    weights = state.get("model") or {}
    return {side: weights[key].shape[0] for side, key in _EMBEDDINGS.items()
            if getattr(weights.get(key), "dim", lambda: 0)() == 2}


def _data(task):
    return str(getattr(getattr(task, "cfg", None), "data", "the data folder")).split(os.pathsep)[0]


def _other_dictionary(path, side, task, then):
    """The error for a checkpoint trained with another SIDE dictionary than the run's: ``then``
    says how it differs."""
    lang = _side(task, side)[0] or side
    fix = ("give data_name_or_path= the data folder it was trained on (fairseq-preprocess's --destdir)"
           if in_python_call() else
           "use the data folder it was trained on, or binarize with fairseq-preprocess --srcdict/--tgtdict from its "
           "training data")
    return UserError(f"{path} was trained with another {side} dictionary than {_data(task)}/dict.{lang}.txt ({then}), "
                     f"so its token ids would mean other words: {fix}")


def check(path, record, task, sizes=None):
    """Raise UserError when checkpoint PATH's record (or, without one, the ``sizes`` of its
    embeddings) does not fit the run's TASK (nothing to check of a task with a dictionary a
    language: its record is empty)."""
    if task is None:
        return
    now = data_record(task)
    record = record or {}
    trained = (record.get("source_lang"), record.get("target_lang"))
    asked = (now.get("source_lang"), now.get("target_lang"))
    if None not in trained and None not in asked and trained != asked:
        (a, b), (c, d) = trained, asked
        if in_python_call():
            raise UserError(f"{path} was trained {a}->{b}, and {in_python_call()} loads it for {c}->{d} (source_lang=, "
                            f"target_lang=, or the language pair of {_data(task)}): give source_lang={a!r}, "
                            f"target_lang={b!r}, or a model trained {c}->{d}")
        raise UserError(f"{path} was trained {a}->{b}, and this run translates {c}->{d} (-s/-t, or the language pair "
                        f"found in {_data(task)}): give -s {a} -t {b}, or a model trained {c}->{d}")
    for side in ("source", "target"):
        want, have = record.get(f"{side}_dict"), now.get(f"{side}_dict")
        then, size = record.get(f"{side}_size"), now.get(f"{side}_size")
        if want and have and want != have:
            raise _other_dictionary(path, side, task, f"{then} symbols then, {size} now" if then != size else
                                    f"the same number of symbols, {size}, but other symbols or another order")
        trained_size = (sizes or {}).get(side)
        if not want and trained_size is not None and size is not None and trained_size != size:
            raise _other_dictionary(path, side, task, f"its {side} embeddings have {trained_size} rows, the "
                                                      f"dictionary {size} symbols")


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
        record = (state.get("extra_state") or {}).get(KEY)
        loading = _LOADING.get()
        if loading is not None:  # inside a load that checks; with its task given: checked now
            loading.update(path=str(path), record=record, sizes=embedding_sizes(state))
            if loading["task"] is not None:
                check(path, record, loading["task"], loading["sizes"])
        return state

    return wrapper


def _checked_task_setup(setup_task):
    @functools.wraps(setup_task)
    def wrapper(cfg, *args, **kwargs):
        task = setup_task(cfg, *args, **kwargs)
        loading = _LOADING.get()
        if loading is not None and loading["task"] is None and "path" in loading:
            # fairseq set the task up from the checkpoint it just read: check before the model is built
            loading["task"] = task
            check(loading["path"], loading["record"], task, loading["sizes"])
        return task

    return wrapper


def _checking(load, task):
    """Inside, each checkpoint read is checked against ``task`` (or, when None, against the task
    fairseq sets up from it) before its model is built."""
    token = _LOADING.set({"task": task})
    try:
        return load()
    finally:
        _LOADING.reset(token)


def _checked_ensemble(load_ensemble):
    @functools.wraps(load_ensemble)
    def load_model_ensemble_and_task(filenames, arg_overrides=None, task=None, *args, **kwargs):
        return _checking(lambda: load_ensemble(filenames, arg_overrides, task, *args, **kwargs), task)

    return load_model_ensemble_and_task


def _checked_resume(load_checkpoint):
    @functools.wraps(load_checkpoint)
    def wrapper(self, filename, *args, **kwargs):
        return _checking(lambda: load_checkpoint(self, filename, *args, **kwargs), self.task)

    return wrapper


@patch(CHECK, "a checkpoint of a task with one source and one target dictionary (not the multilingual tasks, "
       "a dictionary a language) loaded with other languages or dictionaries than it was trained on (fairseq loads "
       "it when the sizes fit); each checkpoint saved records them")
def patch_checkpoint_identity():
    """``Trainer.save_checkpoint`` records the data; ``load_checkpoint_to_cpu`` checks the
    record against the run's task, inside ``load_model_ensemble_and_task`` and
    ``Trainer.load_checkpoint``, or ``tasks.setup_task`` does once fairseq set the task up."""
    wrap_once(Trainer, "save_checkpoint", _recording)
    wrap_once(checkpoint_utils, "load_checkpoint_to_cpu", _remembering)
    wrap_once(checkpoint_utils, "load_model_ensemble_and_task", _checked_ensemble)
    wrap_once(Trainer, "load_checkpoint", _checked_resume)
    wrap_once(tasks, "setup_task", _checked_task_setup)
