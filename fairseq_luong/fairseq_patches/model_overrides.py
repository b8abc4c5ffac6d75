"""``--model-overrides`` that cannot apply are refused instead of ignored or crashing later.

fairseq's ``overwrite_args_by_name`` sets an override only where the
checkpoint's config already has that key: ``{'arch': 'luong_localp'}`` (our
configs name the architecture ``_name``, not ``arch``) or a misspelt
``{'droput': 0.3}`` are dropped without a word and the old model runs. An
override that changes a size or the structure (``encoder_hidden_size``,
``attention_type``) builds a model the weights do not fit, and fairseq stops
with a ``load_state_dict`` traceback. We check both after fairseq applied the
overrides: a key that is nowhere in the config, and weights that do not fit
the model the overrides built, become one-line errors naming the override.
"""
import argparse
import functools

from fairseq import checkpoint_utils
from omegaconf import DictConfig

from ..errors import UserError
from .patching import wrap_once


def _has_setting(cfg, key):
    """Whether ``key`` exists anywhere in a (nested) checkpoint config."""
    if isinstance(cfg, argparse.Namespace):  # older checkpoints, and legacy models' cfg.model
        return hasattr(cfg, key)
    if not isinstance(cfg, DictConfig):
        return False
    if key in cfg:
        return True
    for name in cfg.keys():
        try:
            if _has_setting(cfg[name], key):
                return True
        except Exception:  # a mandatory '???' or broken interpolation: not a group
            continue
    return False


def check_overrides_apply(path, state, overrides):
    cfg = state.get("cfg") if state.get("args") is None else state["args"]
    if cfg is None:
        return
    model = cfg.get("model") if isinstance(cfg, DictConfig) else cfg
    arch = getattr(model, "_name", None) or getattr(model, "arch", None)
    for key in overrides:
        if key == "arch" and not _has_setting(cfg, key):
            raise UserError(
                f"--model-overrides {{'arch': {overrides[key]!r}}}: the architecture of a trained model "
                f"cannot change (checkpoint {path} holds {arch} weights); train a new model instead"
            )
        if not _has_setting(cfg, key):
            raise UserError(
                f"--model-overrides {{{key!r}: ...}}: checkpoint {path} ({arch}) has no setting "
                f"{key!r}, so fairseq would ignore it; check the spelling against the options "
                "of fairseq-train for this --arch"
            )


def _check_keys(load):
    @functools.wraps(load)
    def load_checkpoint_to_cpu(path, arg_overrides=None, *args, **kwargs):
        state = load(path, arg_overrides, *args, **kwargs)
        if arg_overrides:
            check_overrides_apply(path, state, arg_overrides)
        return state

    return load_checkpoint_to_cpu


def _state_dict_mismatch(err):
    lines = [line.strip() for line in str(err).splitlines()[1:] if line.strip()]
    detail = lines[0] if lines else str(err)
    return detail if len(detail) <= 240 else detail[:240] + " ..."


def _check_fit(load_ensemble):
    @functools.wraps(load_ensemble)
    def load_model_ensemble_and_task(filenames, arg_overrides=None, *args, **kwargs):
        try:
            return load_ensemble(filenames, arg_overrides, *args, **kwargs)
        except RuntimeError as err:
            if "Error(s) in loading state_dict" not in str(err):
                raise
            paths = ", ".join(map(str, filenames))
            cause = (f"the model built with --model-overrides {arg_overrides}" if arg_overrides
                     else "the model its config describes")
            raise UserError(
                f"checkpoint {paths}: the weights do not fit {cause} ({_state_dict_mismatch(err)}); "
                "--model-overrides can change how a trained model runs (dropout, "
                "max_source_positions, ...), not its sizes or structure"
            ) from err

    return load_model_ensemble_and_task


def patch_model_overrides():
    """``load_checkpoint_to_cpu``: refuse an override key the checkpoint's config does not
    have; ``load_model_ensemble_and_task``: weights that do not fit the overridden model are
    one line naming the override."""
    wrap_once(checkpoint_utils, "load_checkpoint_to_cpu", _check_keys)
    wrap_once(checkpoint_utils, "load_model_ensemble_and_task", _check_fit)
