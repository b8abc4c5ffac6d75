"""fairseq_fixes: fairseq 0.12 made to work on today's torch, numpy, Python and CPUs, and its
own bugs fixed, for every fairseq model; fairseq's results unchanged wherever fairseq worked.

Use it with fairseq's own commands or from Python, with or without a plugin::

    fairseq-train DATA --user-dir path/to/fairseq_fixes ...   # or: import fairseq_fixes

Importing the package applies every fix once fairseq is imported (at once, if it is already):
``--user-dir`` imports it after fairseq, a Python program may import it before. Importing it
alone imports neither fairseq nor torch. ``python -m fairseq_fixes`` lists the fixes, each with
what it acts on and the names of fairseq, torch and numpy it wraps or replaces.

Each fix is one module, a candidate pull request to fairseq: its docstring says what fairseq
does instead, for which versions, and what we do. Each wraps functions fairseq looks up at call
time (``patching.wrap_once``) or, where a wrapper cannot do, replaces a name
(``patching.replace``); fairseq's files stay as they are. :func:`apply` applies them in one
ordered list.

**Order matters** where two fixes wrap the same function: the one applied later wraps the
earlier one, so it runs first (outside). Those targets are marked "(1 of 2)" / "(2 of 2)" below.
Applying twice changes nothing.
"""
from .importing import after_fairseq

_APPLIED = {"done": False}


def apply():
    """Apply every fix, in this order (once)."""
    if _APPLIED["done"]:
        return
    _APPLIED["done"] = True
    from . import (
        archives,
        batching,
        checkpoint_loading,
        clean_exit,
        divergence,
        excepthook,
        generate_shards,
        generation_options,
        grad_norm,
        interactive_input,
        interactive_long_lines,
        length_limit,
        microbatch_seeds,
        precision,
        resume_architecture,
        resume_state,
        save_dir,
        torchrun,
        unk_replacement,
        whole_checkpoints,
    )

    # ---- errors: one line, not a traceback
    excepthook.patch_excepthook()  # sys.excepthook prints a UserError as "PROG: error: ..."; closed pipes
    interactive_input.patch_interactive_input()  # interactive.buffered_read: UTF-8 whatever the locale

    # ---- checkpoints
    checkpoint_loading.allow_checkpoint_globals()  # torch's weights-only unpickler takes fairseq's
    checkpoint_loading.patch_safe_loading()  # torch.load in load_checkpoint_to_cpu: weights_only=True, always
    # load_checkpoint_to_cpu and load_model_ensemble_and_task: load errors become one line
    checkpoint_loading.patch_load_errors()

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
    torchrun.patch_torchrun()
    # fairseq_cli.train.main (1 of 2): one training a --save-dir, and not a file
    save_dir.patch_save_dir()
    # torch_persistent_save and checkpoint_utils' copies: whole files or none
    whole_checkpoints.patch_whole_checkpoints()
    divergence.patch_divergence()  # fairseq_cli.train.main (2 of 2): divergence in one line
    clean_exit.patch_clean_exit()  # fairseq's background batch consumers stop before Python finalizes
    # Trainer.load_checkpoint (1 of 2): another architecture in one line
    resume_architecture.patch_resume_architecture()
    # Trainer.load_checkpoint (2 of 2): a resume between epochs takes the plateau step fairseq
    # skipped, and --patience's best and count come back; Trainer.save_checkpoint saves them;
    # ReduceLROnPlateauLRSchedule.state_dict/load_state_dict: its counters saved
    resume_state.patch_resume_state()

    # ---- generation (fairseq-generate, fairseq-interactive)
    # prepare_for_inference_ (1 of 2): bfloat16 for --bf16, inside --replace-unk's (2 of 2);
    # inference_step: autocast for --amp; generate._main (1 of 2) and interactive.main: mark the run
    precision.patch_generation_precision()
    # generate._main (2 of 2): --num-shards and --shard-id shard the subset, before the run is marked
    generate_shards.patch_generate_shards()
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
    # load_align_dict, post_process_prediction, prepare_for_inference_ (2 of 2),
    # build_generator, interactive.make_batches (2 of 2): --replace-unk works
    unk_replacement.patch_unk_replacement()

    # ---- the Python interface (from_pretrained)
    # file_utils.load_archive_file: a local archive unpacked into a folder of its own, its members
    # checked first, the archive left as it was; a URL without requests in one line
    archives.patch_archives()


after_fairseq(apply)
