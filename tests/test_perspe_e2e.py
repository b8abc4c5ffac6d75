"""The perSPE recipe end to end through its command line, on ASPEC-format files made
from a slice of small_parallel_enja plus the odd lines of tests/helpers.py:

examples/perspe/run.sh prepare (extract, normalise, joint SentencePiece,
fairseq-preprocess --joined-dictionary, chunk, project) -> train (one seed,
--encoder-pos perspe --decoder-pos perspe, shared embeddings, a tiny model,
--fp16 --memory-efficient-fp16 --cpu) -> eval (fairseq-generate with --user-dir,
sacreBLEU on normalised text), and what the recipe promises: progress on the
terminal, changed options refused, eval cached until what it scores changes,
no fairseq BLEU4 line, every stage keyed on its input, settings and code, only
finished seeds trained and scored; and `all` for one table cell with the
paper's preset (the last 5 checkpoints averaged, beam 4, length penalty 0.6)."""
import json
import os
import shutil
import subprocess

import pytest
import torch

import fairseq_luong  # noqa: F401  (checkpoint allowlist for torch.load)
from tests.helpers import ODD_LINES, REPO, SHARED_DATA, bin_path, write_aspec_format

DATA = SHARED_DATA / "small_parallel_enja"
RUN = REPO / "examples" / "perspe" / "run.sh"
SIZES = {"train": 300, "dev": 30, "test": 20}
TINY = ["--encoder-layers", "1", "--decoder-layers", "1", "--encoder-embed-dim", "32",
        "--decoder-embed-dim", "32", "--encoder-ffn-embed-dim", "32",
        "--decoder-ffn-embed-dim", "32", "--encoder-attention-heads", "2",
        "--decoder-attention-heads", "2", "--save-interval-updates", "0"]
SYSTEM = ["--encoder-pos", "perspe", "--decoder-pos", "perspe", "--perturb-range", "1"]
FP16 = ["--fp16", "--memory-efficient-fp16", "--cpu"]  # fairseq's fp16 trainer, on the CPU

pytestmark = pytest.mark.skipif(
    not (DATA / "train.ja").exists(),
    reason=f"small_parallel_enja not found at {DATA} (the shared/ folder beside the checkout)",
)


def run_sh(work, *words, check=True, run=RUN, **settings):
    env = dict(os.environ, ASPEC=str(work / "aspec"), WORK=str(work / "run"), PRESET="small",
               VOCAB="700", TABLE="1", MAX_TOKENS="512", SEEDS="1", MAX_UPDATE="4",
               OMP_NUM_THREADS="1", PYTHONWARNINGS="ignore",
               PATH=os.path.dirname(bin_path("python")) + os.pathsep + os.environ["PATH"])
    env.update({k: str(v) for k, v in settings.items()})
    proc = subprocess.run(["bash", str(run), *words], capture_output=True, text=True, env=env)
    if check:
        assert proc.returncode == 0, f"run.sh {' '.join(words)} failed:\n{proc.stderr[-4000:]}"
    return proc


@pytest.fixture(scope="module")
def recipe(tmp_path_factory):
    work = tmp_path_factory.mktemp("perspe_e2e")
    counts = write_aspec_format(work / "aspec", DATA, SIZES)
    prepared = run_sh(work, "prepare")
    trained = run_sh(work, "train", "sys", "--", *SYSTEM, *TINY, *FP16)
    return work, counts, prepared.stderr, trained.stderr


def test_prepare_takes_aspec_and_odd_lines(recipe):
    work, counts, log, _ = recipe
    run = work / "run"
    for split, n in counts.items():
        for lang in ("en", "ja"):
            assert len((run / "text" / f"{split}.{lang}").read_bytes().split(b"\n")) == n + 1
    normalised = (run / "text" / "train.ja").read_text(encoding="utf-8").split("\n")
    assert normalised[1:1 + len(ODD_LINES)] == [want for _, _, want in ODD_LINES]
    assert "0 line(s) given one phrase per piece" in log and "pieces per phrase" in log
    dicts = {lang: (run / "data-bin" / f"dict.{lang}.txt").read_text() for lang in ("en", "ja")}
    assert dicts["en"] == dicts["ja"]  # --joined-dictionary


def test_train_reports_progress_and_reads_chunks(recipe):
    work, _, _, log = recipe
    seed_dir = work / "run" / "systems" / "sys" / "seed1"
    assert f"log: {seed_dir}/train.log" in log
    assert "[sys seed 1] epoch 1 done: 4 updates, train ppl" in log  # recipe_tools progress
    train_log = (seed_dir / "train.log").read_text()
    assert "train: target chunk ids from" in train_log and "valid: target chunk ids from" in train_log
    assert "--share-all-embeddings" in (seed_dir / "settings").read_text()
    assert "loss_scale" in train_log  # the fp16 trainer ran


def test_changed_options_are_refused(recipe):
    work, _, _, _ = recipe
    proc = run_sh(work, "train", "sys", "--", *SYSTEM[:3], "spe", *TINY, *FP16, check=False)
    assert proc.returncode != 0
    assert "before: --decoder-pos perspe" in proc.stderr and "now:    --decoder-pos spe" in proc.stderr
    assert "refusing to resume sys seed 1" in proc.stderr
    assert "trained already" in run_sh(work, "train", "sys", "--", *SYSTEM, *TINY, *FP16).stderr


def test_eval_scores_normalised_text_and_caches_until_what_it_scores_changes(recipe):
    work, counts, _, _ = recipe
    seed_dir = work / "run" / "systems" / "sys" / "seed1"
    first = run_sh(work, "eval", "sys")
    assert "sys seed 1: translating" in first.stderr
    assert "| sys | 1 |" in first.stdout and "normalize_line" in first.stdout
    assert "BLEU4" not in (seed_dir / "test.out").read_text()
    scores = json.loads((seed_dir / "bleu.json").read_text())
    assert scores["sentences"] == counts["test"] and "ja-mecab" in scores["signature"]
    assert "translating" not in run_sh(work, "eval", "sys").stderr  # cached
    # another decoding: translated again (eval used to decide by file times only)
    assert "sys seed 1: translating" in run_sh(work, "eval", "sys", BEAM=2).stderr
    assert "sys seed 1: translating" in run_sh(work, "eval", "sys").stderr


def test_a_seed_stopped_early_by_patience_is_trained_and_never_resumed(recipe):
    """fairseq's --patience stop ends a training before MAX_UPDATE. The recipe looked for the
    stop in the log's last 5 lines, where it never is (the checkpoint's and the epoch's lines
    follow it): every early stop was "not marked trained", and training again resumed it past
    its stop. The rate is 0, so the second validation is no better than the first. A system of
    its own: the options are the system's, and the other tests' `sys` keeps its own."""
    work, _, _, _ = recipe
    seed_dir = work / "run" / "systems" / "patient" / "seed1"
    options = ["--", *SYSTEM, *TINY, *FP16, "--patience", "1", "--lr", "0"]
    first = run_sh(work, "train", "patient", *options, MAX_UPDATE="1000")
    log = (seed_dir / "train.log").read_text()
    assert "early stop since valid performance hasn't improved for last 1 runs" in log
    assert (seed_dir / "trained").exists() and "training ended after" not in first.stderr
    (seed_dir / "trained").unlink()  # stopped early, not yet marked (as by the recipe before)
    again = run_sh(work, "train", "patient", *options, MAX_UPDATE="1000")
    assert "patient seed 1: trained already (fairseq stopped it early after " in again.stderr
    assert (seed_dir / "train.log").read_text() == log and (seed_dir / "trained").exists()  # not resumed


def test_only_finished_seeds_are_trained_scored_and_tabled(recipe):
    """A seed whose training ended before MAX_UPDATE is not marked trained, eval does not score
    it, and the table averages only the fresh seeds of SEEDS. The recipe used to mark `trained`
    whenever fairseq-train exited 0, score an unfinished seed with a warning, and average every
    seed*/bleu.json it found."""
    work, _, _, _ = recipe
    systems = work / "run" / "systems"
    proc = run_sh(work, "train", "sys", "--", *SYSTEM, *TINY, *FP16, "--max-epoch", "1", check=False,
                  SEEDS="2", MAX_UPDATE="50")
    assert proc.returncode == 1
    assert proc.stderr.splitlines()[-1].startswith("[perspe] error: sys seed 2: training ended after ")
    assert " of 50 updates" in proc.stderr and not (systems / "sys" / "seed2" / "trained").exists()
    shutil.copytree(systems / "sys" / "seed1", systems / "sys" / "seed9")  # a seed outside SEEDS
    (systems / "sys" / "seed2" / "bleu.json").write_text(json.dumps({"BLEU": 99.0, "chrF2": 99.0, "signature": "x"}))
    ev = run_sh(work, "eval", "sys", SEEDS="1 2")
    assert "sys seed 2 unfinished" in ev.stderr and "not scored" in ev.stderr
    table = run_sh(work, "table", "sys", SEEDS="1 2").stdout
    row = [line for line in table.splitlines() if line.startswith("| sys |")][0]
    bleu = json.loads((systems / "sys" / "seed1" / "bleu.json").read_text())["BLEU"]
    assert row.split(" | ")[1:3] == ["1", f"{bleu:.2f}"]  # seed 1 only: not 2 (unfinished), not 9
    assert "- sys: seed 2 unfinished" in table
    shutil.rmtree(systems / "sys" / "seed9")
    shutil.rmtree(systems / "sys" / "seed2")


def test_a_stage_is_made_again_when_its_files_or_its_code_change(recipe, tmp_path):
    """prepare checked each stage's output by existence only: a partial deletion, or a changed
    grammar, normalisation or projection code, silently reused old outputs. Now a partly
    deleted stage is made again; a checkout whose chunk grammar differs chunks again (and
    projects again), while SentencePiece, whose input came out the same, is not trained again."""
    work, _, _, _ = recipe
    run = work / "run"
    (run / "data-bin" / "train.en-ja.ja.chunks.bin").unlink()
    log = run_sh(work, "prepare").stderr
    assert "data-bin: changed since it was made: making it again" in log
    assert (run / "data-bin" / "train.en-ja.ja.chunks.bin").exists() and "SentencePiece" not in log
    # the same recipe from a checkout whose grammar makes every word its own phrase
    copy = tmp_path / "checkout"
    files = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard"], cwd=REPO,
                           capture_output=True, text=True, check=True).stdout.split()
    for f in files:
        (copy / f).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO / f, copy / f)
    grammar = copy / "fairseq_luong" / "data" / "ja_chunk_grammar.txt"
    grammar.write_text(grammar.read_text(encoding="utf-8") + "\n# changed\n", encoding="utf-8")
    before = (run / "chunks" / ".done.key").read_text()
    log = run_sh(work, "prepare", run=copy / "examples" / "perspe" / "run.sh").stderr
    assert "chunks: made by other code (chunks): making it again" in log
    assert "chunking train.ja and dev.ja" in log and "projecting the phrases" in log
    assert "SentencePiece" not in log
    assert (run / "chunks" / ".done.key").read_text() != before
    log = run_sh(work, "prepare").stderr  # back to this checkout's grammar
    assert "chunking train.ja and dev.ja" in log


def test_a_line_that_cannot_be_projected_is_named_and_prepare_goes_on(recipe):
    """No odd line of the normalised text failed projection, so one is made: line 2 of
    the chunker's output for dev (the decomposed-kana line) spells another sentence
    (and is stamped as the chunker's output). prepare projects again, names the line and
    gives that sentence one phrase per piece. (Last in this file but the paper-preset cell:
    it changes the valid chunk ids.)"""
    from fairseq.data import data_utils

    work, _, _, _ = recipe
    run = work / "run"
    chunks = run / "chunks" / "dev.ja"
    lines = chunks.read_text(encoding="utf-8").split("\n")
    assert lines[1] == "パンを\t食べる。"
    lines[1] = "パンを\t食べた。"
    chunks.write_text("\n".join(lines), encoding="utf-8")
    restamp = (f'REPO={REPO}; RECIPE=test; source {REPO}/examples/common/recipe.sh; '
               f'stamp {run}/chunks/.done "$(recorded {run}/chunks/.done)"')
    subprocess.run(["bash", "-c", restamp], check=True)
    log = run_sh(work, "prepare").stderr
    assert "data-bin: made from other input: making it again" in log
    assert f"warning: {run}/spm/dev.ja:2 and {chunks}:2: piece" in log
    assert "valid.en-ja.ja.chunks.{bin,idx}: " in log and "1 line(s) given one phrase per piece" in log
    ds = data_utils.load_indexed_dataset(str(run / "data-bin" / "valid.en-ja.ja.chunks"), None, "mmap")
    n_pieces = len((run / "spm" / "dev.ja").read_text(encoding="utf-8").split("\n")[1].split())
    assert ds[1].tolist() == list(range(n_pieces + 1))  # one phrase per piece, then </s>


def test_all_for_one_table_cell_with_the_papers_preset(recipe):
    """`all spe_pertoken2` (Table 4: token-level perturbation in [-2, 2], 2,048 tokens per update)
    with PRESET=paper and a tiny model: plan, prepare (done: skipped), one seed trained to
    MAX_UPDATE, the last 5 interval checkpoints kept, the last 5 states averaged, translated
    with beam 4 and length penalty 0.6, scored, the table. The recipe used to keep one interval
    checkpoint and translate the last one with beam 5 and fairseq's default penalty."""
    work, counts, _, _ = recipe
    paper = dict(PRESET="paper", TABLE="4", MAX_TOKENS="2048", MAX_UPDATE="9")
    proc = run_sh(work, "all", "spe_pertoken2", "--", *TINY[:-2], "--save-interval-updates", "1", **paper)
    seed = work / "run" / "systems" / "spe_pertoken2" / "seed1"
    for f in ("trained", "trained.key", "model.pt", "model.pt.key", "test.hyp", "test.out", "bleu.json",
              "bleu.json.key", "settings", "code", "train.log", "checkpoints/checkpoint_last.pt"):
        assert (seed / f).exists(), f
    assert len((seed / "test.hyp").read_text(encoding="utf-8").splitlines()) == counts["test"]
    # 5 interval checkpoints kept (fairseq deleted older ones); model.pt: the mean of the last
    # 5 states, the final one (update 9, in checkpoint_last.pt only) included
    interval = sorted((seed / "checkpoints").glob("checkpoint_*_*.pt"), key=lambda p: int(p.stem.split("_")[-1]))
    assert len(interval) == 5 and int(interval[0].stem.split("_")[-1]) > 1
    kept = interval[1:] + [seed / "checkpoints" / "checkpoint_last.pt"]
    states = [torch.load(p, weights_only=True)["model"] for p in kept]
    model = torch.load(seed / "model.pt", weights_only=True)["model"]
    key = "decoder.layers.0.fc1.weight"
    torch.testing.assert_close(model[key], sum(s[key] for s in states) / 5)
    assert not torch.equal(model[key], states[-1][key])
    hyp_key = (seed / "test.hyp.key").read_text()
    assert "--beam 4 --lenpen 0.6 --max-len-a 1 --max-len-b 50" in hyp_key
    cfg = torch.load(seed / "checkpoints" / "checkpoint_last.pt", weights_only=True)["cfg"]
    assert cfg["checkpoint"]["keep_interval_updates"] == 5 and cfg["dataset"]["max_tokens"] == 2048
    assert cfg["criterion"]["perturb_range"] == 2 and cfg["criterion"]["perturb_unit"] == "token"
    assert proc.stdout.index("GPUs here:") < proc.stdout.index("| system | seeds |")
    # the plan has one too
    row = [line for line in proc.stdout.splitlines() if line.startswith("| spe_pertoken2 |")][-1]
    assert row.split(" | ")[1] == "1"
    assert "Decoding: the last 5 checkpoint(s) averaged, beam 4, lenpen 0.6." in proc.stdout


def test_plan_names_gpus_batch_time_and_refuses_a_small_disk(tmp_path):
    """`plan` (--preset paper): the batch split over GPUs, the checkpoints kept for averaging,
    the time from a named, cited GPU figure; it stops when the disk cannot hold the plan."""
    work = tmp_path / "w"
    proc = run_sh(work, "--preset", "paper", "--table", "3", "--max-tokens", "4096", "--gpus", "2",
                  "--reserve", str(10 ** 6), "plan", "spe_spe", check=False)
    assert ("each seed trains on --gpus 2 (--distributed-world-size 2): 4096 tokens per GPU and step x "
            "--update-freq 1 x 2 GPU(s) = 8192 tokens per update") in proc.stdout
    assert "the last 5 interval checkpoints" in proc.stdout and "Vaswani et al. (2017, 5.1-5.2)" in proc.stdout
    assert proc.returncode == 1 and "1000000 GB of it kept free (--reserve)" in proc.stdout
    assert "error: the plan needs" in proc.stdout and "choose another --work-dir" in proc.stdout
    assert proc.stderr.splitlines()[-1] == "[perspe] error: the plan does not fit: see above"
    assert not (work / "run").exists()


def test_flags_and_environment_variables_set_the_same_run_and_a_flag_wins(tmp_path):
    """Every setting is a --flag, as in the other recipes; the environment variables of before
    still work, and a flag wins over one (run_sh sets PRESET=small, TABLE=1 in the environment)."""
    work = tmp_path / "w"
    by_env = run_sh(work, "plan", "spe_spe", PRESET="paper", TABLE="4", MAX_TOKENS="1024", GPUS="2")
    by_flags = run_sh(work, "--preset", "paper", "--table", "4", "--max-tokens", "1024", "--gpus", "2",
                      "plan", "spe_spe")
    assert "each seed trains on --gpus 2" in by_env.stdout and by_flags.stdout == by_env.stdout
    wrong = run_sh(work, "--preseet", "paper", "plan", check=False)
    assert wrong.returncode == 2 and wrong.stderr == "run.sh: unknown option --preseet (see --help)\n"
    bad = run_sh(work, "--table", "5", "plan", check=False)
    assert bad.returncode == 2 and bad.stderr == "run.sh: --table (TABLE) must be 1, 2, 3 or 4, not 5\n"


def test_iwslt17_with_jparacrawl_is_cleaned_and_sampled(tmp_path):
    """Table 2's data: IWSLT17 En-Ja's training text without its metadata lines, cleaned by
    clean-corpus-n's rules (a pair over the word ratio and one over 80 words dropped, "|"
    removed), plus N random JParaCrawl pairs; dev and test from the XML sets."""
    src = tmp_path / "en-ja"
    src.mkdir()
    en = ["<url>http://ted.com/1</url>", "<talkid>1</talkid>", "Hello world .", "this is a pen .",
          " ".join(["word"] * 12), " ".join(["w"] * 81), "A | B"]
    ja = ["<url>http://ted.com/1</url>", "<talkid>1</talkid>", "こんにちは世界。", "これはペンです。", "一",
          "あ" * 10, "エー ビー"]
    (src / "train.tags.en-ja.en").write_text("\n".join(en) + "\n", encoding="utf-8")
    (src / "train.tags.en-ja.ja").write_text("\n".join(ja) + "\n", encoding="utf-8")
    for name in ("dev2010", "tst2015"):
        for lang in ("en", "ja"):
            (src / f"IWSLT17.TED.{name}.en-ja.{lang}.xml").write_text(
                f'<doc docid="1">\n<seg id="1"> {name} {lang} one </seg>\n<seg id="2"> {lang} two </seg>\n</doc>\n',
                encoding="utf-8")
    crawl = tmp_path / "en-ja.bicleaner05.txt"
    crawl.write_text("".join(f"a.com\tb.jp\t0.7\tcrawl {i}\tクロール{i}\n" for i in range(20)), encoding="utf-8")
    out = tmp_path / "raw"
    tool = str(REPO / "examples" / "perspe" / "iwslt_to_text.py")
    proc = subprocess.run([bin_path("python"), tool, "--iwslt", str(src),
                           "--jparacrawl", str(crawl), "--pairs", "4", "--output", str(out)],
                          capture_output=True, text=True, check=True)
    assert "train: 3 of 5 IWSLT17 pairs kept by clean-corpus-n" in proc.stderr
    train_en = (out / "train.en").read_text(encoding="utf-8").splitlines()
    assert train_en[:3] == ["Hello world .", "this is a pen .", "A B"]
    crawled = train_en[3:]
    assert len(crawled) == 4 and len(set(crawled)) == 4 and all(c.startswith("crawl ") for c in crawled)
    assert (out / "test.ja").read_text(encoding="utf-8").splitlines() == ["tst2015 ja one", "ja two"]
    again = tmp_path / "again"
    subprocess.run([bin_path("python"), tool, "--iwslt", str(src),
                    "--jparacrawl", str(crawl), "--pairs", "4", "--output", str(again)],
                   capture_output=True, check=True)
    assert (again / "train.en").read_text() == (out / "train.en").read_text()  # --seed: the same draw
