"""Beam-search options of fairseq-generate and fairseq-interactive (fairseq 0.12 and main) that ran
and ignored what they promise, or stopped with a traceback after a sentence finished.

* ``--no-repeat-ngram-size N`` blocked nothing: ``NGramRepeatBlock._no_repeat_ngram``
  (fairseq/ngram_repeat_block.py; the path taken on the CPU, and on a GPU whenever
  fairseq's CUDA extension was not built, as with pip) compares the last N-1 entries of the
  whole token buffer, which are padding, instead of the last N-1 tokens generated. We ban,
  as fairseq's CUDA kernel does, every token that would complete an N-gram already inside
  the generated prefix ``tokens[:, :step + 1]``, in one vectorised pass.
* ``--diverse-beam-groups G``: ``IndexError`` in ``DiverseBeamSearch.step``
  (fairseq/search.py) at the second step of any batch whose sample ids reach the batch size
  (fairseq-generate's second batch), and wrong penalties without an error where they do
  not: it keeps the groups' overlap in batch rows at the first step and then looks it up by
  sample id (``original_batch_idxs``). We keep the overlap in batch rows, dropping the rows
  of sentences that have finished, and let fairseq look it up by row.
* ``--match-source-len``: translations longer than their sources, with exit status 0.
  ``LengthConstrainedBeamSearch.step`` counts the source's EOS in its length, and at that
  length only gives EOS a log-probability of 0 (other words stay allowed), so hypotheses
  run on to the batch's longest source. We ban EOS before each sentence's own source
  length (its words, without EOS) and allow only EOS at it. ``SequenceGenerator.is_finished``
  then waits for --beam finished hypotheses, which an empty source (one EOS at the first
  step, where fairseq extends only the first beam) never gives: ``AssertionError: 1 < 1``.
  With --match-source-len a sentence is finished at its length, the step its hypotheses end.
* ``--sampling-topk K`` above the target vocabulary: ``RuntimeError: selected index k out of
  range`` from ``torch.topk`` in ``Sampling.step`` at the first step. Top-K of more words than
  there are is sampling from all of them: ``Sampling.__init__`` now keeps K at the vocabulary's
  size, with a warning.
Options beam search cannot honour at all are left to fairseq (a plugin's checks may refuse them
before any work: fairseq_luong's ``option_checks.py`` does).
"""
import functools
import logging
import math

import torch
from fairseq.ngram_repeat_block import NGramRepeatBlock
from fairseq.search import DiverseBeamSearch, LengthConstrainedBeamSearch, Sampling
from fairseq.sequence_generator import SequenceGenerator

from .patching import FIX, patch, wrap_once

logger = logging.getLogger(__name__)


def banned_ngram_completions(prefix, n):
    """(rows, tokens) such that appending ``tokens[i]`` to row ``rows[i]`` of ``prefix``
    (hypotheses x length: BOS, then the tokens generated so far) repeats an ``n``-gram that
    row already holds: for each ``n``-gram inside the row whose first n-1 tokens equal the
    row's last n-1, its last token. BOS is not a token of the translation, so it is never
    banned (it only matters for n = 1, where every generated token is)."""
    if n == 1:
        prefix = prefix[:, 1:]
    if prefix.size(1) < n:
        return prefix.new_empty(0), prefix.new_empty(0)
    ngrams = prefix.unfold(1, n, 1)  # hypos x (length - n + 1) x n
    last = prefix[:, prefix.size(1) - (n - 1):]  # hypos x (n - 1)
    repeats = (ngrams[:, :, :-1] == last.unsqueeze(1)).all(dim=-1)  # hypos x (length - n + 1)
    rows, starts = repeats.nonzero(as_tuple=True)
    return rows, ngrams[rows, starts, -1]


def _blocking_generated_ngrams(_no_repeat_ngram):
    @functools.wraps(_no_repeat_ngram)
    def no_repeat_ngram(self, tokens, lprobs, bsz: int, beam_size: int, step: int):
        # tokens: bsz*beam x (max_len + 2), of which the first step + 1 are BOS and the
        # generated prefix (the rest is padding); lprobs: bsz*beam x vocab, changed in place
        rows, banned = banned_ngram_completions(tokens[:, : step + 1], self.no_repeat_ngram_size)
        lprobs[rows, banned] = -math.inf
        return lprobs

    return no_repeat_ngram


def _overlap_kept_in_batch_rows(step_fn):
    @functools.wraps(step_fn)
    def step(self, step, lprobs, scores, prev_output_tokens=None, original_batch_idxs=None):
        bsz = lprobs.size(0)  # lprobs: bsz x beam x vocab
        rows = torch.arange(bsz, device=lprobs.device)
        ids = original_batch_idxs if original_batch_idxs is not None else rows
        if step > 0:
            # the row each sentence still in the batch had at the previous step
            previous = self._fairseq_fixes_sample_ids
            kept = (ids.unsqueeze(1) == previous.unsqueeze(0)).int().argmax(dim=1)  # bsz
            self.group_overlap = self.group_overlap[kept.to(self.group_overlap.device)]
        self._fairseq_fixes_sample_ids = ids.clone()
        return step_fn(self, step, lprobs, scores, prev_output_tokens, rows)

    return step


def _exact_source_lengths(step_fn):
    @functools.wraps(step_fn)
    def step(self, step: int, lprobs, scores, prev_output_tokens=None, original_batch_idxs=None):
        # lprobs: bsz x beam x vocab; src_lengths: bsz, each counting the source's EOS as
        # fairseq's translation datasets do (fairseq-interactive's included)
        words = self.src_lengths - 1
        shortest = self.min_len_a * words + self.min_len_b
        longest = self.max_len_a * words + self.max_len_b
        lprobs[step < shortest, :, self.eos] = -math.inf
        ends = step >= longest
        if ends.any():
            eos = lprobs[ends, :, self.eos]  # ended sentences x beam
            # the model's EOS score, or 0 where --min-len banned it (an empty source)
            eos = torch.where(torch.isinf(eos), torch.zeros_like(eos), eos)
            lprobs[ends] = -math.inf
            lprobs[ends, :, self.eos] = eos
        return self.beam.step(step, lprobs, scores)

    return step


def _finished_at_source_length(is_finished):
    @functools.wraps(is_finished)
    def finished(self, step: int, unfin_idx: int, max_len: int, finalized_sent_len: int, beam_size: int):
        # called for the sentences with a hypothesis ending at this step: with exact lengths,
        # the step at which all of its hypotheses end
        return self.match_source_len or is_finished(self, step, unfin_idx, max_len, finalized_sent_len, beam_size)

    return finished


def _topk_within_the_vocabulary(init):
    @functools.wraps(init)
    def __init__(self, tgt_dict, sampling_topk=-1, sampling_topp=-1.0):
        if sampling_topk > len(tgt_dict):
            logger.warning("--sampling-topk %d is more than the %d words of the target vocabulary: sampling from "
                           "all of them", sampling_topk, len(tgt_dict))
            sampling_topk = len(tgt_dict)
        init(self, tgt_dict, sampling_topk, sampling_topp)

    return __init__


@patch(FIX, "--no-repeat-ngram-size without fairseq's CUDA extension, for every model")
def patch_ngram_blocking():
    """``NGramRepeatBlock._no_repeat_ngram``: N-grams of the generated prefix are blocked."""
    wrap_once(NGramRepeatBlock, "_no_repeat_ngram", _blocking_generated_ngrams)


@patch(FIX, "--diverse-beam-groups, for every model")
def patch_diverse_beam_search():
    """``DiverseBeamSearch.step``: the groups' overlap follows the batch as sentences finish."""
    wrap_once(DiverseBeamSearch, "step", _overlap_kept_in_batch_rows)


@patch(FIX, "--match-source-len, for every model")
def patch_match_source_len():
    """``LengthConstrainedBeamSearch.step``: each translation as long as its source;
    ``SequenceGenerator.is_finished``: a sentence is finished at that length."""
    wrap_once(LengthConstrainedBeamSearch, "step", _exact_source_lengths)
    wrap_once(SequenceGenerator, "is_finished", _finished_at_source_length)


@patch(FIX, "--sampling-topk above the target vocabulary, for every model")
def patch_sampling_topk():
    """``Sampling.__init__``: top-K of at most the target vocabulary's words."""
    wrap_once(Sampling, "__init__", _topk_within_the_vocabulary)
