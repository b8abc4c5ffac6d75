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

Applied when the plugin is imported by fairseq-interactive (fairseq imports
``--user-dir`` while parsing options, before ``main`` reads any input).
"""
import functools
import logging

import torch

from .patching import fairseq_cli_modules, wrap_once

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


def _cutting_long_lines(make_batches):
    seen = {"cfg": None, "lines": 0}  # lines read so far in this run (one run, one cfg object)

    @functools.wraps(make_batches)
    def wrapper(lines, cfg, task, max_positions, encode_fn):
        if seen["cfg"] is not cfg:  # a new run in this process (fairseq-interactive's main again)
            seen.update(cfg=cfg, lines=0)
        first_line = seen["lines"] + 1
        seen["lines"] += len(lines)
        limit = max_positions[0] if isinstance(max_positions, (tuple, list)) else max_positions
        if limit is None:
            yield from make_batches(lines, cfg, task, max_positions, encode_fn)
            return
        read = task.get_interactive_tokens_and_lengths
        task.get_interactive_tokens_and_lengths = lambda lines_, encode_fn_: truncate_long_lines(
            *read(lines_, encode_fn_), limit, first_line)
        try:
            yield from make_batches(lines, cfg, task, max_positions, encode_fn)
        finally:
            del task.get_interactive_tokens_and_lengths  # the instance attribute set above

    return wrapper


def patch_interactive_long_lines():
    """fairseq-interactive's ``make_batches``: cut an over-long line, with a warning."""
    for module in fairseq_cli_modules("interactive"):
        wrap_once(module, "make_batches", _cutting_long_lines)
