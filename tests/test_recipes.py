"""The recipes in examples/ run end to end on tiny local inputs: preparation, a few
training updates, translation and scoring, and the recipe rules (skip what is done,
refuse a changed configuration, name missing inputs, download nothing with a data dir)."""
import json
import os
import shutil
import struct
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

import fairseq_luong  # noqa: F401  (checkpoint allowlist for torch.load)
from tests.helpers import REPO, SHARED_DATA, load_file, make_wmt14_release

machine = load_file("scripts/bench/machine.py")

MULTI30K = SHARED_DATA / "multi30k_en_de"
TINY = ["--encoder-embed-dim", "16", "--decoder-embed-dim", "16", "--encoder-hidden-size", "16",
        "--decoder-hidden-size", "16", "--encoder-layers", "2", "--decoder-layers", "2"]


def option(cfg, section, key):
    """A training option stored in a checkpoint (sections are dicts or, for archs
    registered the argparse way, Namespaces)."""
    part = cfg[section]
    return part[key] if isinstance(part, dict) else getattr(part, key)


def png_size(path):
    """(width, height) of a PNG file (its IHDR chunk)."""
    data = Path(path).read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 2000, path
    return struct.unpack(">II", data[16:24])


def table_rows(text):
    """{first cell: [cells]} of the rows of a markdown table."""
    rows = [[c.strip() for c in line.strip().strip("|").split("|")] for line in text.splitlines()
            if line.startswith("| ") and not line.startswith("|---")]
    return {r[0]: r for r in rows}


def recipe(name, *args, check=True, path_prefix=None, env=None):
    env = dict(os.environ, PYTHONWARNINGS="ignore", OMP_NUM_THREADS="1", **(env or {}))
    env["PATH"] = os.pathsep.join(p for p in (path_prefix, str(Path(sys.executable).parent),
                                              env["PATH"]) if p)
    proc = subprocess.run(["bash", str(REPO / "examples" / name / "run.sh"), *map(str, args)],
                          capture_output=True, text=True, env=env)
    if check and proc.returncode != 0:
        raise AssertionError(f"{name} {' '.join(map(str, args))} failed ({proc.returncode}):\n"
                             f"{proc.stdout[-3000:]}\n{proc.stderr[-6000:]}")
    return proc


# --------------------------------------------------------------------------- freshness


def shell(script, tmp_path, repo=REPO):
    """Run bash ``script`` with examples/common/recipe.sh sourced (REPO = ``repo``); its stdout."""
    proc = subprocess.run(["bash", "-c", f"set -euo pipefail; REPO={repo}; RECIPE=test; "
                           f"source {repo}/examples/common/recipe.sh; cd {tmp_path}; {script}"],
                          capture_output=True, text=True,
                          env=dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"))
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def test_a_derived_file_is_fresh_only_for_its_key_and_its_files_as_stamped(tmp_path):
    """fresh/stamp (examples/common/recipe.sh, through fairseq_luong/recipes/freshness.py):
    another key, a changed or partly deleted output, the same content written again (a
    copy: fresh), a key holding other stamps; an output made again gets another id."""
    out = shell("""mkdir -p d; echo a > d/x; echo b > d/y; touch d/.done
        stamp d/.done "k1"; fresh d/.done k1 && echo fresh; fresh d/.done k2 || echo other-key
        ident d/.done > id1; rm d/y; fresh d/.done k1 || echo partly-deleted
        echo B > d/y; touch -d '2001-01-01' d/y; fresh d/.done k1 || echo changed
        echo b > d/y; touch -d '2001-01-01' d/y; fresh d/.done k1 && echo same-content
        stamp d/.done "k1"; fresh d/.done k1 && echo fresh-again; ident d/.done > id2
        echo c > d/y; stamp d/.done "k1"; ident d/.done > id3
        echo z > f; stamp f "$(cat d/.done.key)
        more"; fresh f "$(cat d/.done.key)
        more" && echo nested-fresh; stale_reason f "other" """, tmp_path)
    assert out.split("\n")[:7] == ["fresh", "other-key", "partly-deleted", "changed", "same-content",
                                   "fresh-again", "nested-fresh"]
    assert "made with other other" in out
    ids = [(tmp_path / f"id{i}").read_text() for i in (1, 2, 3)]
    assert ids[0] == ids[1] != ids[2]  # the same content, the same id; other content, another id


def test_remembered_idents_are_what_ident_computes_served_without_a_process(tmp_path):
    """remember_idents (for `table`, which keys each model in every row it is in): one
    freshness.py process for all the files, then ident answers from the shell for those files
    (here with freshness.py replaced by `false`) and only for those; a missing file is skipped."""
    out = shell("""mkdir -p d; echo a > d/x; touch d/.done; stamp d/.done k1; echo raw > 'r #1.txt'
        ident d/.done; ident 'r #1.txt'
        remember_idents d/.done 'r #1.txt' missing; echo "${#_IDENTS[@]} remembered"
        FRESHNESS=(false); ident d/.done; ident 'r #1.txt'; ident missing || echo missing-not-remembered""",
                tmp_path)
    lines = out.splitlines()
    assert lines[0].startswith("d/.done#") and lines[1].startswith("r #1.txt#") and len(set(lines[:2])) == 2
    assert lines[2:] == ["2 remembered", lines[0], lines[1], "missing-not-remembered"]


def test_an_output_without_a_stamp_is_missing_without_a_process(tmp_path):
    """fresh and stale_reason answer for an output without OUT.key from the shell (a table asks
    about every row's outputs, most not made yet): not fresh, "missing", here with freshness.py
    replaced by `echo ran`, reading the key; a stamped output still goes to freshness.py, run
    with python -S."""
    out = shell("""echo z > f; stamp f k; real=("${FRESHNESS[@]}")
        FRESHNESS=(bash -c 'cat > /dev/null; echo ran $0 $1')
        fresh nothing k || echo not-fresh; stale_reason nothing k; echo z > g; stale_reason g k; fresh f k
        FRESHNESS=("${real[@]}"); fresh f k && echo fresh; echo "${FRESHNESS[1]}" """, tmp_path)
    assert out.splitlines() == ["not-fresh", "missing", "missing", "ran fresh f", "fresh", "-S"]


def test_the_code_version_is_the_code_a_step_runs(tmp_path):
    """A README-only change leaves every code version; a change of a module the package
    imports, or of the chunk grammar beside the chunker, changes the versions that run them."""
    files = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard"], cwd=REPO,
                           capture_output=True, text=True, check=True).stdout.split()
    copy = tmp_path / "checkout"
    for f in files:
        (copy / f).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO / f, copy / f)
    versions = ("code_train; code_generate; "
                "code_version chunks $REPO/scripts/data/chunk_japanese.py; "
                "code_version text $REPO/scripts/data/normalize_text.py; "
                "code_version prepare $REPO/examples/wmt14_en_de/filter_pairs.py")
    before = shell(versions, tmp_path, copy).splitlines()
    assert len(set(before)) == 5 and all(v.startswith("code ") for v in before)
    for doc in ("README.md", "examples/wmt14_en_de/README.md", "tests/test_recipes.py", "examples/wmt14_en_de/run.sh"):
        (copy / doc).write_text((copy / doc).read_text() + "\n# a change\n")
    assert shell(versions, tmp_path, copy).splitlines() == before
    attention = copy / "fairseq_luong" / "modules" / "luong/attention.py"
    attention.write_text(attention.read_text() + "\n# a change\n")
    after = shell(versions, tmp_path, copy).splitlines()
    assert after[0] != before[0] and after[1] != before[1]  # training and translation
    assert after[4] == before[4]  # the WMT filter imports no model code
    grammar = copy / "fairseq_luong" / "data" / "ja_chunk_grammar.txt"
    grammar.write_text(grammar.read_text() + "\n# a change\n")
    assert shell(versions, tmp_path, copy).splitlines()[2] != after[2]
    changed = subprocess.run([sys.executable, str(copy / "examples" / "common" / "code_version.py"), "diff",
                              "/dev/null", str(copy / "scripts" / "data" / "chunk_japanese.py")],
                             capture_output=True, text=True).stdout
    assert "fairseq_luong/data/ja_chunk_grammar.txt (added)" in changed


def test_the_shared_code_versions_come_from_one_process(tmp_path):
    """warm_code_versions (every recipe's start): the four shared steps' versions from one
    code_version.py process (`hashes`), each what code_version computes alone, then served by
    the shell with python failing; `hashes` reads key_of's quoting (a path with a space)."""
    out = shell("""versions() { code_train; code_generate; code_score; code_version average "${CODE_AVERAGE[@]}"; }
        mapfile -t alone < <(versions); _CODE_VERSIONS=(); warm_code_versions; echo "${#_CODE_VERSIONS[@]} warm"
        python() { return 1; }
        mapfile -t warm < <(versions)
        unset -f python; [[ "${alone[*]}" == "${warm[*]}" ]] && echo same; printf '%s\\n' "${warm[@]}"
        mkdir -p 'a b'; echo 'import os' > 'a b/x.py'; cv="$REPO/examples/common/code_version.py"
        [[ "$(key_of "$PWD/a b/x.py" --dist sacrebleu | python "$cv" hashes)" == \\
           "$(python "$cv" hash "$PWD/a b/x.py" --dist sacrebleu)" ]] && echo quoted""", tmp_path)
    lines = out.splitlines()
    assert lines[:2] == ["4 warm", "same"] and lines[-1] == "quoted", out
    assert [line.split()[:2] for line in lines[2:6]] == [["code", n] for n in ("train", "generate", "score", "average")]
    assert len({line.split()[2] for line in lines[2:6]}) == 4


def test_the_code_version_finds_imports_in_every_kind_of_block(tmp_path):
    """code_version.py reads a file's imports wherever they are: in functions, methods, if/else,
    try/except/finally, with and match blocks (it walks statements, not every node)."""
    import runpy

    code_version = runpy.run_path(str(REPO / "examples" / "common" / "code_version.py"), run_name="code_version")
    modules = [f"analysis.{m}" for m in ("alignment", "bleu_by_length", "forced_attention", "generate_output",
                                          "plots", "segmentation", "text_files", "training_log")] + ["data.text"]
    a = [f"import fairseq_luong.{m}" for m in modules]
    source = textwrap.dedent(f"""\
        {a[0]}
        def f():
            {a[1]}
        class C:
            def m(self):
                if x:
                    pass
                else:
                    {a[2]}
        try:
            pass
        except ImportError:
            {a[3]}
        finally:
            {a[4]}
        with open("x") as f:
            for i in ():
                while y:
                    {a[5]}
        match z:
            case 1:
                {a[6]}
        async def g():
            async with h:
                {a[7]}
        lambda: 0
        x = [i for i in ()]
        if x:
            try:
                pass
            except* ValueError:
                {a[8]}
        """)
    (tmp_path / "m.py").write_text(source)
    files = set(code_version["imported"](str(tmp_path / "m.py")))
    wanted = {str(REPO / "fairseq_luong" / (m.replace(".", "/") + ".py")) for m in modules}
    assert all(os.path.isfile(f) for f in wanted) and wanted <= files, wanted - files


# --------------------------------------------------------------------------- Multi30k


def multi30k_slice(data, sizes):
    """The first sizes[split] pairs of each Multi30k split in ``data``."""
    if not (MULTI30K / "train.en").exists():
        pytest.skip("../shared/data/multi30k_en_de not present")
    for split, n in sizes.items():
        for lang in ("en", "de"):
            with open(MULTI30K / f"{split}.{lang}", encoding="utf-8") as f:
                (data / f"{split}.{lang}").write_text("".join(next(f) for _ in range(n)), encoding="utf-8")
    return data


@pytest.fixture(scope="module")
def multi30k(tmp_path_factory):
    """Tiny Multi30k (300 / 30 / 20 pairs), prepared and one system trained for 4 updates."""
    data = multi30k_slice(tmp_path_factory.mktemp("m30k_data"), {"train": 300, "valid": 30, "test": 20})
    work = tmp_path_factory.mktemp("m30k_work")
    opts = ["--data-dir", data, "--work-dir", work, "--vocab", 250, "--save-every", 2]
    prep = recipe("multi30k_en_de", *opts, "prepare")
    train = recipe("multi30k_en_de", *opts, "train", "luong_localp", "--", *TINY, "--max-update", 4)
    return data, work, opts, prep, train


def test_multi30k_prepare_train_eval(multi30k):
    data, work, opts, prep, train = multi30k
    assert "prepared in" in prep.stderr and (work / "data-bin" / "dict.en.txt").exists()
    # progress on the terminal: a line per validation and per epoch, and where the log is
    assert "[luong_localp] valid ppl" in train.stderr and "[luong_localp] epoch 1 done" in train.stderr
    assert str(work / "systems" / "luong_localp" / "train.log") in train.stderr
    again = recipe("multi30k_en_de", *opts, "prepare")
    assert "SentencePiece" not in again.stderr  # done: skipped
    assert "trained already" in recipe("multi30k_en_de", *opts, "train", "luong_localp", "--",
                                       *TINY, "--max-update", 4).stderr
    # the log names the machine of each start of the training (the run above, trained already, adds none)
    log = (work / "systems" / "luong_localp" / "train.log").read_text(encoding="utf-8")
    starts = [line for line in log.splitlines() if line.startswith("== ") and " machine: " in line]
    assert len(starts) == 1 and f" machine: {machine.describe_cpu()}; torch {torch.__version__} (" in starts[0]
    # the data copied again (new times, the same bytes: a restored backup, a machine that mounts
    # it afresh) changes no key: prepared and trained already (keys held times before)
    for f in data.iterdir():
        os.utime(f, ns=(f.stat().st_mtime_ns + 10**9 * 3600,) * 2)
    assert "SentencePiece" not in recipe("multi30k_en_de", *opts, "prepare").stderr
    assert "trained already" in recipe("multi30k_en_de", *opts, "train", "luong_localp", "--",
                                       *TINY, "--max-update", 4).stderr

    # the benchmark's luong systems drop out the attention memory like fairseq's lstm
    state = torch.load(sysdir_ckpt(work, "luong_localp"), weights_only=True)
    assert option(state["cfg"], "model", "encoder_memory_dropout") == 0.3

    ev = recipe("multi30k_en_de", *opts, "eval", "luong_localp")
    sysdir = work / "systems" / "luong_localp"
    hyps = (sysdir / "test.hyp").read_text(encoding="utf-8").splitlines()
    assert len(hyps) == 20 and "test sacreBLEU" in ev.stderr
    bleu = json.loads((sysdir / "bleu.json").read_text())
    assert bleu["name"] == "BLEU" and "tok:13a" in bleu["signature"]  # raw reference, 13a
    assert json.loads((sysdir / "valid.json").read_text())["ppl"] > 1
    curve = [line.split("\t") for line in (sysdir / "curve.tsv").read_text().splitlines()[1:]]
    assert [int(row[0]) for row in curve] == [2, 4]  # validated every 2 updates
    assert all(float(row[4]) > 1 for row in curve)
    # one heat map: the attention of test line 2 (the default --heatmap-line)
    assert f"heat map of test line 2: {sysdir / 'attention_2.png'}" in ev.stderr
    png_size(sysdir / "attention_2.png")

    proc = recipe("multi30k_en_de", *opts, "--systems", "luong_localp lstm", "table")
    table = table_rows((work / "results.md").read_text(encoding="utf-8"))
    assert (work / "results.md").read_text(encoding="utf-8") in proc.stdout
    header = table["system"]
    assert header[:4] == ["system", "M params", "epochs", "updates"] and "test sacreBLEU" in header[-1]
    row = dict(zip(header, table["luong_localp"]))
    assert row["updates"] == "4" and row["epochs"] == "1" and float(row["M params"]) > 0
    assert float(row["test sacreBLEU"]) == round(bleu["score"], 2)
    assert set(table["lstm"][1:]) == {"-"}  # not trained (yet): no numbers
    # BLEU by source length of the translated system against the raw reference, grouped by
    # the words of the raw source (--edges 10 15 20 25 30)
    lengths = [len(line.split()) for line in (data / "test.en").read_text(encoding="utf-8").splitlines()]
    by_length = table_rows((work / "bleu_by_length.md").read_text(encoding="utf-8"))
    for label, lo, hi in (("<=10", 0, 10), ("11-15", 11, 15), ("16-20", 16, 20), ("21-25", 21, 25)):
        assert by_length[label][1] == str(sum(lo <= n <= hi for n in lengths)), label
    assert by_length["all"] == ["all", "20", f"{bleu['score']:.2f}"]
    png_size(work / "bleu_by_length.png")
    # learning curves: valid ppl against updates and against minutes, side by side
    assert table_rows((work / "curves.md").read_text(encoding="utf-8"))["luong_localp"][1] == "2"
    width, height = png_size(work / "curves.png")
    assert width > 2 * height
    for path in ("results.md", "bleu_by_length.png", "curves.png"):
        assert str(work / path) in proc.stderr
    assert str(sysdir / "attention_2.png") in proc.stderr


def sysdir_ckpt(work, name):
    return work / "systems" / name / "checkpoints" / "checkpoint_last.pt"


def test_multi30k_refuses_changed_options(multi30k):
    data, work, opts, _, _ = multi30k
    ckpt = work / "systems" / "luong_localp" / "checkpoints" / "checkpoint_last.pt"
    before = ckpt.stat().st_mtime_ns
    proc = recipe("multi30k_en_de", *opts, "train", "luong_localp", "--", *TINY, "--max-update", 6,
                  check=False)
    assert proc.returncode == 1 and "made with other options" in proc.stderr
    assert "before: --max-update 4" in proc.stderr and "now:    --max-update 6" in proc.stderr
    assert ckpt.stat().st_mtime_ns == before


def test_multi30k_fairseq_lstm_trains(multi30k):
    """fairseq's lstm trains with the recipe's flags (2 updates)."""
    data, work, opts, _, _ = multi30k
    recipe("multi30k_en_de", *opts, "train", "lstm", "--", *TINY, "--decoder-out-embed-dim", 16,
           "--max-update", 2)
    state = torch.load(work / "systems" / "lstm" / "checkpoints" / "checkpoint_last.pt",
                       weights_only=True)
    cfg = state["cfg"]
    assert option(cfg, "model", "arch") == "lstm" and option(cfg, "model", "share_all_embeddings")
    assert option(cfg, "model", "decoder_attention") == "1"


def test_multi30k_names_missing_input(tmp_path):
    proc = recipe("multi30k_en_de", "--data-dir", tmp_path, "--work-dir", tmp_path / "w", "prepare",
                  check=False)
    assert proc.returncode == 1
    assert f"{tmp_path}/train.en not found" in proc.stderr and "multi30k/dataset" in proc.stderr


def test_multi30k_says_how_many_pieces_sentencepiece_made(tmp_path):
    """--vocab 8000 on 500 pairs: SentencePiece (hard_vocab_limit=False) makes fewer pieces,
    and the recipe used to say 'one joint unigram model of 8000 pieces'."""
    import sentencepiece as spm

    data = multi30k_slice(tmp_path, {"train": 500, "valid": 20, "test": 20})
    work = tmp_path / "work"
    proc = recipe("multi30k_en_de", "--data-dir", data, "--work-dir", work, "--vocab", 8000, "prepare")
    model = work / "spm" / "joint.model"
    pieces = spm.SentencePieceProcessor(model_file=str(model)).get_piece_size()
    assert pieces < 8000
    assert (f"spm_tool.py: {model} has {pieces} pieces, not the 8000 asked for: the training text holds no "
            "more (SentencePiece's hard_vocab_limit=False)") in proc.stderr
    assert "of 8000 pieces" not in proc.stderr and "of at most 8000 pieces" in proc.stderr


def test_spm_tool_trains_into_a_folder_that_does_not_exist_yet(tmp_path):
    """The README's step 2 (--model-prefix spm/joint in a fresh checkout): SentencePiece itself
    stops with RuntimeError: NOT_FOUND when spm/ is missing."""
    text = tmp_path / "train.txt"
    text.write_text("".join(f"a man rides bike number {i} and a dog runs\n" for i in range(200)), encoding="utf-8")
    prefix = tmp_path / "spm" / "joint"
    subprocess.run([sys.executable, str(REPO / "examples" / "common" / "spm_tool.py"), "train", "--input", str(text),
                    "--model-prefix", str(prefix), "--vocab-size", "30"], check=True, capture_output=True)
    assert (tmp_path / "spm" / "joint.model").stat().st_size > 0


def test_the_wmt_recipe_reads_its_rows_as_data_by_field(tmp_path):
    """examples/wmt14_en_de/rows.py: the protocol's rows (fairseq_luong/paper_settings/luong2015.py)
    and RNNsearch, each field by name; `all` is what run.sh evaluates once, quoting and all."""
    from fairseq_luong.paper_settings import luong2015

    rows = [sys.executable, str(REPO / "examples" / "wmt14_en_de" / "rows.py")]
    script = (f'eval "$({" ".join(rows)} all)"; printf "%s\\n" "${{ROW_NAMES[*]}}" '
              + " ".join(f'"${{ROW_FIELDS[t1_ensemble/{f}]}}"' for f in ("models", "what", "paper_ppl", "paper_aer",
                                                                            "split", "unk")))
    out = subprocess.run(["bash", "-c", script], capture_output=True, text=True, check=True).stdout.split("\n")
    assert out[0].split() == [r.name for r in luong2015.ROWS] + ["rnnsearch"]
    assert out[1:7] == [" ".join(luong2015.ENSEMBLE), "Table 1: ensemble of 8 models + unk replace", "", "0.34",
                        "test", "yes"]
    field = subprocess.run([*rows, "field", "t2_ensemble", "split"], capture_output=True, text=True, check=True)
    assert field.stdout == "test1\n"
    unknown = subprocess.run([*rows, "field", "t9", "split"], capture_output=True, text=True)
    assert unknown.returncode == 2 and unknown.stderr.startswith("unknown row 't9' (known: t1_base ")


def test_the_perspe_recipe_and_the_study_train_the_papers_systems_as_the_protocol_writes_them():
    """perSPE's systems are written once (fairseq_luong/paper_settings/oka2022.py): the recipe's
    `systems` lists them, and the in-form study trains the protocol's two (with its own stopping
    rule added), as the results it published record."""
    import runpy

    from fairseq_luong.paper_settings import oka2022

    study = runpy.run_path(str(REPO / "examples" / "luong2015_in_form" / "systems.py"), run_name="systems")
    for name, options in study["PERSPE_SYSTEMS"].items():
        assert options == list(oka2022.BY_NAME[name].options), name
        assert study["perspe_options"](name)[:len(options)] == options
    for path in sorted((REPO / "examples" / "luong2015_in_form" / "results" / "perspe").rglob("result.json")):
        result = json.loads(path.read_text())
        name = result["system"][len("perspe_"):]
        assert result["train_options"] == (f"PRESET=small MAX_UPDATE={study['PERSPE_MAX_UPDATE']} "
                                           + " ".join(study["perspe_options"](name))), path
    listed = recipe("perspe", "systems").stdout.splitlines()
    assert [line.split()[0] for line in listed[1:]] == [s.name for s in oka2022.SYSTEMS]
    assert listed[3].endswith("  --encoder-pos spe --decoder-pos perspe --perturb-range 1 --perturb-unit phrase")


@pytest.mark.parametrize("name,args,status,message", [
    ("multi30k_en_de", ["--minutes", "abc", "all"], 2,
     "run.sh: --minutes abc: give the training time of each system in minutes, a positive number such as 1.5"),
    ("multi30k_en_de", ["--vocab", "8k", "prepare"], 2,
     "run.sh: --vocab 8k: give the size of the SentencePiece vocabulary, a whole number of at least 1"),
    ("multi30k_en_de", ["--systems", "luong_localp nosuch", "all"], 1,
     "[multi30k] error: unknown system 'nosuch' (known: luong_global_general luong_localp luong_base lstm "
     "rnnsearch)"),
    ("wmt14_en_de", ["train", "NOSUCHROW"], 1, "[wmt14] error: unknown row 'NOSUCHROW' (bash RUN rows)"),
    ("wmt14_en_de", ["all", "t1_base", "NOSUCHROW"], 1, "[wmt14] error: unknown row 'NOSUCHROW' (bash RUN rows)"),
    ("wmt14_en_de", ["--updates", "0", "time-epoch", "t1_base"], 2,
     "run.sh: --updates 0: give the number of updates to time, a whole number of at least 1"),
    ("wmt14_en_de", ["--gold-first", "fr", "all"], 2,
     "run.sh: --gold-first fr: give de or en (the language of the links' first index)"),
])
def test_recipes_check_options_and_names_before_any_work(tmp_path, name, args, status, message):
    """One line and a failing status before anything runs. They were: multi30k --minutes abc
    ran prepare, then died with a Python NameError; wmt14 train NOSUCHROW printed its error
    and exited 0 (the die ran inside $(...) of a for loop)."""
    (tmp_path / "data").mkdir()  # empty: a recipe that went ahead would stop on a missing file
    proc = recipe(name, "--data-dir", tmp_path / "data", "--work-dir", tmp_path / "work", *args, check=False)
    assert (proc.returncode, proc.stderr) == (status, message.replace("RUN", str(REPO / "examples" / name / "run.sh"))
                                              + "\n")
    assert not (tmp_path / "work").exists()


def test_average_checkpoints(multi30k):
    """model.pt of the trained system is the mean of its interval checkpoints."""
    data, work, opts, _, _ = multi30k
    ckpts = sorted((work / "systems" / "luong_localp" / "checkpoints").glob("checkpoint_*_*.pt"))
    assert len(ckpts) == 2  # updates 2 and 4
    out = work / "avg.pt"
    subprocess.run([sys.executable, str(REPO / "scripts" / "train" / "average_checkpoints.py"),
                    "--inputs", *map(str, ckpts), "--output", str(out)], check=True,
                   capture_output=True)
    states = [torch.load(p, weights_only=True)["model"] for p in ckpts]
    avg = torch.load(out, weights_only=True)["model"]
    moved = 0
    for k, v in avg.items():
        torch.testing.assert_close(v, (states[0][k] + states[1][k]) / 2)
        moved += int(not torch.equal(states[0][k], states[1][k]))
    assert moved > 0
    assert torch.equal(torch.load(work / "systems" / "luong_localp" / "model.pt",
                                  weights_only=True)["model"]["encoder.embed_tokens.weight"],
                       avg["encoder.embed_tokens.weight"])


def test_average_includes_the_final_state_after_the_last_interval_checkpoint(multi30k):
    """A time budget ends between two saves: the updates after the newest interval checkpoint
    are in checkpoint_last.pt only, and model.pt averages it with the newest interval one."""
    data, work, opts, _, _ = multi30k
    recipe("multi30k_en_de", *opts, "train", "luong_global_general", "--", *TINY, "--max-update", 5)
    ckpts = work / "systems" / "luong_global_general" / "checkpoints"
    assert sorted(p.name for p in ckpts.glob("checkpoint_*_*.pt")) == ["checkpoint_1_2.pt", "checkpoint_1_4.pt"]
    recipe("multi30k_en_de", *opts, "translate", "luong_global_general")
    model = torch.load(work / "systems" / "luong_global_general" / "model.pt", weights_only=True)
    last = torch.load(ckpts / "checkpoint_last.pt", weights_only=True)
    four = torch.load(ckpts / "checkpoint_1_4.pt", weights_only=True)
    assert last["optimizer_history"][-1]["num_updates"] == 5
    assert model["optimizer_history"][-1]["num_updates"] == 5
    for k, v in model["model"].items():
        torch.testing.assert_close(v, (four["model"][k] + last["model"][k]) / 2)


def test_hyps_refuses_missing_sentences(tmp_path):
    ref = tmp_path / "ref"
    ref.write_text("a\nb\nc\n")
    gen = tmp_path / "gen.out"
    gen.write_text("H-2\t-0.1\tz\nH-0\t-0.2\tx\n")
    tool = REPO / "examples" / "common" / "recipe_tools.py"
    proc = subprocess.run([sys.executable, str(tool), "hyps", str(gen), "--ref", str(ref)],
                          capture_output=True, text=True)
    assert proc.returncode == 1 and "2 hypotheses for the 3 lines" in proc.stderr
    gen.write_text("H-2\t-0.1\tz\nH-0\t-0.2\tx\nH-1\t-0.3\ty\n")
    proc = subprocess.run([sys.executable, str(tool), "hyps", str(gen), "--ref", str(ref)],
                          capture_output=True, text=True, check=True)
    assert proc.stdout == "x\ny\nz\n"


# --------------------------------------------------------------------------- WMT'14
# A rehearsal of the real run: the Stanford release's files and names at the real test-set
# sizes, downloaded by the recipe (curl serves them), sacreBLEU's references fetched (from a
# cache in sacreBLEU's own layout), `all` for Table 1's local-p row, the ensemble row and
# Table 2, unchanged but for tiny models and quick translation; then the other steps on it.

# an eighth of the real sets' line counts (newstest2014 and 2015: the paper's section 4; sacreBLEU's
# wmt14/full, the unfiltered newstest2014, has 3,003 where the paper's has 2,737): the recipe
# reads no count of its own, and every line is translated up to nine times here (the whole
# counts took a minute more of the full tier)
TEST_LINES = {name: n // 8 for name, n in
              {"newstest2012": 3003, "newstest2013": 3000, "newstest2014": 2737, "newstest2015": 2169}.items()}
WMT14_FULL_LINES = 3003 // 8
REHEARSAL_ROWS = ["t1_localp_general", "t1_ensemble", "t2_ensemble"]
# translation of thousands of lines by tiny models: greedy, 2 words at most, one batch
QUICK_GENERATE = ["--generate-args", "--beam 1 --max-len-a 0 --max-len-b 2 --batch-size 3000"]
VOCAB_WORDS = 40  # the release's vocabularies cut to 37 words: <unk> everywhere, to replace
ODD_TRAIN = [  # (en, de) lines appended to the release's training data; prepare drops each
    (" ".join(["the"] * 51), " ".join(["die"] * 51)),  # over 50 words
    ("an English line", ""),  # empty on one side (check_parallel: "are the files out of step?")
    ("a line\u2028separator", "eine Zeile"),  # a character str.splitlines reads as a line break
]
ENSEMBLE = ["global_location_feed", "global_dot_feed", "global_general_feed", "localm_general_feed",
            "localp_dot_feed", "localp_general_feed", "global_dot_feed_nodrop", "localp_general_feed_nodrop"]


def cycle(lines, n):
    return [lines[i % len(lines)] for i in range(n)]


def stanford_release(out, n_train=200):
    """The files of Luong et al.'s release (the Stanford NMT page) in its formats and names,
    made from wmt_sample_en_de: train.{en,de} (``n_train`` pairs, then ODD_TRAIN; line 5 with
    C1 mojibake, as real WMT text), newstest2012..2015.{en,de} at TEST_LINES (its
    newstest2012, cycled), vocab.50K.{en,de} (<unk>, <s>, </s>, then words by frequency; cut
    to VOCAB_WORDS lines, so that <unk> is frequent) and dict.en-de translating every
    newstest2014 source word w as DE_w."""
    make_wmt14_release(out, n_train=n_train, n_test=1)
    for i, lang in enumerate(("en", "de")):
        lines = (out / f"train.{lang}").read_text(encoding="utf-8").splitlines(True)
        lines[4] = lines[4].replace(" ", "\x92 ", 1)
        (out / f"train.{lang}").write_text("".join(lines + [pair[i] + "\n" for pair in ODD_TRAIN]), encoding="utf-8")
        vocab = out / f"vocab.50K.{lang}"
        vocab.write_text("".join(vocab.read_text(encoding="utf-8").splitlines(True)[:VOCAB_WORDS]), encoding="utf-8")
        sample = (SHARED_DATA / "wmt_sample_en_de" / f"newstest2012.{lang}").read_text(encoding="utf-8")
        sample = sample.splitlines(True)
        for j, (name, n) in enumerate(TEST_LINES.items()):
            (out / f"{name}.{lang}").write_text("".join(cycle(sample[7 * j:] + sample[:7 * j], n)), encoding="utf-8")
    text = (out / "newstest2014.en").read_text(encoding="utf-8")
    words = sorted({w for line in text.splitlines() for w in line.split()})
    (out / "dict.en-de").write_text("".join(f"{w}\tDE_{w}\n" for w in words), encoding="utf-8")
    return out


def fake_sacrebleu_cache(root, release, wmt14_lines=None):
    """SACREBLEU's cache as sacreBLEU 2 lays it out after a download (DATASET/NAME.en-de.FIELD),
    so `sacrebleu -t wmt14 -l en-de --echo ref` reads it instead of downloading: wmt14 (the
    release's newstest2014, 2,737 lines, or ``wmt14_lines``), wmt14/full (3,003) and wmt15."""
    def detok(line):
        return line.replace(" ,", ",").replace(" .", ".").replace(" ##AT##-##AT## ", "-")

    de14 = (release / "newstest2014.de").read_text(encoding="utf-8").splitlines()
    de15 = (release / "newstest2015.de").read_text(encoding="utf-8").splitlines()
    for folder, name, refs in (("wmt14", "wmt14", cycle(de14, wmt14_lines or len(de14))),
                               ("wmt14/full", "wmt14_full", cycle(de14, WMT14_FULL_LINES)),
                               ("wmt15", "wmt15", de15)):
        d = root / folder
        d.mkdir(parents=True, exist_ok=True)
        for field in ("src", "ref", "docid", "genre", "origlang"):
            lines = [detok(r) for r in refs] if field == "ref" else [f"{field} {i}" for i in range(len(refs))]
            (d / f"{name}.en-de.{field}").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return root


def stub_tools(stubs, release=None):
    """curl and wget that leave a mark; with ``release``, curl serves its files as the
    Stanford page would (``curl -fL --retry 3 -o OUT URL``)."""
    serve = (f'for a; do case "$prev" in -o) o="$a";; esac; prev="$a"; url="$a"; done\n'
             f'f="{release}/$(basename "$url")"; [ -f "$f" ] && cp "$f" "$o" && exit 0\n') if release else ""
    (stubs / "curl").write_text(f"#!/bin/sh\ntouch {stubs}/downloaded\n{serve}exit 1\n")
    (stubs / "wget").write_text(f"#!/bin/sh\ntouch {stubs}/downloaded\nexit 1\n")
    for tool in ("curl", "wget"):
        (stubs / tool).chmod(0o755)
    return stubs


@pytest.fixture(scope="module")
def stanford(tmp_path_factory):
    """The synthetic release, sacreBLEU's cache and the stubs, and a runner of run.sh with
    them (no --data-dir: the recipe downloads what it needs)."""
    if not (SHARED_DATA / "wmt_sample_en_de" / "train.en").exists():
        pytest.skip("../shared/data/wmt_sample_en_de not present")
    release = stanford_release(tmp_path_factory.mktemp("stanford_release"))
    cache = fake_sacrebleu_cache(tmp_path_factory.mktemp("sacrebleu"), release)
    stubs = stub_tools(tmp_path_factory.mktemp("stubs"), release)
    work = tmp_path_factory.mktemp("wmt14_rehearsal")

    def run(*args, work=work, env=None, **kw):
        return recipe("wmt14_en_de", "--work-dir", work, *QUICK_GENERATE, *args, path_prefix=str(stubs),
                      env={"SACREBLEU": str(cache), **(env or {})}, **kw)

    return release, cache, stubs, work, run


@pytest.fixture(scope="module")
def rehearsal(stanford):
    """`run.sh all` for Table 1's local-p row, its ensemble row and Table 2, unchanged, as on
    a GPU machine without --data-dir, with tiny models (1 update each) and quick translation."""
    release, cache, stubs, work, run = stanford
    proc = run("all", *REHEARSAL_ROWS, "--", *TINY, "--max-update", 1)
    return release, cache, stubs, work, run, proc


def test_rehearsal_makes_every_file_of_the_real_run(rehearsal):
    release, cache, stubs, work, run, proc = rehearsal
    lines = lambda p: len(p.read_text(encoding="utf-8").splitlines())  # noqa: E731
    # the release, downloaded into WORK/raw; the references sacreBLEU gives, kept with their keys
    for f in release.iterdir():
        assert (work / "raw" / f.name).read_bytes() == f.read_bytes(), f.name
    assert lines(work / "raw" / "newstest2014.raw.de") == TEST_LINES["newstest2014"]
    assert (work / "raw" / "newstest2014.raw.de.key").exists()
    assert lines(work / "raw" / "newstest2015.raw.de") == TEST_LINES["newstest2015"]
    # the length filter first (section 4.1), reading as fairseq reads; the pairs fairseq
    # would misread are dropped and counted; then check_parallel checks what is kept
    assert ("kept 200 of 203 pairs with 1..50 words on both sides; dropped: 1 over 50 words (first: line 201); "
            "1 empty on a side (first: line 202); 1 a character that readers take for a line break "
            "(first: line 203)") in proc.stderr
    assert (f"warning: {work / 'text' / 'train.en'}: 1 line holds control characters (first: line 5, U+0092"
            in proc.stderr)
    assert f"ok: {work / 'text' / 'train'}.{{en,de}}: 200 sentence pairs" in proc.stderr
    for f in ("text/train.en", "text/train.de", "text/dict.en.txt", "text/dict.de.txt", "data-bin/.done.key",
              "data-raw/test.en-de.en", "data-raw/test1.en-de.en", "data-raw/.done.key"):
        assert (work / f).is_file(), f
    for split in ("train", "valid", "test", "test1"):
        for lang in ("en", "de"):
            assert (work / "data-bin" / f"{split}.en-de.{lang}.idx").is_file()
    # 8 models, each: last and best checkpoints only, model.pt, its options, code and keys
    for m in ENSEMBLE:
        d = work / "systems" / m
        kept = sorted(p.name for p in (d / "checkpoints").iterdir())
        assert kept == [".fairseq_luong.lock", "checkpoint_best.pt", "checkpoint_last.pt"], m  # the save-dir lock
        for f in ("trained", "trained.key", "model.pt", "model.pt.key", "options", "code", "code.manifest", "extra",
                  "train.log"):
            assert (d / f).is_file(), (m, f)
    d = work / "systems" / "localp_general_feed"
    assert {"test.json", "valid.json"} <= {p.name for p in d.iterdir()}
    assert "valid on 'test' subset" in (d / "validate_test.log").read_text()
    # translations of every line, scored both ways
    rows = work / "rows"
    for out, n in (("t1_localp_general/test", TEST_LINES["newstest2014"]),
                   ("t1_ensemble/test.unk", TEST_LINES["newstest2014"]),
                   ("t2_ensemble/test1.unk", TEST_LINES["newstest2015"])):
        for ext in ("out", "hyp", "detok"):
            assert (rows / f"{out}.{ext}").is_file(), (out, ext)
        assert lines(rows / f"{out}.hyp") == lines(rows / f"{out}.detok") == n
        assert "tok:none" in json.loads((rows / f"{out}.tok_bleu.json").read_text())["signature"]
        assert "tok:13a" in json.loads((rows / f"{out}.sacrebleu.json").read_text())["signature"]
    # the results: the three rows filled, the others named as missing; BLEU by length
    results = (work / "results.md").read_text(encoding="utf-8")
    table = table_rows(results)
    t1, ens, t2 = (dict(zip(table["row"], table[r])) for r in REHEARSAL_ROWS)
    test_ppl = json.loads((d / "test.json").read_text())["ppl"]
    assert t1["ppl (newstest2014)"] == f"{test_ppl:.2f}" and t1["paper ppl"] == "5.9"
    assert t1["tokenized BLEU"] != "-" and t1["sacreBLEU (detok)"] != "-" and t1["valid ppl (newstest2013)"] != "-"
    assert ens["+unk"] != "-" and ens["sacreBLEU (detok)"] != "-" and ens["paper BLEU"] == "23.0"
    assert t2["test set"] == "newstest2015" and t2["sacreBLEU (detok)"] != "-" and t2["paper BLEU"] == "25.9 (NIST)"
    assert "- t1_base: base not trained" in results
    assert (work / "bleu_by_length.md").is_file() and (work / "bleu_by_length.png").is_file()
    # the plan came first
    assert proc.stdout.index("GPUs here:") < proc.stdout.index("| row | models | test set |")


def test_rehearsal_ensemble_mixes_dropout_and_leaves_out_local_m_dot(rehearsal):
    """The paper's 8 models are 'of various settings, e.g., using different attention approaches,
    with and without dropout'; Table 4's local-m (dot) has perplexity > 7. Every model: the
    paper's batch of 128 on one process, no epoch checkpoints."""
    release, cache, stubs, work, run, proc = rehearsal
    dropout, scores = set(), set()
    for m in ENSEMBLE:
        cfg = torch.load(work / "systems" / m / "checkpoints" / "checkpoint_last.pt", weights_only=True)["cfg"]
        dropout.add(option(cfg, "model", "dropout"))
        arch = option(cfg, "model", "_name")
        scores.add((arch, option(cfg, "model", "attention_score") if arch in ("luong_localm", "luong_localp") else ""))
        assert cfg["checkpoint"]["no_epoch_checkpoints"] and cfg["distributed_training"]["distributed_world_size"] == 1
        assert cfg["dataset"]["batch_size"] == 128
        assert "--distributed-world-size 1 " in (work / "systems" / m / "options").read_text()  # not all GPUs here
    assert dropout == {0.0, 0.2}
    assert ("luong_localm", "dot") not in scores and len(scores) >= 5


def test_rehearsal_trains_every_model_with_the_protocol_written_in_luong2015(rehearsal):
    """Each model the WMT'14 rows trained holds, in its checkpoint, every setting of
    fairseq_luong/paper_settings/luong2015.py (section 4.1): no output bias (eq. 6), U[-0.1, 0.1],
    plain SGD at 1.0 on sentence-averaged gradients of 128 sentences, norm 5, the halving
    schedule of its dropout, reversal, its attention (local D = 10); the size excepted, which
    the rehearsal shrinks (TINY)."""
    from fairseq_luong.paper_settings import luong2015

    release, cache, stubs, work, run, proc = rehearsal
    assert ENSEMBLE == luong2015.ENSEMBLE
    for m in ENSEMBLE:
        cfg = torch.load(work / "systems" / m / "checkpoints" / "checkpoint_last.pt", weights_only=True)["cfg"]
        # every option of the protocol, as fairseq stored it (the last one given wins)
        words = luong2015.paper_model(m)
        wanted = {}
        for i, w in enumerate(words):
            if w.startswith("--"):
                value = words[i + 1] if i + 1 < len(words) and not words[i + 1].startswith("--") else True
                if w not in TINY:
                    wanted[w[2:].replace("-", "_")] = value
        wanted["arch"] = wanted.pop("arch")
        for key, value in wanted.items():
            section = next(s for s in ("model", "optimization", "dataset", "criterion", "lr_scheduler", "optimizer")
                           if key in (cfg[s] if isinstance(cfg[s], dict) else vars(cfg[s])))
            stored = option(cfg, section, key)
            stored = stored[0] if isinstance(stored, list) and len(stored) == 1 else stored
            assert str(stored) == str(value) or stored == type(stored)(value), (m, key, stored, value)
        assert option(cfg, "model", "no_output_bias") is True, m
        if option(cfg, "model", "_name") in ("luong_localm", "luong_localp"):
            assert option(cfg, "model", "local_window") == luong2015.LOCAL_WINDOW == 10, m
        assert option(cfg, "model", "attention_score") == ("dot" if "dot" in m else "location" if "location" in m
                                                           else "general"), m


def test_rehearsal_refuses_sacrebleus_full_newstest2014(stanford, tmp_path):
    """sacreBLEU's wmt14/full (3,003 lines) is not the paper's newstest2014 (2,737): one line
    naming the file and both counts, before any translation, and nothing kept, so a rerun
    fetches again. The recipe used to fetch wmt14/full, die after the first tokenized BLEU and
    keep the wrong file."""
    release, cache, stubs, work, run = stanford
    bad = fake_sacrebleu_cache(tmp_path / "sacrebleu", release, wmt14_lines=WMT14_FULL_LINES)
    new = tmp_path / "work"
    for attempt in (1, 2):
        proc = run("eval", "t1_localp_general", work=new, env={"SACREBLEU": str(bad)}, check=False)
        assert proc.returncode == 1, attempt
        assert proc.stderr.splitlines()[-1] == (
            f"[wmt14] error: sacreBLEU's wmt14 en-de reference ({new}/raw/newstest2014.raw.de, not kept) has "
            f"{WMT14_FULL_LINES} lines but {new}/raw/newstest2014.en has {TEST_LINES['newstest2014']}: not the same "
            "test set"), attempt
        assert not (new / "raw" / "newstest2014.raw.de").exists() and not (new / "rows").exists()
    wrong = tmp_path / "full.de"
    wrong.write_text("x\n" * WMT14_FULL_LINES)
    proc = run("--raw-ref", wrong, "eval", "t1_localp_general", work=new, check=False)
    assert proc.stderr.splitlines()[-1].startswith(
        f"[wmt14] error: {wrong} has {WMT14_FULL_LINES} lines but {new}/raw/newstest2014.en has "
        f"{TEST_LINES['newstest2014']}: not the same test set")


def test_plan_names_gpus_batch_time_and_refuses_a_small_disk(stanford, tmp_path):
    release, cache, stubs, work, run = stanford
    plan = run("--gpus", 2, "plan", "t1_base", work=tmp_path / "plan").stdout
    assert ("each training uses 2 (--distributed-world-size 2): the paper's 128 sentences per update are 64 "
            "per GPU") in plan
    base = dict(zip(table_rows(plan)["model"], table_rows(plan)["base"]))
    assert base["sentences per update"] == "128" and base["epochs"] == "10"
    assert "Tesla K40" in plan and "1K target words per second" in plan
    assert "disk:" in plan and "free" in plan
    # (tiny options, so that a broken refusal trains a tiny model, not the paper's)
    proc = run("--reserve", 10 ** 6, "all", "t1_base", "--", *TINY, "--max-update", 1, work=tmp_path / "w", check=False)
    assert proc.returncode == 1 and "error: the plan needs" in proc.stdout
    assert proc.stderr.splitlines()[-1] == "[wmt14] error: the plan does not fit: see above"
    assert not (tmp_path / "w" / "raw").exists()  # nothing downloaded, nothing prepared
    bad = recipe("wmt14_en_de", "--gpus", 3, "plan", check=False)
    assert bad.returncode == 2 and "--gpus 3: the paper's batch of 128 sentences" in bad.stderr


def gold_from_model(release, work, out):
    """Gold links in the RWTH layout (German first, 1-based) for the first 12 newstest2014
    pairs (OUT.gold, OUT.en, OUT.de) that are the model's own forced alignment (footnote 14
    rows): its AER against them is 0."""
    for lang in ("en", "de"):
        text = (release / f"newstest2014.{lang}").read_text(encoding="utf-8").splitlines(True)[:12]
        Path(f"{out}.{lang}").write_text("".join(text), encoding="utf-8")
    links = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "eval" / "force_align.py"), str(work / "data-bin"), "--path",
         str(work / "systems" / "localp_general_feed" / "model.pt"), "-s", "en", "-t", "de",
         "--source", f"{out}.en", "--target", f"{out}.de", "--paper-convention"],
        capture_output=True, text=True, check=True).stdout.splitlines()
    gold = Path(f"{out}.gold")
    swapped = (" ".join(f"{int(j) + 1}-{int(i) + 1}" for i, j in (link.split("-") for link in line.split()))
               for line in links)
    gold.write_text("".join(s + "\n" for s in swapped), encoding="utf-8")
    return gold


def test_wmt14_unk_replacement_aer_and_the_table(rehearsal, tmp_path):
    release, cache, stubs, work, run, _ = rehearsal
    row = work / "rows" / "t4_localp_general"
    gold = gold_from_model(release, work, tmp_path / "gold")
    aer = ["--gold-align", gold, "--gold-text", tmp_path / "gold"]
    ev = run(*aer, "eval", "t4_localp_general")
    assert "tokenized BLEU (as the paper)" in ev.stderr and "sacreBLEU on detokenized text" in ev.stderr
    tok = json.loads((row / "test.tok_bleu.json").read_text())
    # the model is trained already; the perplexity of Tables 1 and 4 is on newstest2014 (the
    # caption's), newstest2013's beside it
    sysdir = work / "systems" / "localp_general_feed"
    test_ppl, valid_ppl = (json.loads((sysdir / f"{s}.json").read_text())["ppl"] for s in ("test", "valid"))
    assert f"t4_localp_general: perplexity {test_ppl:.2f} on newstest2014, {valid_ppl:.2f} on newstest2013" in ev.stderr
    # AER (Table 6) against gold links with German first: the model's own links give 0
    assert "t4_localp_general: AER = 0.0000  (precision 1.0000, recall 1.0000; 12 sentences" in ev.stderr

    # unk replacement with the dictionary: the same beam-search output, each <unk> now the
    # dictionary's translation of a word of its source sentence, also of source words
    # outside the vocabulary (read from the text)
    vocab_en = set((release / "vocab.50K.en").read_text(encoding="utf-8").split())
    sources = (release / "newstest2014.en").read_text(encoding="utf-8").splitlines()
    plain = (row / "test.hyp").read_text(encoding="utf-8").splitlines()
    replaced = (row / "test.unk.hyp").read_text(encoding="utf-8").splitlines()
    assert len(plain) == len(replaced) == TEST_LINES["newstest2014"]
    unks = oov = 0
    for src, p_line, r_line in zip(sources, plain, replaced):
        assert len(p_line.split()) == len(r_line.split())
        for p_tok, r_tok in zip(p_line.split(), r_line.split()):
            if p_tok == "<unk>":
                unks += 1
                assert r_tok.startswith("DE_") and r_tok[3:] in src.split(), (r_tok, src)
                oov += r_tok[3:] not in vocab_en
            else:
                assert r_tok == p_tok
    assert unks > 0 and oov > 0

    # the table: AER beside the paper's, scores, BLEU by source length of both outputs
    proc = run(*aer, "table")
    results = table_rows((work / "results.md").read_text(encoding="utf-8"))
    cells = dict(zip(results["row"], results["t4_localp_general"]))
    assert cells["AER"] == "0.0000" and cells["paper AER"] == "0.36"
    assert cells["tokenized BLEU"] == f"{tok['score']:.2f}"
    assert cells["ppl (newstest2014)"] == f"{test_ppl:.2f}" and cells["valid ppl (newstest2013)"] == f"{valid_ppl:.2f}"
    by_length = table_rows((work / "bleu_by_length.md").read_text(encoding="utf-8"))
    assert "t4_localp_general" in by_length["source words"] and "t4_localp_general+unk" in by_length["source words"]
    png_size(work / "bleu_by_length.png")
    assert str(work / "bleu_by_length.png") in proc.stderr

    # without the dictionary (it cannot be downloaded): the attended source word itself, with a message
    (work / "raw" / "dict.en-de").rename(tmp_path / "dict.en-de")
    (release / "dict.en-de").rename(tmp_path / "release.dict.en-de")
    try:
        tr = run("translate", "t4_localp_general")
    finally:
        (tmp_path / "dict.en-de").rename(work / "raw" / "dict.en-de")
        (tmp_path / "release.dict.en-de").rename(release / "dict.en-de")
    assert "could not download https://nlp.stanford.edu/projects/nmt/data/wmt14.en-de/dict.en-de" in tr.stderr
    assert "unk replacement copies the attended source word" in tr.stderr
    copied = (row / "test.unk.hyp").read_text(encoding="utf-8").splitlines()
    assert [line.replace("DE_", "") for line in replaced] == copied


def test_wmt14_names_missing_file_and_downloads_nothing_with_a_data_dir(stanford, tmp_path):
    release, cache, stubs, work, run = stanford
    partial = tmp_path / "release"
    partial.mkdir()
    for f in release.iterdir():
        if f.name not in ("vocab.50K.de", "dict.en-de"):
            (partial / f.name).symlink_to(f)
    (stubs / "downloaded").unlink(missing_ok=True)
    proc = run("--data-dir", partial, "prepare", work=tmp_path / "w", check=False)
    assert proc.returncode == 1
    assert f"{partial}/vocab.50K.de not found" in proc.stderr and "nlp.stanford.edu" in proc.stderr
    # the dictionary is optional: unk replacement copies source words without it
    assert f"no {partial}/dict.en-de: unk replacement will copy the attended source word" in proc.stderr
    assert not (stubs / "downloaded").exists()


def test_wmt14_table_shows_only_scores_fresh_for_their_reference_and_model(rehearsal, tmp_path):
    """A score is printed only when fresh for its key. With another untokenized reference
    (--raw-ref), the sacreBLEU made against the old one is not shown, while the tokenized BLEU
    (the release's reference, unchanged) still is. Retrain a model (other options): the table
    no longer shows the old model's scores and perplexities of any row it is in, and names them
    as not translated yet. The table used to print any rows/ROW/*.json, whatever reference or
    model it came from. (Last: it retrains the rehearsal's local-p model.)"""
    release, cache, stubs, work, run, _ = rehearsal
    other = tmp_path / "other.de"
    other.write_text("anders\n" * TEST_LINES["newstest2014"], encoding="utf-8")
    rows = table_rows(run("--raw-ref", other, "table").stdout)
    cells = dict(zip(rows["row"], rows["t1_localp_general"]))
    assert cells["sacreBLEU (detok)"] == "-" and cells["tokenized BLEU"] != "-"
    before = table_rows(run("table").stdout)
    assert dict(zip(before["row"], before["t1_localp_general"]))["sacreBLEU (detok)"] != "-"
    assert before["t1_localp_general"][7] != "-" and before["t1_ensemble"][8] != "-"
    # a model that is not the one the options describe (trained on one GPU, asked for two) is
    # refused, not translated
    proc = run("--gpus", 2, "translate", "t1_localp_general", check=False)
    assert proc.returncode == 1 and "localp_general_feed stale: made with other options" in proc.stderr
    retrain = run("train", "t1_localp_general", "--", *TINY, "--max-update", 2, env={"RETRAIN": "1"})
    assert "localp_general_feed: RETRAIN=1: deleting" in retrain.stderr
    table = run("table").stdout
    rows = table_rows(table)
    for name in ("t1_localp_general", "t1_ensemble", "t2_ensemble"):
        cells = dict(zip(rows["row"], rows[name]))
        for cell in ("ppl (newstest2014)", "valid ppl (newstest2013)", "tokenized BLEU", "+unk", "sacreBLEU (detok)"):
            assert cells[cell] == "-", (name, cell)
    assert "- t1_localp_general: localp_general_feed not translated yet" in table
    assert "- t1_ensemble: localp_general_feed not translated yet" in table
    assert not (work / "bleu_by_length.md").exists()  # no fresh translation: no BLEU by length
    # and the new model's translation is made, not the old one reused
    assert "t1_localp_general: translating" in run("translate", "t1_localp_general").stderr
