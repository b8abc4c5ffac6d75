"""Hoisted products stay hoisted: operation counts with a TorchDispatchMode.

Each decoder computes some products once per call (or once per sentence) instead of
once per target step. These tests count the matrix products (aten mm / addmm / bmm /
baddbmm) that read a given parameter, for targets of two lengths: a product that
moved back into the per-step loop would be counted once per step and fail them.
"""
from collections import Counter

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from fairseq_luong.modules.steps import beam_rows
from tests.helpers import build_model, random_batch

aten = torch.ops.aten
GEMMS = {aten.mm, aten.addmm, aten.addmm_, aten.bmm, aten.baddbmm}
SIZES = ["--encoder-embed-dim", "6", "--encoder-hidden-size", "5", "--decoder-embed-dim", "7",
         "--decoder-hidden-size", "5", "--encoder-layers", "2", "--decoder-layers", "2"]


def _key(t):
    """A tensor's place in memory, whatever view of it (e.g. transposed) an op reads."""
    return t.untyped_storage().data_ptr(), t.storage_offset(), tuple(sorted(t.shape))


class CountReads(TorchDispatchMode):
    """Counts, per watched tensor, the ops of ``ops`` that read it."""

    def __init__(self, watched, ops):
        super().__init__()
        self.names = {_key(t): name for name, t in watched.items()}
        self.ops = ops
        self.count = Counter()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if func.overloadpacket in self.ops:
            flat = [a for a in args if isinstance(a, torch.Tensor)]
            flat += [a for a in args if isinstance(a, (list, tuple)) for a in a if isinstance(a, torch.Tensor)]
            for a in flat:
                name = self.names.get(_key(a))
                if name is not None:
                    self.count[name] += 1
        return func(*args, **(kwargs or {}))


def count(model, run, watched, ops=GEMMS):
    with CountReads(watched, ops) as counter:
        run()
    return counter.count


def luong_hoisted(model):
    """What the Luong decoder computes once per call: the score's keys (W_a h̄_s) and,
    with input feeding, layer 0's embedding gates (the embedding columns of W_ih)."""
    dec = model.decoder
    score = dec.attention.score
    watched = {"keys": score.W_a.weight if hasattr(score, "W_a") else score.W_k.weight}
    if dec.input_feed:
        watched["embedding gates"] = dec.layers[0].weight_ih_l0[:, : dec.embed_tokens.embedding_dim]
    return watched


@pytest.mark.parametrize("arch,extra", [
    ("luong_global_general", []),
    ("luong_global_concat", []),
    ("luong_localp", []),
    ("luong_localm", ["--attention-score", "concat"]),
    ("luong_global_general", ["--no-input-feed"]),
])
@pytest.mark.parametrize("mode", ["train", "eval"])
def test_hoisted_products_run_once_per_call_whatever_the_length(arch, extra, mode):
    torch.manual_seed(0)
    model, task, _ = build_model(arch, *SIZES, *extra)
    model.train(mode == "train")
    for tgtlen in (3, 8):
        batch = random_batch(task, srclens=(9, 5, 2), tgtlens=(tgtlen,) * 3)

        def run():
            with torch.set_grad_enabled(mode == "train"):
                model(batch["src_tokens"], batch["src_lengths"], batch["prev_output_tokens"])

        watched = luong_hoisted(model)
        assert count(model, run, watched) == {name: 1 for name in watched}, tgtlen


def test_training_builds_fused_gate_weights_once_per_call_and_inference_never():
    """[W_in W_hh] is concatenated once per layer and call in training (one gate GEMM
    per layer and step); in inference the steps read the parameters (no copy at all)."""
    torch.manual_seed(0)
    model, task, _ = build_model("luong_global_general", *SIZES)
    watched = {f"W_hh{i}": layer.weight_hh_l0 for i, layer in enumerate(model.decoder.layers)}
    for tgtlen in (3, 8):
        batch = random_batch(task, srclens=(9, 5, 2), tgtlens=(tgtlen,) * 3)

        def run():
            model(batch["src_tokens"], batch["src_lengths"], batch["prev_output_tokens"])

        model.train()
        assert count(model, run, watched, {aten.cat}) == {"W_hh0": 1, "W_hh1": 1}
        model.eval()
        with torch.no_grad():
            assert count(model, run, watched, {aten.cat, aten.copy_, aten.clone}) == {}
            assert count(model, run, watched) == {"W_hh0": tgtlen, "W_hh1": tgtlen}


@pytest.mark.parametrize("arch", ["luong_global_general", "luong_localp", "luong_global_concat", "rnnsearch_tiny"])
def test_incremental_decoding_computes_keys_once_per_sentence(arch):
    torch.manual_seed(0)
    model, task, _ = build_model(arch, *([] if arch.startswith("rnnsearch") else SIZES))
    model.eval()
    batch = random_batch(task, srclens=(9, 5, 2), tgtlens=(6, 6, 6))
    prev = batch["prev_output_tokens"]

    def run():
        with torch.no_grad():
            enc = model.encoder(batch["src_tokens"], batch["src_lengths"])
            state = {}
            for t in range(prev.size(1)):
                if t == 2:  # beam search reorders the cached keys, never recomputes them
                    order = torch.tensor([2, 0, 1])
                    enc = model.encoder.reorder_encoder_out(enc, order)
                    model.decoder.reorder_incremental_state_scripting(state, order)
                model.decoder(prev[:, : t + 1], encoder_out=enc, incremental_state=state)

    hoisted = rnnsearch_hoisted(model) if arch.startswith("rnnsearch") else luong_hoisted(model)
    assert count(model, run, hoisted)["keys"] == 1


def rnnsearch_hoisted(model):
    """What RNNsearch computes once per call: both encoder directions' input products,
    the decoder GRU's embedding input products, the keys U_a h_j and the deep output."""
    enc, dec = model.encoder, model.decoder
    E = dec.embed_tokens.embedding_dim
    return {
        "encoder forward W": enc.forward_gru.W.weight,
        "encoder backward W": enc.backward_gru.W.weight,
        "decoder embedding gates": dec.gru.W.weight[:, :E],
        "keys": dec.attention.score.W_k.weight,
        "U_o": dec.U_o.weight,
        "V_o": dec.V_o.weight,
        "C_o": dec.C_o.weight,
    }


@pytest.mark.parametrize("mode", ["train", "eval"])
def test_rnnsearch_hoisted_products_run_once_per_call_whatever_the_length(mode):
    torch.manual_seed(0)
    model, task, _ = build_model("rnnsearch_tiny", "--decoder-embed-dim", "7", "--maxout-dim", "3")
    model.train(mode == "train")
    for srclen, tgtlen in ((4, 3), (9, 8)):
        batch = random_batch(task, srclens=(srclen, 2, 3), tgtlens=(tgtlen, 2, tgtlen))

        def run():
            with torch.set_grad_enabled(mode == "train"):
                model(batch["src_tokens"], batch["src_lengths"], batch["prev_output_tokens"])

        watched = rnnsearch_hoisted(model)
        assert count(model, run, watched) == {name: 1 for name in watched}, tgtlen


# ATen operations that make a GPU's host wait for the device: a value read back (item, bool, int:
# _local_scalar_dense), a comparison read back (equal), and outputs whose size depends on the data
SYNCS = {aten._local_scalar_dense, aten.equal, aten.nonzero, aten.masked_select, aten._unique2,
         aten.unique_consecutive, aten.unique_dim}


class CountSyncs(TorchDispatchMode):
    """Counts the host synchronisations of SYNCS, boolean-mask indexing (a nonzero inside) and
    the Tensor methods that copy to the host (on the CPU they dispatch nothing: patched)."""

    def __init__(self, monkeypatch):
        super().__init__()
        self.count = Counter()
        for name in ("tolist", "cpu", "numpy"):
            method = getattr(torch.Tensor, name)
            monkeypatch.setattr(torch.Tensor, name, self._counted(name, method))

    def _counted(self, name, method):
        def counted(tensor, *args, **kwargs):
            self.count[name] += 1
            return method(tensor, *args, **kwargs)
        return counted

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        packet = func.overloadpacket
        if packet in SYNCS or (packet is aten.index and any(
                isinstance(i, torch.Tensor) and i.dtype == torch.bool for i in args[1])):
            self.count[str(packet)] += 1
        return func(*args, **(kwargs or {}))


@pytest.mark.parametrize("arch,extra", [
    ("luong_global_general", []),
    ("luong_global_location", []),
    ("luong_localp", []),
    ("luong_localm", []),
    ("luong_global_general", ["--no-input-feed"]),
    ("rnnsearch_tiny", None),
])
def test_no_host_synchronisation_inside_the_step_loops(arch, extra, monkeypatch):
    """Issue 38's "no host synchronisation in the loop": training (forward and backward) and
    inference read values back to the host a fixed number of times per call, whatever the
    target length (the encoder's lengths, the active rows), and an incremental decoding step
    (a beam step) never on a GPU. There such a read stalls the launches until the device
    catches up; on the CPU beam search's reorder reads its order (``steps/beam_rows.py``)."""
    torch.manual_seed(0)
    model, task, _ = build_model(arch, *(SIZES + extra if extra is not None else []))
    for mode in ("train", "eval"):
        model.train(mode == "train")
        counts = []
        for tgtlen in (3, 8):
            batch = random_batch(task, srclens=(9, 5, 2), tgtlens=(tgtlen, 2, tgtlen))
            with monkeypatch.context() as patches, CountSyncs(patches) as syncs:
                with torch.set_grad_enabled(mode == "train"):
                    out, _ = model(batch["src_tokens"], batch["src_lengths"], batch["prev_output_tokens"])
                    if mode == "train":
                        out.sum().backward()
            counts.append(syncs.count)
        assert counts[0] == counts[1] and sum(counts[0].values()) > 0, (mode, counts)  # > 0: the counter sees
    model.eval()
    batch = random_batch(task, srclens=(9, 5, 2), tgtlens=(6, 6, 6))
    prev = batch["prev_output_tokens"]
    # as on a GPU: the reorder reads new_order on the host only on the CPU (steps/beam_rows.py)
    monkeypatch.setattr(beam_rows, "reads_order_on_host", lambda new_order: False)
    with torch.no_grad():
        enc = model.encoder(batch["src_tokens"], batch["src_lengths"])
        state = {}
        for t in range(prev.size(1)):
            with monkeypatch.context() as patches, CountSyncs(patches) as syncs:
                if t == 2:  # a beam search's reorder is part of its step
                    order = torch.tensor([2, 0, 1])
                    enc = model.encoder.reorder_encoder_out(enc, order)
                    model.decoder.reorder_incremental_state_scripting(state, order)
                model.decoder(prev[:, : t + 1], encoder_out=enc, incremental_state=state)
            assert syncs.count == {}, (t, syncs.count)
