"""Every change fairseq_luong makes to fairseq's own behaviour, applied in one place.

Each patch wraps a function fairseq looks up at call time (``patching.wrap_once``); each
module's docstring says what fairseq does wrong, where, and what we do instead, and
``docs/fairseq_patches.md`` lists them one line each. ``fairseq_luong/__init__.py`` calls
:func:`apply_all` once, when fairseq imports the plugin (``--user-dir``).

**Order matters** where two patches wrap the same function: the one applied later wraps
the earlier one, so it runs first (outside) and the earlier one runs inside it. Those
targets are marked "(1 of 2)" / "(2 of 2)" below. Applying twice changes nothing.

Each function below is marked with its kind (``patching.patch``): a **fix** of fairseq (every
fairseq model; fairseq's own results unchanged wherever fairseq worked), a **check** (refuses an
option or an input only where fairseq would ignore it or fail on it), or **ours** (the plugin's
own models only), and with what it acts on. :func:`by_kind` lists them;
``python -m fairseq_luong.fairseq_patches`` prints the list (``docs/fairseq_patches.md`` holds it).

One patch is not applied here: ``no_user_dir_hint.py`` is for a run WITHOUT the plugin
(``--user-dir`` forgotten), so ``scripts/setup.sh`` makes Python run it at start-up.
"""
from . import (
    archives,
    batching,
    checkpoint_identity,
    checkpoints,
    distributed,
    errors,
    generation_options,
    grad_norm,
    hub,
    input_errors,
    interactive_long_lines,
    length_limit,
    long_runs,
    microbatch_seeds,
    model_overrides,
    option_checks,
    patience_resume,
    plateau_resume,
    precision,
    segmentation,
    unk_replacement,
)
from .patching import KINDS, PATCHES


def by_kind():
    """{kind: [Patch, ...]} for fix, check and ours, each sorted by module.function."""
    return {kind: sorted((p for p in PATCHES.values() if p.kind == kind), key=lambda p: p.name) for kind in KINDS}


def apply_all():
    """Apply every patch, in this order."""
    # ---- command-line errors: one line, not a traceback
    errors.patch_excepthook()  # sys.excepthook prints a UserError as "PROG: error: ..."
    option_checks.patch_option_checks()  # parse_args_and_arch: values refused before any work
    # a missing/empty data directory, dictionary, split; a binarized split cut short
    input_errors.patch_data_directories()
    input_errors.patch_interactive_input()  # interactive.buffered_read: UTF-8 whatever the locale
    # fairseq_cli.interactive.main (1 of 2): --print-alignment soft is refused; runs inside
    # the precision marking (2 of 2, below), before any model is loaded
    input_errors.patch_interactive_soft_alignment()

    # ---- checkpoints
    checkpoints.allow_checkpoint_globals()  # torch's weights-only unpickler takes fairseq's
    checkpoints.patch_safe_loading()  # torch.load in load_checkpoint_to_cpu: weights_only=True, always
    # load_checkpoint_to_cpu and load_model_ensemble_and_task (1 of 3 each): load errors
    # become one line; innermost, next to fairseq
    checkpoints.patch_load_errors()
    # the same two (2 of 3 each): --model-overrides checked on what the loader returned
    # (keys) and on the load_state_dict error it raised (sizes)
    model_overrides.patch_model_overrides()
    # the same two (3 of 3 each, outermost): the checkpoint's languages and dictionaries
    # checked against the run's task, or the one tasks.setup_task makes from the checkpoint,
    # before the model is built; Trainer.save_checkpoint (1 of 2) records them;
    # Trainer.load_checkpoint (1 of 4) checks them on resume
    checkpoint_identity.patch_checkpoint_identity()

    # ---- data loading
    batching.patch_final_batch()  # data_utils.batch_by_size keeps the final partial batch
    batching.patch_numpy_2()  # --num-batch-buckets with numpy 2
    batching.patch_resume_batches()  # FairseqTask.get_batch_iterator: a resumed run's batches are epoch 1's

    # ---- training
    # Trainer.train_step (1 of 2); FairseqTask.train_step (1 of 2): reseed each micro-batch
    # after the first, inside the --amp autocast of 2 of 2
    microbatch_seeds.patch_microbatch_seeds()
    # distributed_utils.call_main (1 of 2): --bf16/--fp16/--amp made runnable, after torchrun's
    # settings (2 of 2); FairseqTask.train_step (2 of 2): --amp autocasts on the CPU;
    # AMPOptimizer.__init__; Trainer.train_step (2 of 2): .cuda() stays on the CPU there (the
    # fp16 overflow handler), around the micro-batch planning (1 of 2)
    precision.patch_training_precision()
    # utils.clip_grad_norm_: the norm summed where the gradients are (--cpu on a GPU machine)
    grad_norm.patch_grad_norm_device()
    # call_main (2 of 2): world size, rank and backend from torchrun's environment;
    # DistributedDataParallel without device ids on the CPU
    distributed.patch_torchrun()
    # fairseq_cli.train.main: --save-dir locked and not a file, divergence in one line;
    # torch_persistent_save and checkpoint copies: whole files or none; Trainer.load_checkpoint
    # (2 of 4): another architecture in one line, around the identity check (1 of 4)
    long_runs.patch_long_runs()
    # Trainer.load_checkpoint (3 of 4): a resume between epochs takes the plateau step fairseq
    # skipped; ReduceLROnPlateauLRSchedule.state_dict/load_state_dict: its counters saved
    plateau_resume.patch_plateau_resume()
    # Trainer.save_checkpoint (2 of 2) saves --patience's best and count, Trainer.load_checkpoint
    # (4 of 4, outermost) sets them back on resume (a new training: none)
    patience_resume.patch_patience_resume()

    # ---- generation (fairseq-generate, fairseq-interactive)
    # prepare_for_inference_ (1 of 2): bfloat16 for --bf16, inside --replace-unk's (2 of 2);
    # inference_step: autocast for --amp; generate._main and interactive.main (2 of 2): mark the run
    precision.patch_generation_precision()
    # interactive.make_batches (1 of 2): over-long lines cut, with a warning, before
    # --replace-unk (2 of 2) remembers the batch's source words
    interactive_long_lines.patch_interactive_long_lines()
    # SequenceGenerator._generate: --min-len above the batch's length limit in one line; a
    # warning for translations cut at the limit
    length_limit.patch_length_limit()
    generation_options.patch_ngram_blocking()  # NGramRepeatBlock._no_repeat_ngram: the generated prefix
    generation_options.patch_diverse_beam_search()  # DiverseBeamSearch.step: overlap follows the batch
    generation_options.patch_match_source_len()  # LengthConstrainedBeamSearch.step: each source's length
    generation_options.patch_sampling_topk()  # Sampling.__init__: --sampling-topk within the vocabulary
    generation_options.patch_language_model()  # SequenceGenerator.__init__: --lm-path a language model
    segmentation.patch_bpe_fit()  # FairseqTask.build_bpe: a SentencePiece model that made neither dictionary
    # load_align_dict, post_process_prediction, prepare_for_inference_ (2 of 2),
    # build_generator, interactive.make_batches (2 of 2): --replace-unk works
    unk_replacement.patch_unk_replacement()

    # ---- the Python interface (from_pretrained)
    # hub_utils.from_pretrained: folders, files, subword model and options checked; the checks of
    # loading above (checkpoints, overrides, identity) in from_pretrained's keywords
    hub.patch_hub_loading()
    hub.patch_from_pretrained()  # BaseFairseqModel.from_pretrained: our models get their interface
    # file_utils.load_archive_file: a local archive unpacked into a folder of its own, its members
    # checked first, the archive left as it was; a URL without requests in one line
    archives.patch_archives()
