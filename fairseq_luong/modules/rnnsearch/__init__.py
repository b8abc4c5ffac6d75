"""RNNsearch, Bahdanau, Cho & Bengio (2014): the bidirectional GRU encoder, the decoder with
additive attention from the previous state (Luong's concat score) and the deep maxout output, and
its step loop."""
