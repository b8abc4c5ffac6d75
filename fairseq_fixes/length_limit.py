"""Say when a translation stops at fairseq's length limit instead of cutting it silently.

fairseq's ``SequenceGenerator`` forces EOS at step
``max_len = min(--max-len-a x S + --max-len-b, model positions - 1)``, S the
batch's longest source (with EOS). The defaults are a = 0, b = 200: every
translation stops at 200 tokens, whatever the source length, and nothing
says so. After each batch we count the best hypotheses that reached
``max_len`` tokens and log a warning with their sample ids (the ``H-`` ids
of fairseq-generate) and the flags that raise the limit.

A ``--min-len`` above a batch's limit stopped fairseq with ``AssertionError: min_len
cannot be larger than max_len``; where the limit grows with the source (``--max-len-a``)
or is the model's, only the batch tells. Such a batch is now one line naming the flags
(a plugin's option check can refuse the case the command line shows, before any work:
fairseq_luong's ``option_checks.py`` does).

Both act on ``generate``, what fairseq's tasks, its hub interface and a plugin's translation interface
call: of ``SequenceGenerator`` and of ``SequenceGeneratorWithAlignment`` (``--print-alignment``),
which overrides it (``unk_replacement.py``'s generator calls the base's). Not on ``_generate``:
TorchScript compiles that one from its source when a generator is scripted (``forward`` calls
it), and a wrapper there broke every scripted generator (fairseq's own
``test_sequence_generator.py::TestJitSequenceGenerator``: ``undefined value torch``).
"""
import functools
import logging

from fairseq.sequence_generator import SequenceGenerator, SequenceGeneratorWithAlignment

from .errors import UserError
from .patching import FIX, patch, wrap_once

logger = logging.getLogger(__name__)


def generation_max_len(generator, src_len):
    """The length limit fairseq's ``SequenceGenerator._generate`` uses for this batch."""
    return min(int(generator.max_len_a * src_len + generator.max_len_b), generator.max_len - 1)


def _warn_at_limit(generate_fn):
    @functools.wraps(generate_fn)
    def generate(self, models, sample, *args, **kwargs):
        src_tokens = sample["net_input"].get("src_tokens")
        if self.match_source_len or src_tokens is None:
            return generate_fn(self, models, sample, *args, **kwargs)
        src_len = src_tokens.size(1)
        max_len = generation_max_len(self, src_len)
        if self.min_len > max_len:
            raise UserError(f"--min-len {self.min_len} is more than the length limit of a batch, {max_len} = "
                            f"min(--max-len-a {self.max_len_a:g} x {src_len} (longest source) + --max-len-b "
                            f"{self.max_len_b}, {self.max_len - 1}): lower --min-len or raise the limit")
        finalized = generate_fn(self, models, sample, *args, **kwargs)
        cut = [i for i, hypos in enumerate(finalized) if hypos and len(hypos[0]["tokens"]) > max_len]
        if cut:
            ids = sample.get("id")
            named = [int(ids[i]) for i in cut] if ids is not None else []
            logger.warning(
                "%d of %d translations stopped at the length limit of %d tokens and are cut off%s: "
                "the limit is min(--max-len-a %g x %d (longest source) + --max-len-b %d, %d); "
                "raise --max-len-b, or let it grow with the source (e.g. --max-len-a 1.5 --max-len-b 10)",
                len(cut), len(finalized), max_len,
                f" (sample ids {', '.join(map(str, named[:10]))}{' ...' if len(named) > 10 else ''})"
                if named else "",
                self.max_len_a, src_len, self.max_len_b, self.max_len - 1)
        return finalized

    return generate


@patch(FIX, "SequenceGenerator.generate, for every model: a warning where a translation reached the length limit; "
       "a --min-len above it in one line")
def patch_length_limit():
    """``SequenceGenerator.generate`` and ``SequenceGeneratorWithAlignment.generate``: warn about
    translations cut at the length limit."""
    for cls in (SequenceGenerator, SequenceGeneratorWithAlignment):
        wrap_once(cls, "generate", _warn_at_limit)
