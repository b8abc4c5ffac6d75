"""The plugin's own changes to fairseq's behaviour: its checks and what acts on its own models,
applied in one place, after the fixes of fairseq (``fairseq_fixes``, a package of its own).

Each patch wraps a function fairseq looks up at call time (``fairseq_fixes.patching.wrap_once``);
each module's docstring says what fairseq does, where, and what we do instead.
``fairseq_luong/__init__.py`` calls :func:`apply_all` once, when fairseq imports the plugin
(``--user-dir``), after ``fairseq_fixes.apply()``.

Each function below is marked with its kind (``fairseq_fixes.patching.patch``): a **check**
(refuses an option or an input in one line, only where fairseq would ignore it or fail on it) or
**ours** (the plugin's own models only), and with what it acts on. ``python -m
fairseq_luong.fairseq_patches`` prints every patch the plugin brings, the fixes included, with the
names each wraps or replaces (``docs/fairseq_patches.md`` holds the list).

**Order matters** where two patches wrap the same function: the one applied later wraps the
earlier one, so it runs first (outside); these run outside the fixes. Applying twice changes
nothing.

One patch is not applied here: ``no_user_dir_hint.py`` is for a run WITHOUT the plugin
(``--user-dir`` forgotten), so ``scripts/setup.sh`` makes Python run it at start-up.
"""
from fairseq_fixes.patching import by_kind  # noqa: F401 (python -m fairseq_luong.fairseq_patches)

from . import (
    checkpoint_identity,
    data_directories,
    hub_checks,
    language_model,
    model_overrides,
    option_checks,
    our_hub_interface,
    restore_file,
    segmentation,
    soft_alignment,
)


def apply_all():
    """Apply every check and patch of our own, in this order."""
    # ---- command-line errors: one line, not a traceback
    option_checks.patch_option_checks()  # parse_args_and_arch: values refused before any work
    # a missing/empty data directory, dictionary, split; a binarized split cut short
    data_directories.patch_data_directories()
    # fairseq_cli.interactive.main: --print-alignment soft is refused, before any model is loaded
    soft_alignment.patch_interactive_soft_alignment()
    restore_file.patch_restore_file()  # fairseq_cli.train.main: a --restore-file that is not there

    # ---- checkpoints
    # load_checkpoint_to_cpu and load_model_ensemble_and_task (1 of 2 each, outside the fixes'
    # load errors): --model-overrides checked on what the loader returned (keys) and on the
    # load_state_dict error it raised (sizes)
    model_overrides.patch_model_overrides()
    # the same two (2 of 2 each, outermost): the checkpoint's languages and dictionaries
    # checked against the run's task, or the one tasks.setup_task makes from the checkpoint,
    # before the model is built; Trainer.save_checkpoint records them; Trainer.load_checkpoint
    # (outside the fixes' resume) checks them on resume
    checkpoint_identity.patch_checkpoint_identity()

    # ---- generation (fairseq-generate, fairseq-interactive)
    language_model.patch_language_model()  # SequenceGenerator.__init__: --lm-path a language model
    segmentation.patch_bpe_fit()  # FairseqTask.build_bpe: a SentencePiece model that made neither dictionary

    # ---- the Python interface (from_pretrained)
    # hub_utils.from_pretrained: folders, files, subword model and options checked; the checks of
    # loading above (checkpoints, overrides, identity) in from_pretrained's keywords
    hub_checks.patch_hub_loading()
    our_hub_interface.patch_from_pretrained()  # BaseFairseqModel.from_pretrained: our models get their interface
