"""The sizes at which the models change their computing path, in one place.

Each path gives the same result; which one is faster depends on the CPU (its vector width,
ATen's kernels), so each number below was measured on one machine, named beside it, and a CPU
of another kind may prefer another. ``tests/test_step_loops.py`` and ``tests/test_attention.py``
check that both sides of each size give the same numbers. To measure on your machine:
``scripts/bench/benchmark_speed.py`` (``docs/speed.md``), with the number changed here.
"""

# steps.ops.MemoryPlan.short_rows: a softmax over fewer slots than this is taken over the
# first dimension of the transposed scores. ATen's CPU softmax over a last dimension shorter
# than a vector register (16 floats with AVX-512) takes a scalar path: 76 against 19 us at
# 317 x 13 (9944ee3, 2026-11-29, 2 cores of an Intel Xeon at 2.8 GHz with AVX-512).
SOFTMAX_SHORT_ROW = 16

# steps.ops.MemoryPlan.small: a weighted sum over a memory of fewer than this many numbers a
# row (slots x width) is a product and a sum, not a batched matrix product: ATen multiplies such
# small matrices in a scalar loop (bmm_out_or_baddbmm_): 120 against 28 us for 320 rows of 13
# slots of 16 numbers (5fec12c, 2026-11-29, the same Xeon).
BMM_SCALAR_BELOW = 400

# luong.attention.LocalAttention.scores_whole: local attention scores the whole memory, with
# all but the window masked, when the source is at most this many windows (2D + 1 slots) long,
# and gathers the window beyond (abaf796, 2026-11-23, 2 cores of an AMD EPYC with AVX2,
# scripts/benchmark_attention.py, since removed). Read at every call: set it to force a path.
LOCAL_DENSE_UP_TO = 2
