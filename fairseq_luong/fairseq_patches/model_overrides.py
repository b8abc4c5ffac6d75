"""``--model-overrides`` that cannot apply are refused instead of ignored or crashing later.

fairseq's ``overwrite_args_by_name`` sets an override only where the
checkpoint's config already has that key: ``{'arch': 'luong_localp'}`` (our
configs name the architecture ``_name``, not ``arch``) or a misspelt
``{'droput': 0.3}`` are dropped without a word and the old model runs. An
override that changes a size or the structure (``encoder_hidden_size``,
``attention_type``) builds a model the weights do not fit, and fairseq stops
with a ``load_state_dict`` traceback. We check both after fairseq applied the
overrides: a key that is nowhere in the config, and weights that do not fit
the model the overrides built, become one-line errors naming the override (the nearest
setting to a misspelt one).

``from_pretrained``'s keyword arguments reach fairseq as these overrides (with the data
folder and the subword model): there the message names the keyword (``from_pretrained:
no option 'droput' (did you mean dropout?)``), and weights that do not fit are blamed on
the keywords that set a model setting, never on ``data`` or ``bpe`` (a data folder with a
dictionary of another size is refused before, by ``checkpoint_identity.py``).
"""
import argparse
import contextvars
import difflib
import functools

from fairseq import checkpoint_utils
from omegaconf import DictConfig

from fairseq_fixes.option_names import in_python_call
from fairseq_fixes.patching import CHECK, patch, wrap_once

from ..errors import UserError

_MODEL_SETTINGS = {}  # checkpoint path -> the names of its model's settings, as _check_keys last read them
# inside _check_keys: {"all", "model"} the names of the checkpoint's settings before fairseq applied the overrides
# (its overwrite_args_by_name sets every override on a config held as a Namespace, legacy models' cfg.model)
_BEFORE = contextvars.ContextVar("fairseq_luong_settings_before_overrides", default=None)
FROM_PRETRAINED = ("model_name_or_path", "checkpoint_file", "data_name_or_path", "archive_map")
# keywords fairseq's own model classes pass to hub_utils.from_pretrained for their hub code (RoBERTa,
# XLM-R, CamemBERT, GottBERT, X-MOD and BART: load_checkpoint_heads; BART: sample_break_mode; the
# speech and TTS models: config_yaml, vocoder, is_vocoder, task, generation_args): not the user's
# settings, whether or not the checkpoint has one of that name
FAIRSEQ_HUB_KEYWORDS = ("load_checkpoint_heads", "sample_break_mode", "config_yaml", "vocoder", "is_vocoder",
                        "task", "generation_args")


def _settings(cfg, namespaces=True):
    """The names of every setting in a (nested) checkpoint config (but those of a group held as
    a Namespace, unless ``namespaces``)."""
    if isinstance(cfg, argparse.Namespace):
        return set(vars(cfg)) if namespaces else set()
    if not isinstance(cfg, DictConfig):
        return set()
    names = set()
    for name in cfg.keys():
        names.add(name)
        try:
            names |= _settings(cfg[name], namespaces)
        except Exception:  # a mandatory '???' or broken interpolation: not a group
            continue
    return names


def _nearest(key, names):
    near = difflib.get_close_matches(key, sorted(names), n=1)
    return f" (did you mean {near[0]}?)" if near else ""


def _model(cfg):
    return cfg.get("model") if isinstance(cfg, DictConfig) else cfg


def _model_settings(cfg):
    """The names of the model's own settings: not the names of groups, nor settings another
    group has too (a legacy model's Namespace holds every option of its training: data, bpe)."""
    if not isinstance(cfg, DictConfig):
        return _settings(cfg)
    others = set(cfg.keys())
    for name in cfg.keys():
        if name != "model":
            try:
                others |= _settings(cfg[name])
            except Exception:  # a mandatory '???' or broken interpolation
                continue
    return _settings(_model(cfg)) - others


def check_overrides_apply(path, state, overrides, before=None):
    """Raise UserError for an override that names no setting of checkpoint PATH (whose
    settings were ``before``, {"all", "model"}, when fairseq applied the overrides), or that
    would change its architecture."""
    cfg = state.get("cfg") if state.get("args") is None else state["args"]
    if cfg is None:
        return
    model = _model(cfg)
    arch = getattr(model, "_name", None) or getattr(model, "arch", None)
    before = before or {"all": _settings(cfg), "model": _model_settings(cfg)}
    _MODEL_SETTINGS[str(path)] = before["model"]
    python = in_python_call()
    # and those an override made: bpe='sentencepiece' brings sentencepiece_model
    settings = before["all"] | _settings(cfg, namespaces=False)
    for key in overrides:
        if key == "arch" and overrides[key] != arch:
            value = overrides[key]
            given = f"{python}(arch={value!r})" if python else f"--model-overrides {{'arch': {value!r}}}"
            raise UserError(f"{given}: the architecture of a trained model cannot change (checkpoint {path} holds "
                            f"{arch} weights); train a new model instead")
        if key not in settings:
            if python and key in FAIRSEQ_HUB_KEYWORDS:
                continue
            if python:
                raise UserError(f"{python}: no option {key!r}{_nearest(key, settings | set(FROM_PRETRAINED))}: "
                                f"checkpoint {path} ({arch}) has no setting of that name, so fairseq would ignore it")
            raise UserError(
                f"--model-overrides {{{key!r}: ...}}: checkpoint {path} ({arch}) has no setting "
                f"{key!r}{_nearest(key, settings)}, so fairseq would ignore it; check the spelling against the "
                "options of fairseq-train for this --arch"
            )


def _noting_settings(overwrite):
    @functools.wraps(overwrite)
    def overwrite_args_by_name(cfg, overrides):
        before = _BEFORE.get()
        if before is not None and not before:
            before.update({"all": _settings(cfg), "model": _model_settings(cfg)})
        return overwrite(cfg, overrides)

    return overwrite_args_by_name


def _check_keys(load):
    @functools.wraps(load)
    def load_checkpoint_to_cpu(path, arg_overrides=None, *args, **kwargs):
        token = _BEFORE.set({})
        try:
            state = load(path, arg_overrides, *args, **kwargs)
            before = _BEFORE.get()
        finally:
            _BEFORE.reset(token)
        if arg_overrides:
            check_overrides_apply(path, state, arg_overrides, before or None)
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
            settings = set().union(*(_MODEL_SETTINGS.get(str(f), set()) for f in filenames))
            structural = {k: v for k, v in (arg_overrides or {}).items() if k in settings}
            python = in_python_call()
            if not structural:
                raise UserError(f"checkpoint {paths}: the weights do not fit the model its config describes "
                                f"({_state_dict_mismatch(err)}): the file is not what fairseq-train saved") from err
            given = (f"{python}({', '.join(f'{k}={v!r}' for k, v in structural.items())})" if python
                     else f"--model-overrides {structural}")
            how = f"{python}'s keywords" if python else "--model-overrides"
            raise UserError(
                f"checkpoint {paths}: the weights do not fit the model built with {given} "
                f"({_state_dict_mismatch(err)}); {how} can change how a trained model runs (dropout, "
                "max_source_positions, ...), not its sizes or structure"
            ) from err

    return load_model_ensemble_and_task


@patch(CHECK, "--model-overrides and from_pretrained keywords that name no setting of the checkpoint (fairseq "
       "ignores them) or change a size (fairseq fails); fairseq's own hub keywords pass")
def patch_model_overrides():
    """``load_checkpoint_to_cpu``: refuse an override key the checkpoint's config does not
    have (as ``overwrite_args_by_name`` found it, before it applied them);
    ``load_model_ensemble_and_task``: weights that do not fit the overridden model are one line
    naming the override."""
    wrap_once(checkpoint_utils, "load_checkpoint_to_cpu", _check_keys)
    wrap_once(checkpoint_utils, "overwrite_args_by_name", _noting_settings)
    wrap_once(checkpoint_utils, "load_model_ensemble_and_task", _check_fit)
