"""Luong, Pham & Manning (2015): the encoder (source reversal), the attention (global, local-m,
local-p; the dot, general, concat and location scores, eq. 7-10), the input-feeding decoder and
its step loop (section 3.3), and the attention of one step, which RNNsearch's loop uses too."""
