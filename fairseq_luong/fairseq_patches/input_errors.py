"""One-line errors for a data directory that is not there and for ``--print-alignment soft``
in fairseq-interactive.

What fairseq does, and what we do instead (a ``UserError``: one line at the terminal):

* A data directory that does not exist: ``FileNotFoundError`` from ``os.listdir`` in
  ``data_utils.infer_language_pair``, or, with ``-s``/``-t``, from opening
  ``DIR/dict.SRC.txt``. An empty directory, or one without binarized files:
  ``Exception: Could not infer language pair``, raised by ``TranslationTask.setup_task``
  when ``infer_language_pair`` finds no ``SPLIT.SRC-TGT.LANG`` file. A directory without
  the split that is asked for: ``FileNotFoundError: Dataset not found`` from
  ``translation.load_langpair_dataset``. Each came with a traceback. We wrap
  ``infer_language_pair``, ``Dictionary.add_from_file`` and ``load_langpair_dataset`` and
  name the directory or file and what fairseq-preprocess writes there.
* ``fairseq-interactive --print-alignment soft`` translated the first line and then
  stopped with ``ValueError: too many values to unpack`` (fairseq_cli/interactive.py
  prints every alignment as ``source-target`` pairs; a soft alignment is a row of
  weights per target token). fairseq-generate prints soft alignments; we refuse the
  option in fairseq-interactive before any model is loaded, naming both alternatives.
"""
import functools
import os

from fairseq.data import Dictionary, data_utils
from fairseq.tasks import translation

from ..errors import UserError
from .patching import fairseq_cli_modules, wrap_once

_PREPROCESS = "the --destdir of fairseq-preprocess, which holds dict.SRC.txt, dict.TGT.txt and the binarized splits"


def _is_local(path):
    return "://" not in str(path)


def _checked_data_dir(infer):
    @functools.wraps(infer)
    def infer_language_pair(path):
        if _is_local(path) and not os.path.isdir(path):
            what = "is not a directory" if os.path.exists(path) else "does not exist"
            raise UserError(f"data directory {path} {what}: give {_PREPROCESS}")
        src, tgt = infer(path)
        if src is None or tgt is None:
            raise UserError(
                f"data directory {path} holds no binarized data (fairseq takes the language pair "
                "from file names such as train.en-de.en.idx): give " + _PREPROCESS + ", or give "
                "-s SRC -t TGT"
            )
        return src, tgt

    return infer_language_pair


def _named_missing_dictionary(add_from_file):
    @functools.wraps(add_from_file)
    def wrapper(self, f):
        try:
            return add_from_file(self, f)
        except FileNotFoundError as err:
            if not isinstance(f, str):
                raise
            folder = os.path.dirname(f) or "."
            where = "" if os.path.isdir(folder) else f" (the directory {folder} does not exist)"
            raise UserError(f"no dictionary {f}{where}: a data directory is {_PREPROCESS}") from err

    return wrapper


def _named_missing_split(load):
    @functools.wraps(load)
    def load_langpair_dataset(data_path, split, src, src_dict, tgt, tgt_dict, *args, **kwargs):
        try:
            return load(data_path, split, src, src_dict, tgt, tgt_dict, *args, **kwargs)
        except FileNotFoundError as err:
            if not str(err).startswith("Dataset not found"):
                raise
            raise UserError(
                f"no {split} split in {data_path}: fairseq looks for {split}.{src}-{tgt}.{src} "
                f"(or {split}.{tgt}-{src}.{src}), which fairseq-preprocess writes for the prefix "
                f"it is given (--trainpref, --validpref, --testpref)"
            ) from err

    return load_langpair_dataset


def _no_soft_alignment(main):
    @functools.wraps(main)
    def wrapper(cfg, *args, **kwargs):
        if getattr(cfg.generation, "print_alignment", None) == "soft":
            raise UserError(
                "--print-alignment soft: fairseq-interactive prints hard alignments only (its A- lines "
                "are source-target pairs); use --print-alignment, or fairseq-generate --print-alignment "
                "soft for the attention weights"
            )
        return main(cfg, *args, **kwargs)

    return wrapper


def patch_data_directories():
    """``infer_language_pair``, ``Dictionary.add_from_file``, ``load_langpair_dataset``: a
    missing, empty or wrong data directory, dictionary or split is one line."""
    wrap_once(data_utils, "infer_language_pair", _checked_data_dir)
    wrap_once(Dictionary, "add_from_file", _named_missing_dictionary)
    wrap_once(translation, "load_langpair_dataset", _named_missing_split)


def patch_interactive_soft_alignment():
    """fairseq-interactive's ``main``: ``--print-alignment soft`` is refused before any work."""
    for module in fairseq_cli_modules("interactive"):
        wrap_once(module, "main", _no_soft_alignment)
