"""Clear errors for checkpoints that cannot be loaded.

fairseq's ``checkpoint_utils.load_checkpoint_to_cpu`` lets a truncated file
or a refused pickle surface as a traceback from deep inside torch's
unpickler. We wrap it (every caller in fairseq looks it up on the module,
so the wrapper is seen by fairseq-train, -generate and -interactive) and
raise a ``UserError`` (one line at the terminal, see ``user_errors``) with
the file name, the Python global that was refused, and what to do. Loading
itself is unchanged: ``torch.load`` still runs with torch's
``weights_only=True`` default, and we never repeat torch's advice to turn
that off.
"""
import functools
import pickle
import re
import zipfile

from fairseq import checkpoint_utils

from .patching import wrap_once
from .user_errors import UserError


class CheckpointLoadError(UserError):
    """A checkpoint file exists but cannot be loaded."""


def _refused_global(text):
    """The ``module.name`` torch's weights-only unpickler refused, from its message."""
    match = re.search(r"GLOBAL ([\w.]+)", text)
    return match.group(1) if match else None


def _explain(path, err):
    text = str(err)
    if "Weights only load failed" in text or "Unsupported global" in text:
        name = _refused_global(text) or "an object torch does not allow"
        return (
            f"refusing to load checkpoint {path}: it holds {name}, which fairseq checkpoints "
            "never contain (torch loads checkpoints with weights_only=True; fairseq_luong allows "
            "only argparse.Namespace and the numpy types fairseq stores besides tensors). "
            "Do not load it unless you made it yourself; then save its tensors and config again "
            "without that object"
        )
    first = text.splitlines()[0] if text else ""
    return (
        f"cannot load checkpoint {path}: {type(err).__name__}: {first}. "
        "The file is truncated or corrupt (was training killed while saving?). "
        "Use another checkpoint from the same directory (checkpointN.pt, checkpoint_best.pt)"
    )


def _explained_errors(load):
    @functools.wraps(load)
    def load_checkpoint_to_cpu(path, *args, **kwargs):
        try:
            return load(path, *args, **kwargs)
        except (pickle.UnpicklingError, EOFError, zipfile.BadZipFile, RuntimeError, OSError) as err:
            if isinstance(err, (UserError, FileNotFoundError, PermissionError)):
                raise
            raise CheckpointLoadError(_explain(path, err)) from err

    return load_checkpoint_to_cpu


wrap_once(checkpoint_utils, "load_checkpoint_to_cpu", _explained_errors)
