"""One-line errors for a data directory, dictionary or split that is not there, or cut short (a
check).

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
* A binarized split cut short (an interrupted copy or fairseq-preprocess): numpy's
  ``ValueError: offset must be non-negative and no greater than buffer length`` (a short
  ``.idx``) or ``buffer is smaller than requested size`` (a short ``.bin``), from deep in
  ``MMapIndexedDataset``, or a silent read past the end. ``data_utils.load_indexed_dataset``
  now checks each ``.idx``/``.bin`` pair against the sizes its header gives, and names the
  file, what it should hold and what it holds.
"""
import functools
import logging
import os
import struct

from fairseq.data import Dictionary, data_utils, indexed_dataset
from fairseq.tasks import translation

from fairseq_fixes.option_names import in_python_call
from fairseq_fixes.patching import CHECK, patch, wrap_once

from ..errors import UserError

logger = logging.getLogger(__name__)
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
            if not os.path.isdir(folder):
                where = f" (the directory {folder} does not exist)"
            else:
                have = sorted(n for n in os.listdir(folder) if n.startswith("dict.") and n.endswith(".txt"))
                where = f" ({folder} holds {', '.join(have) if have else 'no dict.*.txt'})"
            if os.path.basename(f) == "dict.txt":  # a monolingual task's (language models, RoBERTa)
                fix = (f"{'give data_name_or_path=' if in_python_call() else 'a data directory is'} the folder "
                       "fairseq-preprocess --only-source wrote (its --destdir), which holds dict.txt")
            else:
                fix = (f"give source_lang= and target_lang= the languages of its dictionaries, or data_name_or_path= "
                       f"{_PREPROCESS}" if in_python_call() else f"a data directory is {_PREPROCESS}")
            raise UserError(f"no dictionary {f}{where}: {fix}") from err

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


_MMAP_MAGIC = indexed_dataset.MMapIndexedDataset.Index._HDR_MAGIC
_MMAP_HEADER = len(_MMAP_MAGIC) + 8 + 1 + 8  # magic, version, dtype code, number of sentences
_AGAIN = "the copy or fairseq-preprocess that made it was cut short: binarize again, or copy it again"


def check_binarized(prefix):
    """Raise UserError when PREFIX.idx / PREFIX.bin (fairseq's mmap format) is cut short."""
    idx, bin_ = prefix + ".idx", prefix + ".bin"
    with open(idx, "rb") as f:
        head = f.read(_MMAP_HEADER)
    if not head.startswith(_MMAP_MAGIC[:8]):
        return  # another format (raw text, the legacy indexed formats)
    if len(head) < _MMAP_HEADER:
        raise UserError(f"{idx} holds {len(head)} bytes, not even the {_MMAP_HEADER}-byte header: {_AGAIN}")
    code, n = head[len(_MMAP_MAGIC) + 8], struct.unpack("<Q", head[-8:])[0]
    want = _MMAP_HEADER + 12 * n  # int32 sizes and int64 byte offsets of n sentences
    have = os.path.getsize(idx)
    if have < want:
        raise UserError(f"{idx} is cut short: its header promises {n:,} sentences ({want:,} bytes), "
                        f"the file has {have:,} bytes: {_AGAIN}")
    if n == 0:
        return
    if not os.path.exists(bin_):
        raise UserError(f"{bin_} is missing (its index {idx} is there): {_AGAIN}")
    with open(idx, "rb") as f:
        f.seek(_MMAP_HEADER + 4 * (n - 1))
        (last_size,) = struct.unpack("<i", f.read(4))
        f.seek(_MMAP_HEADER + 4 * n + 8 * (n - 1))
        (last_offset,) = struct.unpack("<q", f.read(8))
    itemsize = indexed_dataset._code_to_dtype[code]().itemsize
    want, have = last_offset + last_size * itemsize, os.path.getsize(bin_)
    if have < want:
        raise UserError(f"{bin_} is cut short: its index {idx} puts {n:,} sentences in {want:,} bytes, "
                        f"the file has {have:,} bytes: {_AGAIN}")


def _checked_binarized(load):
    @functools.wraps(load)
    def load_indexed_dataset(path, *args, **kwargs):
        k = 0
        while _is_local(path) and os.path.isfile(f"{path}{k or ''}.idx"):
            check_binarized(f"{path}{k or ''}")
            k += 1
        return load(path, *args, **kwargs)

    return load_indexed_dataset


@patch(CHECK, "a data folder, split or dictionary that a task reads and lacks, or a binarized split cut short, for "
       "every task: one line naming it where fairseq raised")
def patch_data_directories():
    """``infer_language_pair``, ``Dictionary.add_from_file``, ``load_langpair_dataset``,
    ``load_indexed_dataset``: a missing, empty or wrong data directory, dictionary or split,
    and a binarized split cut short, are one line."""
    wrap_once(data_utils, "infer_language_pair", _checked_data_dir)
    wrap_once(Dictionary, "add_from_file", _named_missing_dictionary)
    wrap_once(translation, "load_langpair_dataset", _named_missing_split)
    wrap_once(data_utils, "load_indexed_dataset", _checked_binarized)
