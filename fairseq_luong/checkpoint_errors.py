"""Clear errors for checkpoints that cannot be loaded.

fairseq's ``checkpoint_utils.load_checkpoint_to_cpu`` lets a truncated file
or a refused pickle surface as a traceback from deep inside torch's
unpickler. We wrap it (every caller in fairseq looks it up on the module,
so the wrapper is seen by fairseq-train, -generate and -interactive) and
re-raise with the file name and what to do. Loading itself is unchanged:
``torch.load`` still runs with torch's ``weights_only=True`` default.
"""
import functools
import pickle
import zipfile

from fairseq import checkpoint_utils


class CheckpointLoadError(RuntimeError):
    """A checkpoint file exists but cannot be loaded."""


def _explain(path, err):
    text = str(err)
    if "Weights only load failed" in text or "Unsupported global" in text:
        detail = next(
            (line.strip() for line in text.splitlines() if "Unsupported global" in line),
            text.splitlines()[0] if text else repr(err),
        )
        return (
            f"refusing to load checkpoint {path}: it holds a Python object that "
            f"fairseq checkpoints never contain ({detail}). torch loads "
            "checkpoints with weights_only=True and fairseq_luong allowlists only "
            "argparse.Namespace and the numpy types fairseq stores; if you trust "
            "this file, convert it yourself rather than disabling the check."
        )
    return (
        f"cannot load checkpoint {path}: {type(err).__name__}: {text.splitlines()[0] if text else ''}. "
        "The file is truncated or corrupt (was training killed while saving?). "
        "Use another checkpoint from the same directory (checkpointN.pt, checkpoint_best.pt)."
    )


def _wrap(load):
    @functools.wraps(load)
    def load_checkpoint_to_cpu(path, *args, **kwargs):
        try:
            return load(path, *args, **kwargs)
        except (pickle.UnpicklingError, EOFError, zipfile.BadZipFile, RuntimeError, OSError) as err:
            if isinstance(err, (CheckpointLoadError, FileNotFoundError, PermissionError)):
                raise
            raise CheckpointLoadError(_explain(path, err)) from err

    load_checkpoint_to_cpu.__fairseq_luong_wrapped__ = True
    return load_checkpoint_to_cpu


if not getattr(checkpoint_utils.load_checkpoint_to_cpu, "__fairseq_luong_wrapped__", False):
    checkpoint_utils.load_checkpoint_to_cpu = _wrap(checkpoint_utils.load_checkpoint_to_cpu)
