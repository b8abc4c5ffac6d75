"""Resuming into a --save-dir that holds another model says so in one line.

fairseq-train (0.12 and main) resuming from a checkpoint of another architecture, or of other
sizes, raised ``Exception: Cannot load model parameters ... please ensure that the architectures
match`` after a chained traceback. One line naming both architectures (or the shapes that
differ) and what to do.
"""
import functools

from fairseq import checkpoint_utils
from fairseq.trainer import Trainer

from .errors import UserError
from .patching import FIX, patch, wrap_once


def _saved_arch(path):
    try:
        cfg = checkpoint_utils.load_checkpoint_to_cpu(path).get("cfg")
        return cfg["model"]._name if hasattr(cfg["model"], "_name") else cfg["model"]["_name"]
    except Exception:  # the message then says less, nothing more
        return None


def _named_architectures(load_checkpoint):
    @functools.wraps(load_checkpoint)
    def wrapper(self, filename, *args, **kwargs):
        try:
            return load_checkpoint(self, filename, *args, **kwargs)
        except Exception as e:
            if isinstance(e, UserError) or not str(e).startswith("Cannot load model parameters from checkpoint"):
                raise
            saved, now = _saved_arch(filename), getattr(self.cfg.model, "_name", None) or "?"
            cause = [line.strip().rstrip(".") for line in str(e.__cause__ or e.__context__ or "").splitlines()
                     if "size mismatch" in line or "Missing key" in line or "Unexpected key" in line]
            if saved and saved != now:
                what = f"holds a {saved} model, and this command trains {now}"
                go_on = f"to go on with that model, train with --arch {saved}"
            else:
                what = (f"holds a {saved or 'model'} whose parameters differ from this command's"
                        + (f" ({cause[0]})" if cause else ""))
                go_on = "to go on with it, give the options it was trained with (sizes, attention, ...)"
            raise UserError(f"{filename} {what}: give another --save-dir (or --restore-file) to start this "
                            f"model, or {go_on}") from e

    return wrapper


@patch(FIX, "fairseq-train resumed from another model's checkpoint, for every model: both architectures in one "
       "line")
def patch_resume_architecture():
    """``Trainer.load_checkpoint``: another architecture named in one line."""
    wrap_once(Trainer, "load_checkpoint", _named_architectures)
