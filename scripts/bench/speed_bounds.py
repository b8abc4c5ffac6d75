"""Upper bounds on training and translation speed, used by ``benchmark_speed.py``.

What any implementation of the same mathematics must spend, with this machine's
kernels, on the same batches; a bound's ratio to fairseq ``lstm`` (measured in the
same run) is the largest ratio any decoder could reach here.

* ``train_gemm_bound``: Luong global-general attention with (or without) input feeding,
  training step = forward + backward over one batch, counting ONLY
  - the encoder as it is (``model.encoder`` forward + backward: ``nn.LSTM``, the same
    kernel fairseq ``lstm`` uses),
  - the matrix products, each at the shape the recurrence forces and no smaller: with
    input feeding, every decoder layer's gate product and its input gradient is one
    GEMM per step over the sentences still going (rows b_t), as are the attention
    scores/contexts and W_c; everything that does not depend on the previous step in
    one large GEMM (layer 0's embedding gates, every weight gradient, the keys W_a h̄_s,
    the 8000-way output layer and its two gradients);
  - nothing else: no LSTM cell, softmax, dropout, loss, optimizer, allocation or Python
    (so real code cannot reach the bound).
* ``generate_search_bound``: fairseq's beam search (beam 5) with the encoder and the
  output layer of our model but a decoder whose recurrent part costs nothing (it
  returns a constant h~_t): what translation costs without any decoder work; with
  ``decoder_gemms``, plus only the matrix products each beam step forces.
"""
import time

import torch


def _timed(fn, repeats=3):
    fn()  # warm-up
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def _decoder_gemms(steps_rows, n_tokens, src_len, bsz, H, E, V, layers, input_feed):
    """A closure running the decoder's matrix products of one training step.

    steps_rows: rows b_t (sentences still going) at each target step t.
    """
    r = torch.randn
    feed = H if input_feed else 0
    big = r(n_tokens, max(E, 2 * H))  # N x (E or 2H): any step-independent input
    w_emb, w_rec = r(E, 4 * H), [r((feed + H) if i == 0 else 2 * H, 4 * H) for i in range(layers)]
    w_c, w_s, w_a = r(2 * H, H), r(H, V), r(H, H)
    keys, mem = r(bsz, H, src_len), r(bsz, src_len, H)  # bsz x H x S, bsz x S x H
    g4 = r(n_tokens, 4 * H)  # N x 4H gate gradients, all steps
    out_grad = r(n_tokens, V)  # N x V
    b0, tgt_len = steps_rows[0], len(steps_rows)
    xs = [r(b0, w.size(0)) for w in w_rec]  # per-step inputs [h~_{t-1}; h_{t-1}] etc.
    q, a = r(b0, 1, H), r(b0, 1, src_len)  # one step's query, attention weights
    q_all, a_all = r(bsz, tgt_len, H), r(bsz, tgt_len, src_len)  # every step's (no feeding)
    keys_in = r(bsz * src_len, H)  # h̄_s: (S*bsz) x H

    def run():
        x_emb = big[:, :E]
        torch.mm(x_emb, w_emb)  # layer 0's embedding gates, all steps: N x 4H
        torch.mm(g4, w_emb.t())  # their input gradient: N x E
        torch.mm(x_emb.t(), g4)  # their weight gradient: E x 4H
        torch.mm(keys_in, w_a)  # keys W_a h̄_s: (S*bsz) x H
        torch.mm(keys_in.t(), keys_in)  # and their two gradients (H x H, S*bsz x H)
        torch.mm(keys_in, w_a.t())
        for i, w in enumerate(w_rec):
            k = w.size(0)
            # the part of the layer's input known before the step loop: none with input
            # feeding (layer i's input is layer i-1's h_t of the same step) or for layer 0
            # (its embedding part is w_emb above); without feeding, layer i-1's h for all steps
            hoist = 0 if input_feed or i == 0 else H
            if hoist:
                torch.mm(big[:, :hoist], w[:hoist])  # N x 4H
                torch.mm(g4, w[:hoist].t())  # N x H
            for b in steps_rows:  # per step: forward and input gradient at b_t rows
                torch.mm(xs[i][:b, hoist:], w[hoist:])  # b_t x 4H
                torch.mm(g4[:b], w[hoist:].t())  # b_t x (k - hoist)
            torch.mm(big[:, :k].t(), g4)  # weight gradient, all steps at once: k x 4H
        steps = steps_rows if input_feed else [bsz]  # without feeding: all steps in one bmm
        for b in steps:
            qb = q[:b] if input_feed else q_all
            ab = a[:b] if input_feed else a_all
            torch.bmm(qb, keys[:b])  # scores: b x (1 or T) x S
            torch.bmm(ab, mem[:b])  # context: b x (1 or T) x H
            torch.bmm(ab, keys[:b].transpose(1, 2))  # score gradient wrt query
            torch.bmm(qb.transpose(1, 2), ab)  # and wrt keys
            torch.bmm(ab.transpose(1, 2), qb)  # context gradient wrt memory
            torch.bmm(qb, mem[:b].transpose(1, 2))  # and wrt the weights: b x (1 or T) x S
            if input_feed:
                torch.mm(xs[0][:b, : 2 * H], w_c)  # W_c [c; h]: b x H
                torch.mm(g4[:b, :H], w_c.t())  # its input gradient
        if not input_feed:
            torch.mm(big[:, : 2 * H], w_c)
            torch.mm(g4[:, :H], w_c.t())
        torch.mm(big[:, : 2 * H].t(), g4[:, :H])  # W_c's weight gradient
        torch.mm(big[:, :H], w_s)  # output layer: N x V
        torch.mm(out_grad, w_s.t())  # its input gradient: N x H
        torch.mm(big[:, :H].t(), out_grad)  # its weight gradient: H x V

    return run


def train_gemm_bound(model, samples, input_feed):
    """Target tokens/s if a training step cost only the encoder and the forced GEMMs."""
    enc_model = model.encoder
    H = model.decoder.layers[0].hidden_size
    E = model.decoder.embed_tokens.embedding_dim
    V, layers = model.decoder.embed_tokens.num_embeddings, len(model.decoder.layers)
    tokens, elapsed = 0, 0.0
    model.train()
    for sample in samples:
        net = sample["net_input"]
        tgt_lens = sample["target"].ne(model.decoder.dictionary.pad()).sum(1)  # bsz
        tgt_len = int(tgt_lens.max())
        steps_rows = [int((tgt_lens > t).sum()) for t in range(tgt_len)]
        bsz, src_len = net["src_tokens"].shape
        gemms = _decoder_gemms(steps_rows, int(tgt_lens.sum()), src_len, bsz, H, E, V, layers,
                               input_feed)

        def encoder_step():
            out = enc_model(net["src_tokens"], net["src_lengths"])["encoder_out"][0]
            out.sum().backward()

        elapsed += _timed(encoder_step) + _timed(gemms)
        tokens += sample["ntokens"]
    return tokens / elapsed


def generate_search_bound(model, decoder_gemms=False):
    """Make ``model``'s decoder cost nothing but, with ``decoder_gemms``, the matrix
    products one beam step forces (per layer [input; h] against W_ih and W_hh, the
    attention bmm's over the real source length, W_c), then a constant h~_t goes to the
    real output layer."""
    dec = model.decoder
    H = dec.layers[-1].hidden_size
    weights = [(layer.weight_ih_l0.detach().t(), layer.weight_hh_l0.detach().t())
               for layer in dec.layers]  # (in x 4H, H x 4H) views, as fairseq's LSTMCell uses
    w_c = dec.attentional_hidden.W_c.weight.detach().t()  # (C + H) x H, eq. 5

    def extract_features(prev_output_tokens, encoder_out=None, incremental_state=None, **kwargs):
        bsz = prev_output_tokens.size(0)
        if decoder_gemms:
            mem = encoder_out["encoder_out"]  # bsz x srclen x C
            x, h = torch.zeros(bsz, weights[0][0].size(0)), torch.zeros(bsz, H)
            for w_ih, w_hh in weights:
                torch.mm(x[:, : w_ih.size(0)], w_ih)  # bsz x 4H
                torch.mm(h, w_hh)  # bsz x 4H
            q = torch.zeros(bsz, 1, mem.size(2))  # the query (W_a h_t for general): bsz x 1 x C
            a = torch.bmm(q, mem.transpose(1, 2))  # scores: bsz x 1 x srclen
            torch.bmm(a, mem)  # context: bsz x 1 x C
            torch.mm(torch.zeros(bsz, w_c.size(0)), w_c)  # W_c [c; h]: bsz x H
        return prev_output_tokens.new_zeros(bsz, 1, H, dtype=torch.float32), {"attn": [None]}

    dec.extract_features = extract_features
    return model
