"""Which rows of a batch a step-by-step decoder runs at each target step.

In training a batch's targets are right-padded to the longest one. A decoder
whose step t depends on step t - 1 (input feeding, RNNsearch) runs a Python
loop over the steps; running every row at every step would spend gate,
attention and output work on padding (13% of Multi30k's batch tokens).
:class:`ActiveRows` sorts the rows by length, longest first, so that the
sentences still going at step t are the first ``rows(t)`` rows, narrows the
loop's state when sentences end, and puts the outputs back at their original
row and step. The decoders' step loops (``luong/input_feeding.py``,
``rnnsearch/steps.py``) read ``active`` (the rows of each step) and keep their
per-step tensors *packed*, step after step ((sum of rows(t)) x ...:
``pack_batch_major``, ``unpack``, ``unpack_sorted``); RNNsearch's encoder loop
uses the per-step views (``per_step``, ``at_step``, ``pack``). The active rows are
tested once against running each sentence alone (``tests/test_equivalence.py``).

Without lengths (incremental decoding, alignments wanted, left-padded or
all-equal targets) every row runs every step and each operation is the
identity (or a plain stack).
"""
from typing import List, Optional

import torch
from torch import Tensor


def map_batch(fn, state):
    """``fn`` applied to every batch-first tensor of ``state``: a tensor, None, a list
    or tuple of states, or an object with ``map_rows`` (e.g. a ``SourceMemory``)."""
    if state is None:
        return None
    if isinstance(state, Tensor):
        return fn(state)
    if hasattr(state, "map_rows"):
        return state.map_rows(fn)
    if isinstance(state, (list, tuple)):
        return type(state)(map_batch(fn, s) for s in state)
    raise TypeError(f"cannot select rows of a {type(state).__name__}")


def right_padded_lengths(tokens: Tensor, pad: int) -> Optional[Tensor]:
    """Each row's length (bsz) if the rows of ``tokens`` (bsz x tgtlen) are right-padded and
    some are shorter than the others; None otherwise (then every row runs every step)."""
    real = tokens.ne(pad)  # bsz x tgtlen
    lengths = real.sum(1)  # bsz
    tgtlen = tokens.size(1)
    if tgtlen < 2 or bool((lengths == tgtlen).all()) or bool((lengths == 0).any()):
        return None
    steps = torch.arange(tgtlen, device=lengths.device)
    if not torch.equal(real, steps.unsqueeze(0) < lengths.unsqueeze(1)):  # not right-padded
        return None
    return lengths


class ActiveRows:
    """The rows each step runs: all of them, or (with ``lengths``) those still going.

    Use (a step loop with autograd; the decoders' loops use ``active`` and the packed forms)::

        active_rows = ActiveRows.for_targets(prev_output_tokens, pad, skip_padding)
        state = active_rows.sort(state)                  # batch-first tensors, rows sorted
        inputs = active_rows.per_step(step_inputs)       # tgtlen x bsz x ... -> step t: rows(t) x ...
        for t in active_rows.steps():
            state = active_rows.at_step(t, state)        # narrowed when sentences end at t
            ...
        out = active_rows.unpack(active_rows.pack(outputs)) # bsz x tgtlen x ..., original rows
    """

    def __init__(self, bsz: int, tgtlen: int, lengths: Optional[Tensor] = None):
        self.bsz, self.tgtlen = bsz, tgtlen
        self.order: Optional[Tensor] = None  # active row -> original row
        self.active: List[int] = [bsz] * tgtlen  # rows running at step t (non-increasing)
        self._indices = {}  # _index's, by batch_major
        if lengths is not None:
            self.order = lengths.argsort(descending=True, stable=True)  # bsz
            steps = torch.arange(tgtlen, device=lengths.device)
            self.active = (lengths.unsqueeze(0) > steps.unsqueeze(1)).sum(1).tolist()  # tgtlen

    @classmethod
    def for_targets(cls, prev_output_tokens: Tensor, pad: int, skip_padding: bool) -> "ActiveRows":
        bsz, tgtlen = prev_output_tokens.size()
        lengths = right_padded_lengths(prev_output_tokens, pad) if skip_padding else None
        return cls(bsz, tgtlen, lengths)

    @property
    def skips_padding(self) -> bool:
        """Whether rows are reordered and padded steps skipped (then the loop's final
        states cover only the rows of the last step: nothing may continue them)."""
        return self.order is not None

    def steps(self) -> range:
        return range(self.tgtlen)

    def rows(self, t: int) -> int:
        return self.active[t]

    def sort(self, state):
        """``state``'s batch-first tensors with their rows in active-row order."""
        if self.order is None:
            return state
        return map_batch(lambda x: x.index_select(0, self.order), state)

    def per_step(self, inputs: Tensor) -> List[Tensor]:
        """Step-major inputs (tgtlen x bsz x ..., rows in active-row order) as one tensor per
        step holding the rows that run then. Unbound, not indexed: indexing step t of the
        whole tensor would give a zero-filled full-size gradient per step in the backward."""
        steps = inputs.unbind(0)
        if self.order is None:
            return list(steps)
        return [x if n == self.bsz else x[:n] for x, n in zip(steps, self.active)]

    def at_step(self, t: int, state):
        """``state`` narrowed to the rows of step t; unchanged unless sentences end at t."""
        if t == 0 or self.active[t] == self.active[t - 1]:
            return state
        rows = self.active[t]
        return map_batch(lambda x: x[:rows], state)

    @property
    def full(self) -> bool:
        """Whether every row runs every step (then packed tensors are step-major views)."""
        return self.order is None

    @property
    def total_rows(self) -> int:
        """The rows of all steps together: a packed tensor's first dimension."""
        return sum(self.active)

    def _index(self, batch_major: bool) -> Tensor:
        """For each packed row (step t, row r < rows(t)), its row in a step-major (t * bsz + r)
        or batch-major (r * tgtlen + t) flattening. Made on the device, no read-back; once."""
        if batch_major in self._indices:
            return self._indices[batch_major]
        device = self.order.device
        rows = torch.tensor(self.active, device=device)
        step = torch.repeat_interleave(torch.arange(self.tgtlen, device=device), rows,
                                       output_size=self.total_rows)  # packed -> t
        first = torch.cumsum(rows, 0) - rows  # tgtlen: each step's first packed row
        row = torch.arange(self.total_rows, device=device) - first[step]  # packed -> r
        index = row * self.tgtlen + step if batch_major else step * self.bsz + row
        self._indices[batch_major] = index
        return index

    def sort_states(self, states: Tensor) -> Tensor:
        """Recurrent states layers x bsz x ... with their rows in active-row order."""
        return states if self.order is None else states.index_select(1, self.order)

    def pack_batch_major(self, x: Tensor) -> Tensor:
        """Batch-first inputs (bsz x tgtlen x ..., rows in active-row order) -> packed (one copy)."""
        if self.full:  # -> tgtlen*bsz x ..., step-major
            return x.transpose(0, 1).reshape((self.tgtlen * self.bsz,) + x.shape[2:])
        flat = x.reshape((self.bsz * self.tgtlen,) + x.shape[2:])  # bsz*tgtlen x ...
        return flat.index_select(0, self._index(batch_major=True))

    def pack_steps(self, steps: Tensor) -> Tensor:
        """Step-major inputs (tgtlen x bsz x ..., rows in active-row order) -> packed: the rows
        that run at each step, step after step ((sum of rows(t)) x ...)."""
        flat = steps.reshape((self.tgtlen * self.bsz,) + steps.shape[2:])  # tgtlen*bsz x ...
        return flat if self.full else flat.index_select(0, self._index(batch_major=False))

    def unpack_sorted(self, packed: Tensor) -> Tensor:
        """A packed tensor -> bsz x tgtlen x ... in SCHEDULE row order (what a step loop's
        memory is sorted in), zeros on the skipped steps."""
        rest = packed.shape[1:]
        if self.full:  # tgtlen*bsz x ... -> bsz x tgtlen x ...
            return packed.view((self.tgtlen, self.bsz) + rest).transpose(0, 1)
        out = packed.new_zeros((self.bsz * self.tgtlen,) + rest)
        return out.index_copy_(0, self._index(batch_major=True), packed).view((self.bsz, self.tgtlen) + rest)

    def pack(self, outputs: List[Tensor]) -> Tensor:
        """The steps' outputs (step t: rows(t) x ...) as one tensor, step-major:
        (sum of rows(t)) x ... (work after the loop runs on real rows only)."""
        return torch.cat(outputs, 0)

    def unpack(self, packed: Tensor) -> Tensor:
        """A packed tensor (see :meth:`pack`) -> bsz x tgtlen x ... in the original row
        order, zeros on the skipped (padded) steps."""
        rest = packed.shape[1:]
        if self.order is None:  # tgtlen*bsz x ... -> bsz x tgtlen x ...
            return packed.view((self.tgtlen, self.bsz) + rest).transpose(0, 1)
        index = torch.cat([self.order[:n] * self.tgtlen + t for t, n in enumerate(self.active)])
        out = packed.new_zeros((self.bsz * self.tgtlen,) + rest).index_copy(0, index, packed)
        return out.view((self.bsz, self.tgtlen) + rest)
