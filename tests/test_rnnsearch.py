"""RNNsearch (Bahdanau, Cho & Bengio 2014) equation by equation, on numbers worked by hand.

``test_reference.py`` compares the whole model with a slow reference; these tests name
the equations one at a time, so that a failure says which one broke: the maxout, the
paper's GRU (reset before U), s_0 from the backward state at the first word, the
alignment queried with s_{i-1} (not s_i), and the deep output's state.
"""
import pytest
import torch
import torch.nn.functional as F

from fairseq_luong.modules.rnnsearch.decoder import maxout
from fairseq_luong.modules.rnnsearch.gru import GRU, gru_update
from tests.helpers import build_model, random_batch

SIZES = ["--encoder-embed-dim", "6", "--encoder-hidden-size", "5", "--decoder-embed-dim", "7",
         "--decoder-hidden-size", "4", "--attention-dim", "3", "--maxout-dim", "5",
         "--init-uniform", "0.5"]


def test_maxout_takes_the_max_of_consecutive_pieces():
    t_tilde = torch.tensor([[1.0, -2.0, 0.5, 3.0, -1.0, -0.5],
                            [-4.0, 7.0, 2.0, 2.0, 9.0, 1.0]])  # 2 x (3 units * 2 pieces)
    assert maxout(t_tilde, 2).tolist() == [[1.0, 3.0, -0.5], [7.0, 2.0, 9.0]]
    # 3 pieces: 2 units of 3 consecutive values each
    assert maxout(t_tilde, 3).tolist() == [[1.0, 3.0], [7.0, 9.0]]
    assert maxout(torch.zeros(4, 2, 5 * 2), 2).shape == (4, 2, 5)


def test_gru_resets_the_state_before_U():
    """h~_t = tanh(W x + U [r o h]) (appendix A.2.1), not nn.GRU's tanh(W x + r o (U h))."""
    torch.manual_seed(0)
    gru = GRU(3, 4).double()
    for p in gru.parameters():
        torch.nn.init.uniform_(p, -1.0, 1.0)
    x, h = torch.randn(2, 3, dtype=torch.double), torch.randn(2, 4, dtype=torch.double)
    W_z, W_r, W = gru.W.weight.chunk(3)
    b_z, b_r, b = gru.W.bias.chunk(3)
    U_z, U_r = gru.U_zr.weight.chunk(2)
    z = torch.sigmoid(x @ W_z.t() + b_z + h @ U_z.t())
    r = torch.sigmoid(x @ W_r.t() + b_r + h @ U_r.t())
    paper = (1 - z) * h + z * torch.tanh(x @ W.t() + b + (r * h) @ gru.U.weight.t())
    cudnn = (1 - z) * h + z * torch.tanh(x @ W.t() + b + r * (h @ gru.U.weight.t()))
    got = gru_update(gru.W(x), h, *gru.recurrent_weights())
    torch.testing.assert_close(got, paper, rtol=0, atol=1e-12)
    assert (got - cudnn).abs().max() > 1e-3  # the two units differ on these numbers


def _model(*extra):
    model, task, _ = build_model("rnnsearch_tiny", *SIZES, *extra)
    return model.double().eval(), task


def _by_hand_steps(model, batch, b, steps):
    """The first ``steps`` decoder steps of sentence b written out from the parameters:
    returns (s_0, [a_i], [logits_i]) with s_0 = tanh(W_s backward h_1) and a_i from s_{i-1}."""
    enc, dec = model.encoder, model.decoder
    out = enc(batch["src_tokens"], batch["src_lengths"])
    real = batch["src_tokens"][b].ne(dec.dictionary.pad())
    h = out["encoder_out"][b][real]  # Tx x 2H, the sentence's annotations in word order
    H = enc.hidden_size
    s = torch.tanh(dec.W_s(h[0, H:]))  # s_0 from backward h_1, the backward half at word 1
    s0 = s
    score = dec.attention.score
    alignments, logits = [], []
    for i in range(steps):
        y_prev = dec.embed_tokens(batch["prev_output_tokens"][b, i])  # E y_{i-1}
        e = score.v_a(torch.tanh(score.W_q(s) + score.W_k(h))).squeeze(-1)  # e_ij from s_{i-1}
        a = torch.softmax(e, 0)
        c = a @ h
        s_new = gru_update(dec.gru.W(torch.cat([y_prev, c])), s, *dec.gru.recurrent_weights())
        readout = s_new if dec.deep_output_from_current else s
        t = maxout(dec.U_o(readout) + dec.V_o(y_prev) + dec.C_o(c), dec.maxout_pieces)
        logits.append(dec.output_layer(t))
        alignments.append(a)
        s = s_new
    return s0, alignments, logits


@pytest.mark.parametrize("state", ["previous", "current"])
def test_alignment_from_previous_state_and_deep_output_state(state):
    model, task = _model("--deep-output-state", state)
    batch = random_batch(task, bsz=2, srclens=(6, 4), tgtlens=(5, 3), seed=4)
    with torch.no_grad():
        logits, extra = model(batch["src_tokens"], batch["src_lengths"], batch["prev_output_tokens"])
    attn = extra["attn"][0]  # bsz x tgtlen x srclen
    for b in range(2):
        real = batch["src_tokens"][b].ne(task.source_dictionary.pad())
        _, alignments, by_hand = _by_hand_steps(model, batch, b, 3)
        for i in range(3):
            torch.testing.assert_close(attn[b, i][real], alignments[i], rtol=0, atol=1e-10)
            torch.testing.assert_close(logits[b, i], by_hand[i], rtol=0, atol=1e-10)


def test_initial_state_is_tanh_W_s_of_the_backward_state_at_the_first_word():
    """s_0 = tanh(W_s backward h_1) (appendix A.2.2): the backward GRU's state after it has
    read the whole sentence, from its last token to its first. The first step's alignment
    is queried with s_0, so it shows s_0."""
    model, task = _model()
    batch = random_batch(task, bsz=2, srclens=(6, 4), tgtlens=(2, 2), seed=5)
    enc, dec = model.encoder, model.decoder
    with torch.no_grad():
        out = enc(batch["src_tokens"], batch["src_lengths"])
        for b in range(2):
            words = batch["src_tokens"][b][batch["src_tokens"][b].ne(task.source_dictionary.pad())]
            h = torch.zeros(enc.hidden_size, dtype=torch.double)
            for w in reversed(words.tolist()):  # x_Tx .. x_1
                x = enc.embed_tokens.weight[w]
                h = gru_update(enc.backward_gru.W(x), h, *enc.backward_gru.recurrent_weights())
            torch.testing.assert_close(out["backward_first"][b], h, rtol=0, atol=1e-12)
            s0, _, _ = _by_hand_steps(model, batch, b, 1)
            torch.testing.assert_close(s0, torch.tanh(dec.W_s(h)), rtol=0, atol=1e-12)
        _, extra = model(batch["src_tokens"], batch["src_lengths"], batch["prev_output_tokens"])
    # the first alignment differs if s_0 came from the forward state instead
    forward_h1 = out["encoder_out"][0][batch["src_tokens"][0].ne(task.source_dictionary.pad())][-1, :enc.hidden_size]
    score = dec.attention.score
    keys = score.W_k(out["encoder_out"][0][batch["src_tokens"][0].ne(task.source_dictionary.pad())])
    wrong = torch.softmax(score.v_a(torch.tanh(score.W_q(torch.tanh(dec.W_s(forward_h1))) + keys)).squeeze(-1), 0)
    got = extra["attn"][0][0, 0][batch["src_tokens"][0].ne(task.source_dictionary.pad())]
    assert (got - wrong).abs().max() > 1e-6


def test_deep_output_state_flag_changes_the_output():
    """The two readings of the paper (appendix A.2.2: s_{i-1}; eq. 4: s_i) are different models."""
    torch.manual_seed(3)
    previous, task = _model("--deep-output-state", "previous")
    current, _ = _model("--deep-output-state", "current")
    current.load_state_dict(previous.state_dict())
    batch = random_batch(task, bsz=2, srclens=(5, 3), tgtlens=(4, 4), seed=6)
    with torch.no_grad():
        a = previous(batch["src_tokens"], batch["src_lengths"], batch["prev_output_tokens"])[0]
        b = current(batch["src_tokens"], batch["src_lengths"], batch["prev_output_tokens"])[0]
    assert (F.log_softmax(a, -1) - F.log_softmax(b, -1)).abs().max() > 1e-4
