"""End to end through fairseq's own CLI with --user-dir: preprocess -> train -> generate
(beam 3, --print-alignment) -> interactive, for every arch; ensembles; resuming; checkpoints."""
import re
import sys

import pytest

from tests.helpers import LUONG_ARCHS, REPO, USER_DIR, bin_path, run

TINY = ["--encoder-embed-dim", "16", "--encoder-hidden-size", "16",
        "--decoder-embed-dim", "16", "--decoder-hidden-size", "16", "--location-max-len", "40"]
RNNSEARCH_TINY = ["--encoder-embed-dim", "16", "--encoder-hidden-size", "16", "--decoder-embed-dim", "16",
                  "--decoder-hidden-size", "16", "--init-uniform", "0.1"]
TRAIN = ["--optimizer", "adam", "--lr", "0.005", "--max-tokens", "1500",
         "--criterion", "label_smoothed_cross_entropy", "--label-smoothing", "0.1",
         "--no-epoch-checkpoints", "--num-workers", "0", "--seed", "1", "--log-format", "simple",
         "--log-interval", "1", "--disable-validation"]


@pytest.fixture(scope="session")
def data_bin(tmp_path_factory):
    root = tmp_path_factory.mktemp("numbers")
    run([sys.executable, str(REPO / "scripts" / "make_number_corpus.py"), "--out", str(root / "raw"),
         "--train", "400", "--valid", "40", "--test", "12", "--seed", "3"])
    run([bin_path("fairseq-preprocess"), "-s", "en", "-t", "de", "--trainpref", str(root / "raw/train"),
         "--validpref", str(root / "raw/valid"), "--testpref", str(root / "raw/test"),
         "--destdir", str(root / "bin"), "--joined-dictionary", "--workers", "1"])
    return root


_TRAINED = {}


def train(data_bin, arch, updates=4, save_dir=None, extra=()):
    save_dir = save_dir or data_bin / f"ckpt_{arch}"
    proc = run([bin_path("fairseq-train"), str(data_bin / "bin"), "--user-dir", USER_DIR,
                "--arch", arch, *(RNNSEARCH_TINY if arch.startswith("rnnsearch") else TINY), *TRAIN,
                "--max-update", str(updates),
                "--save-dir", str(save_dir), *extra])
    return save_dir / "checkpoint_last.pt", proc


def trained(data_bin, arch):
    if arch not in _TRAINED:
        _TRAINED[arch] = train(data_bin, arch)[0]
    return _TRAINED[arch]


def check_generate_output(out, n_sentences, alignments=True):
    hyps = re.findall(r"^H-(\d+)\t\S+\t(.*)$", out, re.M)
    aligns = dict(re.findall(r"^A-(\d+)\t(.*)$", out, re.M))
    srcs = dict(re.findall(r"^S-(\d+)\t(.*)$", out, re.M))
    assert len(hyps) == n_sentences, out[-2000:]
    assert len(aligns) == (n_sentences if alignments else 0)
    for sid, hyp in hyps if alignments else []:
        n_src, n_hyp = len(srcs[sid].split()), len(hyp.split())
        for link in aligns[sid].split():
            s, t = map(int, link.split("-"))
            assert 0 <= s < n_src and 0 <= t < n_hyp, (link, srcs[sid], hyp)
    return hyps


@pytest.mark.parametrize("arch", LUONG_ARCHS + ["rnnsearch_tiny"])
def test_train_generate_interactive(data_bin, arch):
    ckpt = trained(data_bin, arch)
    align = [] if arch == "luong_base" else ["--print-alignment"]
    gen = run([bin_path("fairseq-generate"), str(data_bin / "bin"), "--user-dir", USER_DIR,
               "--path", str(ckpt), "--beam", "3", "--batch-size", "5", *align, "--max-len-b", "20"])
    # all 12 test sentences, although 12 is no multiple of 8 (fairseq issue #5036)
    check_generate_output(gen.stdout, 12, alignments=bool(align))
    inter = run([bin_path("fairseq-interactive"), str(data_bin / "bin"), "--user-dir", USER_DIR,
                 "--path", str(ckpt), "-s", "en", "-t", "de", "--beam", "3", *align,
                 "--max-len-b", "20", "--buffer-size", "2"],
                input="twenty one cats\nfour hundred\n\n")
    assert len(re.findall(r"^H-\d+\t", inter.stdout, re.M)) == 3


def test_print_alignment_without_attention_is_a_clear_error(data_bin):
    with pytest.raises(AssertionError, match="has no attention"):
        run([bin_path("fairseq-generate"), str(data_bin / "bin"), "--user-dir", USER_DIR,
             "--path", str(trained(data_bin, "luong_base")), "--print-alignment"])


def test_relative_user_dir_from_repository_root(data_bin):
    ckpt = trained(data_bin, "luong_localp")
    proc = run([bin_path("fairseq-generate"), str(data_bin / "bin"), "--user-dir", "fairseq_luong",
                "--path", str(ckpt), "--beam", "2", "--max-len-b", "10"], cwd=str(REPO))
    check_generate_output(proc.stdout, 12, alignments=False)


@pytest.mark.parametrize("archs", [("luong_localp", "luong_global_dot"), ("rnnsearch_tiny", "luong_localp")])
def test_ensemble_of_two_different_archs_decodes(data_bin, archs):
    paths = ":".join(str(trained(data_bin, a)) for a in archs)
    proc = run([bin_path("fairseq-generate"), str(data_bin / "bin"), "--user-dir", USER_DIR,
                "--path", paths, "--beam", "3", "--print-alignment", "--max-len-b", "20"])
    check_generate_output(proc.stdout, 12)


def test_training_resumes_from_checkpoint_last(data_bin, tmp_path):
    ckpt, _ = train(data_bin, "luong_global_general", updates=3, save_dir=tmp_path)
    _, proc = train(data_bin, "luong_global_general", updates=6, save_dir=tmp_path)
    log = proc.stdout + proc.stderr
    assert re.search(r"Loaded checkpoint .*checkpoint_last\.pt \(epoch \d+ @ 3 updates\)", log), log[-3000:]
    assert "num_updates=6" in log or "num_updates 6" in log


@pytest.mark.parametrize("arch", ["luong_global_general", "rnnsearch_tiny"])
def test_fused_criterion_trains_like_fairseqs(data_bin, tmp_path, arch):
    """Same seed, same batches: fairseq-train logs the same losses and gradient norms
    (train, every update, and valid) with --criterion fused_label_smoothed_cross_entropy
    as with label_smoothed_cross_entropy."""
    sizes = RNNSEARCH_TINY if arch.startswith("rnnsearch") else TINY
    logs = []
    for criterion, extra in (("label_smoothed_cross_entropy", []),
                             ("fused_label_smoothed_cross_entropy", ["--loss-chunk-tokens", "100"])):
        flags = [criterion if f == "label_smoothed_cross_entropy" else f for f in TRAIN
                 if f != "--disable-validation"]
        proc = run([bin_path("fairseq-train"), str(data_bin / "bin"), "--user-dir", USER_DIR,
                    "--arch", arch, *sizes, *flags, *extra, "--max-update", "5",
                    "--save-dir", str(tmp_path / criterion)])
        log = proc.stdout + proc.stderr
        updates = re.findall(r"train_inner .* loss=([0-9.]+), nll_loss=([0-9.]+).* gnorm=([0-9.]+)", log)
        valid = re.findall(r"valid on 'valid' subset \| loss ([0-9.]+) \| nll_loss ([0-9.]+)", log)
        assert len(updates) == 5 and len(valid) == 1, log[-3000:]
        logs.append((updates, valid))
    (ref_updates, ref_valid), (updates, valid) = logs
    for ref, got in zip(ref_updates + ref_valid, updates + valid):
        assert [float(x) for x in got] == pytest.approx([float(x) for x in ref], abs=2e-3)


def test_corrupt_checkpoint_is_a_clear_error(data_bin, tmp_path):
    bad = tmp_path / "checkpoint_last.pt"
    bad.write_bytes(trained(data_bin, "luong_tiny").read_bytes()[:5000])
    with pytest.raises(AssertionError) as err:
        run([bin_path("fairseq-generate"), str(data_bin / "bin"), "--user-dir", USER_DIR,
             "--path", str(bad), "--beam", "2"])
    msg = str(err.value)
    assert f"cannot load checkpoint {bad}" in msg and "truncated or corrupt" in msg
