"""``fairseq-interactive`` translates a line longer than the model accepts, cut, with a notice.

fairseq-interactive checks each buffer of input lines against the model's
source positions and stops the whole session at the first line that is too
long (``Size of sample #1 is invalid``): every later line is lost. With
``--skip-invalid-size-inputs-valid-test`` it drops the line instead, so the
output has one translation less and anything that pairs outputs with input
lines by position goes out of step. We keep every line: a line of more than
P - 1 tokens (P = the model's source positions, EOS takes one) is
translated from its first P - 1 tokens, and a warning names its line
number (1-based; its translation is ``H-<line - 1>``).

A line longer than ``--max-tokens`` (after that cut) ended the session too: fairseq's
``batch_by_size`` asserts that every sentence fits the token budget ("sentence at index 0 of
size 1601 exceeds max_tokens limit of 500!"), and the lines still in the buffer and every
line after it were lost. Such a line is now translated in a batch of its own, with a warning
naming it; the other lines of its buffer are batched under ``--max-tokens`` as before. So
with any ``--max-tokens`` and ``--buffer-size`` every input line gets exactly one ``H-`` line.

Applied when fairseq-interactive imports the package (fairseq imports ``--user-dir`` while
parsing options, before ``main`` reads any input), for every model.
"""
import functools
import logging
from collections.abc import Mapping

import numpy as np
import torch

from .patching import FIX, fairseq_cli_modules, patch, wrap_once

logger = logging.getLogger(__name__)


def truncate_long_lines(tokens, lengths, limit, first_line):
    """Cut each token tensor (ending in EOS) to ``limit`` tokens, keeping EOS; warn per line."""
    for i, t in enumerate(tokens):
        if len(t) > limit:
            logger.warning(
                "input line %d has %d tokens (+ EOS), more than the model's %d source positions: "
                "translating its first %d tokens only (H-%d); split the line to translate all of it",
                first_line + i, len(t) - 1, limit, limit - 1, first_line + i - 1)
            tokens[i] = torch.cat([t[: limit - 1], t[-1:]])
            lengths[i] = limit
    return tokens, lengths


def batches_of_their_own(batch_by_size, num_tokens, first_line):
    """``dataset.batch_by_size`` with each sentence of more than ``max_tokens`` tokens in a batch
    of its own (fairseq asserts instead); ``num_tokens(index)`` is a sentence's size, index i
    is input line ``first_line + i``."""
    @functools.wraps(batch_by_size)
    def wrapper(indices, max_tokens=None, max_sentences=None, required_batch_size_multiple=1):
        too_long = [] if max_tokens is None else [i for i in indices if num_tokens(i) > max_tokens]
        if not too_long:
            return batch_by_size(indices, max_tokens, max_sentences, required_batch_size_multiple)
        for i in too_long:
            logger.warning("input line %d has %d tokens (+ EOS), more than --max-tokens %d: translating it in a "
                           "batch of its own (H-%d)", first_line + i, num_tokens(i) - 1, max_tokens,
                           first_line + i - 1)
        long = set(too_long)
        rest = np.array([i for i in indices if i not in long], dtype=np.int64)
        batches = [] if not len(rest) else list(
            batch_by_size(rest, max_tokens, max_sentences, required_batch_size_multiple))
        return batches + [np.array([i], dtype=np.int64) for i in too_long]

    return wrapper


def source_limit(max_positions, cfg):
    """The model's source positions from what fairseq-interactive resolved: a number, a (source,
    target) pair, or, for fairseq's multilingual tasks, {"SRC-TGT": (source, target)} a language
    pair, of which the run's direction counts (None, nothing cut, where it has no entry)."""
    if isinstance(max_positions, Mapping):
        task = getattr(cfg, "task", None)
        max_positions = max_positions.get(f"{getattr(task, 'source_lang', None)}-{getattr(task, 'target_lang', None)}")
    return max_positions[0] if isinstance(max_positions, (tuple, list)) else max_positions


def _cutting_long_lines(make_batches):
    seen = {"cfg": None, "lines": 0}  # lines read so far in this run (one run, one cfg object)

    @functools.wraps(make_batches)
    def wrapper(lines, cfg, task, max_positions, encode_fn):
        if seen["cfg"] is not cfg:  # a new run in this process (fairseq-interactive's main again)
            seen.update(cfg=cfg, lines=0)
        first_line = seen["lines"] + 1
        seen["lines"] += len(lines)
        limit = source_limit(max_positions, cfg)
        if limit is not None:
            read = task.get_interactive_tokens_and_lengths
            task.get_interactive_tokens_and_lengths = lambda lines_, encode_fn_: truncate_long_lines(
                *read(lines_, encode_fn_), limit, first_line)
        build = task.build_dataset_for_inference

        def building(*args, **kwargs):
            dataset = build(*args, **kwargs)
            dataset.batch_by_size = batches_of_their_own(dataset.batch_by_size, dataset.num_tokens, first_line)
            return dataset

        task.build_dataset_for_inference = building
        try:
            yield from make_batches(lines, cfg, task, max_positions, encode_fn)
        finally:  # the instance attributes set above
            del task.build_dataset_for_inference
            if limit is not None:
                del task.get_interactive_tokens_and_lengths

    return wrapper


@patch(FIX, "fairseq-interactive's lines over the model's positions or --max-tokens, for every model: cut or "
       "batched alone, with a warning")
def patch_interactive_long_lines():
    """fairseq-interactive's ``make_batches``: cut an over-long line, with a warning."""
    for module in fairseq_cli_modules("interactive"):
        wrap_once(module, "make_batches", _cutting_long_lines)
