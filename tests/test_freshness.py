"""The recipes' freshness rule (examples/common/freshness.py), on its functions: stamps,
keys, stale reasons, raw inputs named by content. Milliseconds each; the recipes' bash calls
the same code (tests/test_recipes.py runs it through the shell once)."""
import os
import subprocess
import sys

import pytest

from tests.helpers import REPO, load_file

F = load_file("examples/common/freshness.py")

T2001 = 978307200 * 10**9  # 2001-01-01, in nanoseconds


def folder(tmp_path, files):
    d = tmp_path / "d"
    d.mkdir(exist_ok=True)
    for name, text in files.items():
        (d / name).parent.mkdir(parents=True, exist_ok=True)
        (d / name).write_text(text)
    (d / ".done").touch()
    return d


def test_fresh_for_its_key_and_its_files_as_stamped_or_their_content(tmp_path):
    d = folder(tmp_path, {"x": "a\n", "y": "b\n", "sub/z": "c\n"})
    done = str(d / ".done")
    F.stamp(done, "options --lr 1\ndata raw#1")
    assert F.fresh(done, "options --lr 1\ndata raw#1")
    assert not F.fresh(done, "options --lr 2\ndata raw#1")
    assert F.stale_reason(done, "options --lr 2\ndata raw#1") == "made with other options"
    assert F.stale_reason(done, "options --lr 1\ndata raw#2") == "made from other data"
    assert F.stale_reason(done, "options --lr 1\ndata raw#1\ncode train 1234") == "made by other code (train)"
    (d / "y").write_text("B\n")  # an edit, same size
    assert F.stale_reason(done, "options --lr 1\ndata raw#1") == "changed since it was made"
    (d / "y").write_text("b\n")  # the same content again, another time: a copy, a restore
    os.utime(d / "y", ns=(T2001, T2001))
    assert F.fresh(done, "options --lr 1\ndata raw#1")
    (d / "sub" / "z").unlink()  # partly deleted
    assert F.stale_reason(done, "options --lr 1\ndata raw#1") == "changed since it was made"
    assert F.stale_reason(str(tmp_path / "nothing"), "k") == "missing"


def test_what_a_stamp_covers_leaves_out_keys_markers_logs_parts_and_the_lock(tmp_path):
    d = folder(tmp_path, {"model.pt": "w"})
    F.stamp(str(d / ".done"), "k")
    before = F.ident(str(d / ".done"))
    for name in ("train.log", "x.part", "other.key", ".fairseq_luong.lock"):
        (d / name).write_text("noise")
    assert F.fresh(str(d / ".done"), "k") and F.ident(str(d / ".done")) == before
    (d / "extra.pt").write_text("w")
    assert not F.fresh(str(d / ".done"), "k")


def test_ids_follow_content_and_a_key_may_hold_other_stamps(tmp_path):
    d = folder(tmp_path, {"x": "a\n"})
    done = str(d / ".done")
    F.stamp(done, "k")
    first = F.ident(done)
    F.stamp(done, "k")
    assert F.ident(done) == first  # the same content, the same id
    (d / "x").write_text("c\n")
    F.stamp(done, "k")
    assert F.ident(done) != first
    nested = (d / ".done.key").read_text().rstrip("\n") + "\nmore"
    f = tmp_path / "f"
    f.write_text("z")
    F.stamp(str(f), nested)
    assert F.recorded(str(f)) == nested and F.fresh(str(f), nested)
    assert F.stamp_field(str(f), "over") == [str(f)]  # the last stamp is f's own
    raw = tmp_path / "raw.txt"
    raw.write_text("text")
    assert F.ident(str(raw)) == f"{raw}#{F.file_sha1(str(raw))[:16]}"  # not stamped: its content


def test_the_stamps_are_those_the_shell_pipeline_wrote(tmp_path):
    """Work folders stamped before the rule moved to Python stay fresh: stat and id are the
    hashes GNU find/stat/sha1sum gave (the pipeline recipe.sh ran, run here on the same files)."""
    d = folder(tmp_path, {"a b.txt": "1\n", "sub/x.bin": "22\n", "sub/y": "", "B": "3"})
    for i, p in enumerate(sorted(d.rglob("*"))):
        if p.is_file():
            os.utime(p, ns=(T2001 + i * 123456789, T2001 + i * 123456789))
    one = tmp_path / "one.json"
    one.write_text("{}")
    skip = "! -name '*.key' ! -name '.done' ! -name '*.part' ! -name '*.log' ! -name '.fairseq_luong.lock'"
    script = f"""
        {{ (cd {d} && find . -type f {skip} -printf '%p %s %T@\\n' | LC_ALL=C sort); stat -c '. %s %Y' {one}; }} \\
            | sha1sum | cut -c1-16
        {{ (cd {d} && find . -type f {skip} -print0 | LC_ALL=C sort -z | xargs -0 -r sha1sum); sha1sum < {one}; }} \\
            | sha1sum | cut -c1-16"""
    stat, content = subprocess.run(["bash", "-c", script], capture_output=True, text=True, check=True).stdout.split()
    assert F.stat_hash([str(d), str(one)]) == stat
    assert F.content_hash([str(d), str(one)]) == content


def test_raw_inputs_are_keyed_by_content_and_keys_of_before_still_match(tmp_path):
    """A corpus copied again (new times, same bytes) changes no key; a key recorded before,
    PATH SIZE MTIME, matches PATH SIZE HASH of the same path and size, and nothing else."""
    a = tmp_path / "train.en"
    a.write_text("one sentence\n")
    key = F.data_key([str(a)])
    assert key == f"{a} 13 {F.file_sha1(str(a))[:16]} "
    os.utime(a, ns=(T2001, T2001))
    assert F.data_key([str(a)]) == key
    a.write_text("one sentenCe\n")
    assert F.data_key([str(a)]) != key
    legacy = f"vocab 8000 data: {a} 13 1795704254 "
    assert F.same_key(legacy, f"vocab 8000 data: {F.data_key([str(a)])}")
    assert not F.same_key(legacy, f"vocab 4000 data: {F.data_key([str(a)])}")  # other options
    assert not F.same_key(f"vocab 8000 data: {a} 14 1795704254 ", f"vocab 8000 data: {F.data_key([str(a)])}")
    assert not F.same_key(f"vocab 8000 data: {a}x 13 1795704254 ", f"vocab 8000 data: {F.data_key([str(a)])}")


def test_the_hash_cache_reads_a_file_once_and_again_when_it_changes(tmp_path, monkeypatch):
    a, cache = tmp_path / "big.de", str(tmp_path / "work" / ".input_hashes")
    a.write_text("x" * 1000)
    reads = []
    real = F.file_sha1
    monkeypatch.setattr(F, "file_sha1", lambda p: reads.append(p) or real(p))
    first = F.data_key([str(a)], cache)
    assert F.data_key([str(a)], cache) == first and len(reads) == 1
    a.write_text("y" * 1000)
    assert F.data_key([str(a)], cache) != first and len(reads) == 2


def test_same_or_refuse_names_what_differs_and_accepts_a_key_of_before(tmp_path):
    options = tmp_path / "sys" / "options"
    assert F.same_or_refuse(str(options), "--arch a --max-update 4", "system s") is None
    assert options.read_text() == "--arch a --max-update 4\n"
    assert F.same_or_refuse(str(options), "--arch a --max-update 4", "system s") is None
    message = F.same_or_refuse(str(options), "--arch a --max-update 6", "system s")
    assert message.split("\n") == ["system s was made with other options:", "  before: --max-update 4",
                                   "  now:    --max-update 6"]
    assert options.read_text() == "--arch a --max-update 4\n"  # untouched
    raw = tmp_path / "train.en"
    raw.write_text("a\n")
    prepared = tmp_path / "prepared.options"
    prepared.write_text(f"vocab 8000 data: {raw} 2 1795704254 \n")  # the words of before
    assert F.same_or_refuse(str(prepared), f"vocab 8000 data: {F.data_key([str(raw)])}", "data") is None


TRAINED = r"--arch lstm --adam-betas \(0.9\,\ 0.98\) --max-epoch 9 --seed 1 --stop-time-hours 8  data: bin/.done#0850"


@pytest.mark.parametrize("now,raised", [
    (TRAINED.replace("--max-epoch 9", "--max-epoch 20"), ["--max-epoch 9 -> 20"]),
    (TRAINED.replace("--max-epoch 9", "--max-epoch 0"), ["--max-epoch 9 -> 0"]),  # 0: no bound
    (TRAINED.replace("hours 8 ", "hours 8.5 "), ["--stop-time-hours 8 -> 8.5"]),  # the last option
    (TRAINED.replace("epoch 9", "epoch 12").replace("hours 8 ", "hours 10 "),
     ["--max-epoch 9 -> 12", "--stop-time-hours 8 -> 10"]),
    (TRAINED.replace("--max-epoch 9", "--max-epoch 5"), None),  # lowered
    (TRAINED.replace("--max-epoch 9", "--max-epoch x"), None),
    (TRAINED.replace("epoch 9", "epoch 20").replace("seed 1", "seed 2"), None),  # and another option
    (TRAINED.replace("epoch 9", "epoch 20").replace("#0850", "#0851"), None),  # and other data
    (TRAINED.replace("epoch 9", "epoch 20").replace("--arch lstm", "--arch lstm --max-epoch 30"), None),
    (TRAINED.replace("epoch 9", "epoch 20") + " --quantization-config-path q.yaml", None),  # reads --max-epoch
    (TRAINED.replace("--seed 1", "--seed 10"), None),
])
def test_a_training_takes_only_a_raised_stopping_bound(now, raised):
    assert F.raised_bounds(TRAINED, now) == raised
    assert F.raised_bounds(TRAINED, now, bounds=()) is None


def test_same_or_refuse_with_bounds_takes_a_raised_bound_and_only_with_them(tmp_path):
    options = tmp_path / "sys" / "options"
    assert F.same_or_refuse(str(options), TRAINED, "system s", F.BOUNDS) is None
    longer = TRAINED.replace("--max-epoch 9", "--max-epoch 20")
    assert "made with other options" in F.same_or_refuse(str(options), longer, "system s")  # no bounds
    assert options.read_text() == TRAINED + "\n"
    assert F.same_or_refuse(str(options), longer, "system s", F.BOUNDS) is None
    assert options.read_text() == longer + "\n"
    back = F.same_or_refuse(str(options), TRAINED, "system s", F.BOUNDS)
    assert "before: --max-epoch 20" in back and "now:    --max-epoch 9" in back


def test_the_command_line_is_what_recipe_sh_calls(tmp_path):
    # as recipe.sh runs it: python -S, the standard library only
    run = [sys.executable, "-S", str(REPO / "examples" / "common" / "freshness.py")]
    out = tmp_path / "out.txt"
    out.write_text("x")

    def call(*args, key=None):
        return subprocess.run([*run, *args], input=key, capture_output=True, text=True)

    assert call("stamp", str(out), key="k1\n").returncode == 0
    assert call("fresh", str(out), key="k1").returncode == 0 and call("fresh", str(out), key="k2").returncode == 1
    assert call("stale-reason", str(out), key="code score 12").stdout == "made by other code (score)\n"
    assert call("recorded", str(out)).stdout == "k1\n"
    assert call("same-or-refuse", str(tmp_path / "o"), "it", key="a").returncode == 0
    refused = call("same-or-refuse", str(tmp_path / "o"), "it", key="b")
    assert refused.returncode == 3 and "  before: a" in refused.stdout
    assert call("same-or-refuse", str(tmp_path / "t"), "it", "--bounds", key="x --max-epoch 2").stdout == ""
    raised = call("same-or-refuse", str(tmp_path / "t"), "it", "--bounds", key="x --max-epoch 3")
    assert raised.returncode == 0 and raised.stdout == "raised --max-epoch 2 -> 3\n"
    assert call("same-or-refuse", str(tmp_path / "t"), "it", key="x --max-epoch 4").returncode == 3
    assert call("ident", str(out), str(tmp_path / "o")).stdout.splitlines() == [F.ident(str(out)),
                                                                                 F.ident(str(tmp_path / "o"))]
    missing = call("data-key", str(tmp_path / "no.en"))
    assert missing.returncode == 1
    assert missing.stderr == f"error: cannot read {tmp_path / 'no.en'}: No such file or directory\n"


def test_freshness_needs_neither_fairseq_nor_torch():
    code = ("import sys; sys.path.insert(0, 'examples/common'); import freshness; "
            "print(sorted({'fairseq', 'torch'} & set(sys.modules)))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=REPO).stdout
    assert out == "[]\n"
