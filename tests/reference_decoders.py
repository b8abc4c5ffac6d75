"""Reference decoders: the specification of each model family, written out plainly.

Each reference runs its paper's equations one target step and (for attention) one
sentence at a time, straight from the model's parameters: no hoisted products, fused
weights, cached keys, active rows or windows gathered in a batch. The optimised
decoders (``fairseq_luong/modules/luong/decoder.py``, ``rnnsearch/decoder.py``) must
give the same outputs and gradients (``tests/test_reference.py``). To change what a
model computes, change its reference here first.

In training mode the references draw dropout masks with the model's own dropout
modules, on tensors of the same shapes and in the same order as the fast paths (one
mask for all embedded target words, one per step and layer, ...), so that one seed
fixes the masks of both.
"""
import math

import torch

from fairseq_luong.modules.luong.attention import LocalMAttention, LocalPAttention
from fairseq_luong.modules.luong.scores import ConcatScore, DotScore, GeneralScore, LocationScore

# --------------------------------------------------------------------- scores


def score_reference(score, q, mem, positions):
    """score(h_t, h̄_s) for one query q (H) and the slots mem (N x C) at sentence
    ``positions`` (N) (Luong et al. 2015, eq. 8); -inf where a score has none."""
    if isinstance(score, DotScore):
        return mem @ q  # h_t^T h̄_s
    if isinstance(score, GeneralScore):
        return mem @ (score.W_a.weight.t() @ q)  # h_t^T W_a h̄_s
    if isinstance(score, ConcatScore):
        # v_a^T tanh(W_a [h_t; h̄_s]), W_a = [W_q W_k]
        W_a = torch.cat([score.W_q.weight, score.W_k.weight], 1)
        stacked = torch.cat([q.expand(mem.size(0), -1), mem], 1)  # N x (H + C)
        return torch.tanh(stacked @ W_a.t()) @ score.v_a.weight[0]
    if isinstance(score, LocationScore):
        by_position = score.W_a.weight @ q  # W_a h_t: max_len (eq. 8 has no bias)
        out = torch.full((len(positions),), float("-inf"), dtype=q.dtype)
        inside = positions < score.max_len
        out[inside] = by_position[positions[inside]]
        return out
    raise TypeError(f"no reference for {type(score).__name__}")


# ------------------------------------------------------------------ Luong et al.


def luong_context(attention, q, t, mem):
    """c_t for one sentence: global (eq. 7), local-m or local-p (section 3.2, eq. 9-10).

    q: H (the query h_t); t: the target step; mem: S x C (the sentence's h̄_s, in the
    original source order, appended EOS included).
    """
    S = mem.size(0)
    wide = torch.promote_types(q.dtype, torch.float32)  # p_t and the softmax: float32 or wider
    positions = torch.arange(S)
    if isinstance(attention, (LocalMAttention, LocalPAttention)):
        D = attention.window
        if isinstance(attention, LocalMAttention):
            p = float(min(t, S - 1))
        else:  # eq. 9: p_t = S * sigmoid(v_p^T tanh(W_p h_t))
            logit = attention.v_p.weight[0] @ torch.tanh(attention.W_p.weight @ q)
            p = S * torch.sigmoid(logit.to(wide))
        centre = min(math.floor(float(p)), S - 1)
        positions = torch.arange(max(centre - D, 0), min(centre + D, S - 1) + 1)
    scores = score_reference(attention.score, q, mem[positions], positions)
    a = torch.softmax(scores.to(wide), 0).to(q.dtype)
    if isinstance(attention, LocalPAttention):  # eq. 10, sigma = D / 2, not renormalised
        sigma = attention.window / 2 if attention.window > 0 else 0.5
        a = a * torch.exp(-((positions.to(p.dtype) - p) ** 2) / (2 * sigma**2)).to(q.dtype)
    context = (a.unsqueeze(1) * mem[positions]).sum(0)  # C
    weights = torch.zeros(S, dtype=q.dtype)
    weights[positions] = a
    return context, weights


def luong_attend(dec, h, t, enc):
    """h~_t = tanh(W_c [c_t; h_t]) (eq. 5) for a batch, one sentence at a time;
    h~_t = h_t without attention. h: bsz x H."""
    if dec.attention is None:
        return h
    rows = []
    for b in range(h.size(0)):
        s0, S = int(enc["src_start"][b]), int(enc["src_length"][b])
        context, _ = luong_context(dec.attention, h[b], t, enc["encoder_out"][b, s0 : s0 + S])
        rows.append(torch.tanh(dec.attentional_hidden.W_c.weight @ torch.cat([context, h[b]])))
    return torch.stack(rows)


def luong_reference(model, src_tokens, src_lengths, prev_output_tokens):
    """Luong, Pham & Manning (2015): section 3 and eq. 5-10, the step of
    ``luong/decoder.py``'s docstring, one step at a time with ``nn.LSTM`` single steps.
    Returns the logits, bsz x tgtlen x V."""
    dec = model.decoder
    enc = model.encoder(src_tokens, src_lengths)
    h0, c0 = enc["final_hiddens"], enc["final_cells"]  # layers x bsz x C
    if dec.init_hidden_proj is not None:  # a bidirectional encoder's 2H states
        h0, c0 = dec.init_hidden_proj(h0), dec.init_cell_proj(c0)
    h, c = list(h0.unbind(0)), list(c0.unbind(0))
    emb = dec.dropout_in(dec.embed_tokens(prev_output_tokens))  # bsz x tgtlen x E
    bsz, tgtlen = prev_output_tokens.size()

    def lstm(i, inp):  # layer i, one step: h_t, c_t = LSTM(inp, (h_{t-1}, c_{t-1}))
        _, (hh, cc) = dec.layers[i](inp.unsqueeze(0), (h[i].unsqueeze(0), c[i].unsqueeze(0)))
        h[i], c[i] = hh[0], cc[0]

    if dec.input_feed:  # section 3.3: h~_{t-1} joins the input of step t
        feed = emb.new_zeros(bsz, dec.hidden_size)
        outs = []
        for t in range(tgtlen):
            lstm(0, torch.cat([emb[:, t], feed], 1))
            for i in range(1, dec.num_layers):
                lstm(i, dec.dropout_hidden(h[i - 1]))
            feed = dec.dropout_out(luong_attend(dec, h[-1], t, enc))
            outs.append(feed)
        features = torch.stack(outs, 1)  # bsz x tgtlen x H
    else:  # layer by layer (the same equations; dropout masks drawn as the fast path does)
        x = emb.transpose(0, 1)  # tgtlen x bsz x E
        for i in range(dec.num_layers):
            if i > 0:
                x = dec.dropout_hidden(x)
            steps = []
            for t in range(tgtlen):
                lstm(i, x[t])
                steps.append(h[i])
            x = torch.stack(steps)  # tgtlen x bsz x H
        top = x.transpose(0, 1)  # bsz x tgtlen x H, a view as in the fast path (masks follow the layout)
        if dec.attention is None:
            htilde = top
        else:
            htilde = torch.stack([luong_attend(dec, top[:, t], t, enc) for t in range(tgtlen)], 1)
        features = dec.dropout_out(htilde)
    return dec.output_layer(features)


# ---------------------------------------------------------------- Bahdanau et al.


def gru_reference(gru, x, h):
    """One GRU step for one sentence (Bahdanau et al. 2014, appendix A.2.1), from the
    parameters: the reset gate multiplies h_{t-1} before U. x: in, h: H."""
    W_z, W_r, W = gru.W.weight.chunk(3)
    b_z, b_r, b = gru.W.bias.chunk(3)
    U_z, U_r = gru.U_zr.weight.chunk(2)
    z = torch.sigmoid(W_z @ x + b_z + U_z @ h)
    r = torch.sigmoid(W_r @ x + b_r + U_r @ h)
    candidate = torch.tanh(W @ x + b + gru.U.weight @ (r * h))
    return (1 - z) * h + z * candidate


def rnnsearch_encoder_reference(encoder, src_tokens):
    """Annotations h_j = [forward h_j; backward h_j] (section 3.2), one sentence at a time.

    The embeddings are dropped out as the encoder does (one bsz x srclen x E tensor of
    each sentence's tokens, first to last, padding after). Returns the annotations at
    the original padded positions (bsz x srclen x 2H, zeros on padding) and backward h_1.
    """
    from fairseq_luong.modules.luong.encoder import source_order

    bsz, srclen = src_tokens.size()
    order, length, start = source_order(src_tokens, encoder.padding_idx, encoder.eos_idx, reverse=False)
    x = encoder.dropout_in(encoder.embed_tokens(src_tokens.gather(1, order)))  # bsz x srclen x E
    H = encoder.hidden_size
    annotations = x.new_zeros(bsz, srclen, 2 * H)
    firsts = []
    for b in range(bsz):
        S, s0 = int(length[b]), int(start[b])
        forward, backward = [], [None] * S
        h = x.new_zeros(H)
        for j in range(S):  # x_1 .. x_S
            h = gru_reference(encoder.forward_gru, x[b, j], h)
            forward.append(h)
        h = x.new_zeros(H)
        for j in reversed(range(S)):  # x_S .. x_1
            h = gru_reference(encoder.backward_gru, x[b, j], h)
            backward[j] = h
        rows = torch.stack([torch.cat([f, k]) for f, k in zip(forward, backward)])  # S x 2H
        annotations = annotations.index_put((torch.tensor([b]), torch.arange(s0, s0 + S)), rows)
        firsts.append(backward[0])
    return annotations, torch.stack(firsts), start, length


def rnnsearch_reference(model, src_tokens, src_lengths, prev_output_tokens):
    """Bahdanau, Cho & Bengio (2014): the encoder of section 3.2 and the decoder step of
    ``rnnsearch/decoder.py``'s docstring (appendix A.2.2), one step and one sentence at a
    time. Returns the logits, bsz x tgtlen x V."""
    enc, dec = model.encoder, model.decoder
    annotations, first, start, length = rnnsearch_encoder_reference(enc, src_tokens)
    emb = dec.dropout_in(dec.embed_tokens(prev_output_tokens))  # bsz x tgtlen x E
    bsz, tgtlen = prev_output_tokens.size()
    score = dec.attention.score
    W_a, U_a, v_a = score.W_q.weight, score.W_k.weight, score.v_a.weight[0]
    pieces = dec.maxout_pieces
    s = [torch.tanh(dec.W_s.weight @ first[b] + dec.W_s.bias) for b in range(bsz)]  # s_0
    t_steps = []
    for i in range(tgtlen):
        t_rows = []
        for b in range(bsz):
            h = annotations[b, int(start[b]) : int(start[b] + length[b])]  # Tx x 2H
            e = torch.tanh(W_a @ s[b] + h @ U_a.t()) @ v_a  # e_ij from s_{i-1}
            alpha = torch.softmax(e.to(torch.promote_types(e.dtype, torch.float32)), 0).to(e.dtype)
            c = alpha @ h  # c_i
            s_new = gru_reference(dec.gru, torch.cat([emb[b, i], c]), s[b])  # s_i
            s_out = s_new if dec.deep_output_from_current else s[b]
            t_tilde = dec.U_o.weight @ s_out + dec.U_o.bias + dec.V_o.weight @ emb[b, i] + dec.C_o.weight @ c
            t_rows.append(torch.stack([t_tilde[k : k + pieces].max() for k in range(0, len(t_tilde), pieces)]))
            s[b] = s_new
        t_steps.append(torch.stack(t_rows))
    # dropout on t_i as the fast path draws it: one step-major tgtlen*bsz x l tensor
    t = dec.dropout_out(torch.cat(t_steps)).view(tgtlen, bsz, -1).transpose(0, 1)
    return dec.output_layer(t)
