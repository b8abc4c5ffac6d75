"""Reference decoders: the specification of each model family, written out plainly.

Each reference runs its paper's equations one target step and (for attention) one
sentence at a time, straight from the model's parameters: no hoisted products, fused
weights, cached keys, row schedule or windows gathered in a batch. The optimised
decoders (``fairseq_luong/modules/luong_decoder.py``, ``rnnsearch_decoder.py``) must
give the same outputs and gradients (``tests/test_reference.py``). To change what a
model computes, change its reference here first.

In training mode the references draw dropout masks with the model's own dropout
modules, on tensors of the same shapes and in the same order as the fast paths (one
mask for all embedded target words, one per step and layer, ...), so that one seed
fixes the masks of both.
"""
import math

import torch

from fairseq_luong.modules.attention_scores import ConcatScore, DotScore, GeneralScore, LocationScore
from fairseq_luong.modules.luong_attention import LocalMAttention, LocalPAttention


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
        by_position = score.W_a.weight @ q + score.W_a.bias  # W_a h_t: max_len
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
    ``luong_decoder.py``'s docstring, one step at a time with ``nn.LSTM`` single steps.
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
