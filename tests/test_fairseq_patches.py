"""fairseq_fixes and fairseq_patches: one ordered list of the fixes of fairseq, a package of its
own, and one of the plugin's checks, applied after it; the package top shows only fairseq's
extension points and that list."""
import os
import subprocess
import sys
import types
from pathlib import Path

import fairseq_cli.generate
import fairseq_cli.interactive
import fairseq_cli.train
import pytest
import torch
from fairseq import checkpoint_utils
from fairseq.data import data_utils, iterators
from fairseq.distributed import utils as distributed_utils
from fairseq.models import BaseFairseqModel
from fairseq.tasks import FairseqTask
from fairseq.trainer import Trainer

import fairseq_fixes
import fairseq_luong
from fairseq_fixes.patching import fairseq_cli_modules
from fairseq_luong.fairseq_patches import apply_all


def wrappers(function):
    """The wrappers around ``function``, outermost first (functools.wraps' ``__wrapped__`` chain)."""
    chain = []
    while hasattr(function, "__wrapped__"):
        chain.append(function.__code__.co_qualname.split(".<locals>")[0])
        function = function.__wrapped__
    return chain


# every fairseq function several patches wrap: the later patch runs first (outside); the plugin's
# checks are applied after the fixes
SHARED_TARGETS = {
    "load_checkpoint_to_cpu": (lambda: checkpoint_utils.load_checkpoint_to_cpu,
                               ["_remembering", "_check_keys", "_explained_errors"]),
    "load_model_ensemble_and_task": (lambda: checkpoint_utils.load_model_ensemble_and_task,
                                     ["_checked_ensemble", "_check_fit", "_named_missing_file"]),
    "Trainer.load_checkpoint": (lambda: Trainer.load_checkpoint,
                                ["_checked_resume", "_resuming", "_named_architectures"]),
    "Trainer.save_checkpoint": (lambda: Trainer.save_checkpoint, ["_recording", "_saving_the_count"]),
    "Trainer.train_step": (lambda: Trainer.train_step,  # fairseq's metrics.aggregate innermost
                           ["_overflow_on_cpu", "_plan_update", "ContextDecorator.__call__"]),
    "call_main": (lambda: distributed_utils.call_main, ["_from_torchrun", "_fixing_precision"]),
    "FairseqTask.train_step": (lambda: FairseqTask.train_step, ["_amp_on_cpu", "_reseed_microbatch"]),
    "prepare_for_inference_": (lambda: BaseFairseqModel.prepare_for_inference_,
                               ["prepare_for_inference", "_precision_for_generation"]),
    "interactive.main": (lambda: fairseq_cli.interactive.main, ["_no_soft_alignment", "_marking_precision"]),
    "generate._main": (lambda: fairseq_cli.generate._main, ["_honouring_shards", "_marking_precision"]),
    "train.main": (lambda: fairseq_cli.train.main, ["_checked_restore_file", "_named_divergence", "_locked"]),
    "interactive.make_batches": (lambda: fairseq_cli.interactive.make_batches,
                                 ["remember_interactive_sources", "_cutting_long_lines"]),
}


@pytest.mark.parametrize("target", sorted(SHARED_TARGETS))
def test_wrappers_of_a_shared_target_stack_in_the_order_applied(target):
    get, outermost_first = SHARED_TARGETS[target]
    assert wrappers(get()) == outermost_first


def test_applying_twice_changes_nothing():
    before = {name: get() for name, (get, _) in SHARED_TARGETS.items()}
    before["torch_persistent_save"] = checkpoint_utils.torch_persistent_save
    before["PathManager"] = checkpoint_utils.PathManager
    before["BackgroundConsumer"] = iterators.BackgroundConsumer
    before["data_utils.np"] = data_utils.np
    before["Tensor.cuda"] = torch.Tensor.cuda
    before["from_pretrained"] = BaseFairseqModel.from_pretrained  # a classmethod: wrapped as one, once
    fairseq_fixes._APPLIED["done"] = False  # apply() itself runs once: here its fixes run again
    fairseq_fixes.apply()
    apply_all()
    assert {name: get() for name, (get, _) in SHARED_TARGETS.items()} | {
        "torch_persistent_save": checkpoint_utils.torch_persistent_save,
        "PathManager": checkpoint_utils.PathManager, "BackgroundConsumer": iterators.BackgroundConsumer,
        "data_utils.np": data_utils.np, "Tensor.cuda": torch.Tensor.cuda,
        "from_pretrained": BaseFairseqModel.from_pretrained} == before
    assert wrappers(BaseFairseqModel.from_pretrained) == ["_our_models_interface"]


def test_from_pretrained_stays_a_classmethod_of_the_class_it_is_called_on(monkeypatch):
    """our_hub_interface.py wraps BaseFairseqModel.from_pretrained; fairseq's own TransformerModel still
    looks its pretrained names up in its own hub_models (a wrapper bound to the base class
    would look them up in the base's: none)."""
    from fairseq import hub_utils
    from fairseq.models.transformer import TransformerModel

    def from_pretrained(*args, archive_map=None, **kwargs):
        raise LookupError(sorted(archive_map))

    monkeypatch.setattr(hub_utils, "from_pretrained", from_pretrained)
    with pytest.raises(LookupError, match="transformer.wmt16.en-de"):
        TransformerModel.from_pretrained("transformer.wmt16.en-de")


def test_package_top_shows_only_extension_points_and_the_patches():
    top = Path(fairseq_luong.__file__).parent
    entries = {p.name for p in top.iterdir() if p.name != "__pycache__"}
    assert entries == {"__init__.py", "errors.py", "models", "modules", "criterions", "optim", "tasks", "data",
                       "analysis", "checks", "fairseq_patches", "paper_settings"}


@pytest.mark.parametrize("first", ["fairseq_luong.data.text", "fairseq_luong.modules.luong.encoder"])
def test_readers_load_neither_fairseq_nor_torch_and_fairseq_imported_later_finds_the_plugin(first):
    """Tools that read text, fairseq-generate output or train logs import no fairseq, no
    torch and no patch; when such a process imports fairseq afterwards (or fairseq's
    --user-dir finds the package already imported), the plugin is registered all the same,
    and the root logger is as it was (fairseq's modules call logging.basicConfig at import:
    at DEBUG, every library's debug records would print)."""
    code = """
import logging
import sys
import fairseq_luong.data.text, fairseq_luong.analysis.generate_output, fairseq_luong.analysis.training_log
import fairseq_luong.errors, fairseq_luong.paper_settings.luong2015
heavy = ("fairseq", "torch", "fairseq_luong.fairseq_patches", "fairseq_luong.models", "fairseq_fixes.patching")
print(sorted(m for m in heavy if m in sys.modules))
import argparse
import importlib
importlib.import_module(sys.argv[2])  # a module of the plugin that imports fairseq itself, or a reader
from fairseq import utils
from fairseq.models import ARCH_MODEL_REGISTRY
from fairseq.criterions import CRITERION_REGISTRY
from fairseq.tasks import TASK_REGISTRY
utils.import_user_module(argparse.Namespace(user_dir=sys.argv[1]))
print("luong_localp" in ARCH_MODEL_REGISTRY, "fused_label_smoothed_cross_entropy" in CRITERION_REGISTRY,
      "translation_chunks" in TASK_REGISTRY, hasattr(sys.excepthook, "__wrapped__"))
print(logging.getLogger().level, logging.getLogger().handlers)
"""
    proc = subprocess.run([sys.executable, "-c", code, str(Path(fairseq_luong.__file__).parent), first],
                          capture_output=True, text=True, env=dict(os.environ, PYTHONWARNINGS="ignore"))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.split("\n")[:3] == ["[]", "True True True True", "30 []"], proc.stdout
    assert proc.stderr == ""


@pytest.mark.parametrize("how", ["python -m", "path", "console script"])
def test_cli_modules_include_main_when_the_command_runs_as_it(monkeypatch, how):
    main = types.ModuleType("__main__")
    if how == "python -m":
        main.__spec__ = types.SimpleNamespace(name="fairseq_cli.interactive")
    elif how == "path":
        main.__file__ = str(Path(fairseq_cli.interactive.__file__))
    else:
        main.__file__ = "/venv/bin/fairseq-interactive"
    monkeypatch.setitem(sys.modules, "__main__", main)
    found = fairseq_cli_modules("interactive")
    assert found[0] is fairseq_cli.interactive
    assert found[1:] == ([] if how == "console script" else [main])
    assert fairseq_cli_modules("generate") == [fairseq_cli.generate]  # another command's module


def _calls(function):
    import inspect
    import re

    return re.findall(r"^\s+(\w+\.\w+)\(\)", inspect.getsource(function), re.M)


def test_the_docs_name_every_patch_that_the_two_lists_apply():
    """fairseq_fixes.apply and the plugin's apply_all are the two lists; docs/architecture.md
    draws each of their calls and docs/fairseq_patches.md has a row for each patch module: a
    patch added without its line in either fails here."""
    calls = _calls(fairseq_fixes.apply) + _calls(apply_all)
    assert len(calls) >= 30
    docs = Path(fairseq_luong.__file__).parents[1] / "docs"
    drawing = (docs / "architecture.md").read_text(encoding="utf-8")
    assert [c for c in calls if c not in drawing] == []
    index = (docs / "fairseq_patches.md").read_text(encoding="utf-8")
    rows = [f"`{call.split('.')[0]}.py`" for call in calls]
    assert [row for row in rows if row not in index] == []


def test_every_patch_is_marked_and_listed_with_what_it_changes_as_the_docs_table_says(capsys):
    """Each function the two lists call carries its kind and what it acts on (patching.patch),
    nothing marked is left out of them; fairseq_fixes holds fixes only and the plugin checks and
    patches of its own only; each patch recorded the names it wraps or replaces; and
    docs/fairseq_patches.md's table is what ``python -m fairseq_luong.fairseq_patches
    --markdown`` prints."""
    from fairseq_fixes.__main__ import listing
    from fairseq_fixes.patching import KINDS, PATCHES, by_kind
    from fairseq_luong.fairseq_patches.__main__ import main, markdown

    fixes, ours = _calls(fairseq_fixes.apply), _calls(apply_all)
    assert len(fixes) == len(set(fixes)) >= 25 and len(ours) == len(set(ours)) >= 10
    assert sorted(fixes + ours) == sorted(PATCHES)  # each call marked, each mark called
    assert all(p.kind in KINDS and len(p.acts_on) > 20 for p in PATCHES.values())
    assert {PATCHES[c].package for c in fixes} == {"fairseq_fixes"} and {PATCHES[c].kind for c in fixes} == {"fix"}
    assert {PATCHES[c].package for c in ours} == {"fairseq_luong"} and {PATCHES[c].kind for c in ours} == {
        "check", "ours"}
    # allow_checkpoint_globals adds to torch's list of safe globals: it wraps and replaces nothing
    assert [p.name for p in PATCHES.values() if not p.targets] == ["checkpoint_loading.allow_checkpoint_globals"]
    assert "torch.Tensor.cuda" in PATCHES["precision.patch_training_precision"].targets
    kinds = by_kind()
    assert set(kinds) == {"fix", "check", "ours"} and all(kinds.values())
    main([])  # python -m fairseq_luong.fairseq_patches
    listed = capsys.readouterr().out
    assert [name for name in PATCHES if f"  {name}: " not in listed] == []
    assert [name for name in ours if f"  {name}: " in listing()] == []  # python -m fairseq_fixes: the fixes
    index = (Path(fairseq_luong.__file__).parents[1] / "docs" / "fairseq_patches.md").read_text(encoding="utf-8")
    marker = "<!-- python -m fairseq_luong.fairseq_patches --markdown -->\n"
    assert index.split(marker, 1)[1].split("\n<!-- end -->")[0] == markdown()


# what the patches change, seen from outside: every name of fairseq, torch, numpy and sys bound to
# another object by applying them is a target a patch recorded (patching.wrap_once, .replace)
_CHANGED_NAMES = """
import ast, importlib, inspect, json, pathlib, sys
root = pathlib.Path(sys.argv[1])
files = [*(root / "fairseq_fixes").glob("*.py"), *(root / "fairseq_luong" / "fairseq_patches").glob("*.py")]
names = {"sys", "torch", "numpy"}
for f in files:
    for node in ast.walk(ast.parse(f.read_text())):
        if isinstance(node, ast.Import):
            names |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            names |= {node.module} | {f"{node.module}.{a.name}" for a in node.names}
owners = {}
for name in sorted(n for n in names if n.split(".")[0] in ("fairseq", "fairseq_cli", "torch", "numpy", "sys")):
    try:
        module = importlib.import_module(name)
    except ImportError:
        continue
    owners[name] = module
    for key, value in list(vars(module).items()):
        if inspect.isclass(value) and value.__module__.split(".")[0] in ("fairseq", "fairseq_cli", "torch"):
            owners[f"{value.__module__}.{value.__qualname__}"] = value
before = {(o, k): v for o, owner in owners.items() for k, v in list(vars(owner).items())}
import fairseq_luong
from fairseq_fixes.patching import PATCHES
changed = sorted(f"{o}.{k}" for (o, k), v in before.items() if vars(owners[o]).get(k, v) is not v)
print(json.dumps([changed, sorted({t for p in PATCHES.values() for t in p.targets})]))
"""


def test_every_name_the_patches_change_is_a_recorded_target():
    """No patch binds a name of fairseq, torch or numpy (or sys) past the patching helpers: with
    every module and class the patch modules import snapshotted before the plugin is imported,
    each name bound to another object afterwards is one that ``python -m fairseq_fixes`` (or
    the plugin's list) names. A replacement made by hand (``module.np = ...``) fails here."""
    import json

    proc = subprocess.run([sys.executable, "-c", _CHANGED_NAMES, str(Path(fairseq_luong.__file__).parents[1])],
                          capture_output=True, text=True, env=dict(os.environ, PYTHONWARNINGS="ignore"))
    assert proc.returncode == 0, proc.stderr[-3000:]
    changed, targets = json.loads(proc.stdout.splitlines()[-1])
    assert len(changed) >= 40
    assert [name for name in changed if name not in targets] == []


def test_the_fixes_alone_fix_fairseq_without_the_plugin():
    """``import fairseq_fixes`` before fairseq (or ``--user-dir fairseq_fixes``) applies the fixes
    once fairseq is imported, and nothing of the plugin: no architecture, no check."""
    code = """
import sys
import fairseq_fixes
print([m for m in ("fairseq", "torch") if m in sys.modules])
import fairseq, torch
from fairseq.models import ARCH_MODEL_REGISTRY
from fairseq_fixes.patching import PATCHES
from fairseq import checkpoint_utils, options
print(sorted({p.package for p in PATCHES.values()}), "luong_localp" in ARCH_MODEL_REGISTRY,
      hasattr(checkpoint_utils.load_checkpoint_to_cpu, "__wrapped__"), hasattr(options.parse_args_and_arch,
      "__wrapped__"), any(m.startswith("fairseq_luong") for m in sys.modules))
"""
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=Path(fairseq_fixes.__file__).parents[1], env=dict(os.environ, PYTHONWARNINGS="ignore"))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.splitlines()[-2:] == ["[]", "['fairseq_fixes'] False True False False"], proc.stdout


def test_clipping_with_cpu_gradients_on_a_machine_with_cuda_sums_the_norm_where_they_are(monkeypatch):
    """``fairseq-train --cpu`` on a GPU machine: fairseq's ``clip_grad_norm_`` summed the norm
    on ``torch.cuda.current_device()`` and stopped at the first update (gpu_check's CPU training
    on an H200). Here the meta device stands in for the GPU. With the patch the gradients,
    experts' included, are clipped and the norm returned exactly as fairseq does on a machine
    without CUDA."""
    import inspect

    import torch
    from fairseq import utils

    def params():
        generator = torch.Generator().manual_seed(0)
        made = [torch.nn.Parameter(torch.randn(3, 4, generator=generator)) for _ in range(3)]
        for p in made:
            p.grad = 10 * torch.randn(p.shape, generator=generator)
        made[2].expert = True
        return made

    def aggregate(norm):
        return norm * 2  # what a distributed run's all-reduce hands back, made visible

    fairseqs = inspect.unwrap(utils.clip_grad_norm_)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    want = params()
    want_norm = fairseqs(want, 1.0, aggregate)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: torch.device("meta"))
    # fairseq's own choice: the norm on the "GPU" (on CUDA, _foreach_mul_ then refuses it)
    assert fairseqs(params(), 1.0, aggregate).device.type == "meta"
    got = params()
    got_norm = utils.clip_grad_norm_(got, 1.0, aggregate)
    assert got_norm.device.type == "cpu" and torch.equal(got_norm, want_norm)
    assert all(torch.equal(g.grad, w.grad) for g, w in zip(got, want))
    assert not torch.equal(got[2].grad, params()[2].grad)  # the expert's gradient clipped too


def test_a_scripted_sequence_generator_compiles_and_runs_with_the_plugin():
    """TorchScript compiles SequenceGenerator.forward and the _generate it calls from their
    source: a patch there (length_limit.py wrapped _generate) broke every scripted generator
    ("undefined value torch"; fairseq's own TestJitSequenceGenerator). Scripted and eager
    generators give the same translations."""
    from fairseq.sequence_generator import SequenceGenerator

    from tests.helpers import build_model, random_batch

    torch.manual_seed(0)
    model, task, _ = build_model("transformer", "--encoder-layers", "1", "--decoder-layers", "1",
                                 "--encoder-embed-dim", "8", "--decoder-embed-dim", "8", "--encoder-ffn-embed-dim",
                                 "16", "--decoder-ffn-embed-dim", "16", "--encoder-attention-heads", "2",
                                 "--decoder-attention-heads", "2")
    model.eval()
    eager = SequenceGenerator([model], task.target_dictionary, beam_size=2, max_len_b=5)
    scripted = torch.jit.script(SequenceGenerator([model], task.target_dictionary, beam_size=2, max_len_b=5))
    batch = random_batch(task)
    sample = {"net_input": {k: batch[k] for k in ("src_tokens", "src_lengths")}}
    expected = eager.generate([model], sample)
    got = scripted(sample)
    assert [[h["tokens"].tolist() for h in hypos] for hypos in got] == \
        [[h["tokens"].tolist() for h in hypos] for hypos in expected]


def test_train_and_interactive_main_take_a_namespace_as_fairseq_does(data_bin, tmp_path):
    """fairseq_cli.train.main and interactive.main convert a legacy argparse Namespace themselves
    (fairseq's own tests call them so); long_runs.py's wrapper (now save_dir.py's) read cfg.checkpoint first
    (AttributeError: 'Namespace' object has no attribute 'checkpoint', nine of fairseq's RoBERTa
    tests), precision.py's cfg.common (32 of fairseq's translation tests, behind their failure to
    load a checkpoint on today's torch)."""
    from fairseq import options

    parser = options.get_training_parser()
    args = options.parse_args_and_arch(parser, [
        str(data_bin / "bin"), "--arch", "lstm", "--encoder-embed-dim", "8", "--decoder-embed-dim", "8",
        "--encoder-hidden-size", "8", "--decoder-hidden-size", "8", "--decoder-out-embed-dim", "8",
        "--optimizer", "adam", "--lr", "0.01", "--max-tokens", "500", "--max-update", "2", "--cpu",
        "--num-workers", "0", "--disable-validation", "--save-dir", str(tmp_path / "ckpt")])
    fairseq_cli.train.main(args)
    assert (tmp_path / "ckpt" / "checkpoint_last.pt").is_file()

    # and interactive.main, as fairseq's tests/utils.py generate_main calls it: a Namespace, and
    # sys.stdin a StringIO (no .buffer: interactive_input.py's UTF-8 reader read its bytes)
    import contextlib
    import io

    parser = options.get_generation_parser(interactive=True)
    args = options.parse_args_and_arch(parser, [str(data_bin / "bin"), "--path", str(tmp_path / "ckpt" /
                                                 "checkpoint_last.pt"), "--beam", "2", "--cpu", "-s", "en",
                                                 "-t", "de", "--max-len-b", "3"])
    args.buffer_size, args.input, args.batch_size = 0, "-", None
    out, stdin = io.StringIO(), sys.stdin
    sys.stdin = io.StringIO("twenty one cats\nseven\n")
    try:
        with contextlib.redirect_stdout(out):
            fairseq_cli.interactive.main(args)
    finally:
        sys.stdin = stdin
    assert [line.split("\t")[0] for line in out.getvalue().splitlines() if line.startswith("H-")] == ["H-0", "H-1"]


def test_the_fairseq_suite_script_names_a_test_the_plugin_breaks(tmp_path):
    """scripts/fairseq_tests.py on a stand-in checkout of two test files: one passes either way,
    one only without the plugin (it checks that nothing imported fairseq_luong): the script
    counts both runs, names that test and exits 1."""
    tests = tmp_path / "checkout" / "tests"
    tests.mkdir(parents=True)
    (tests / "__init__.py").write_text("")
    (tests / "test_either.py").write_text("def test_sum():\n    assert 1 + 1 == 2\n")
    (tests / "test_alone.py").write_text("import sys\n\n\ndef test_no_plugin():\n"
                                         "    assert 'fairseq_luong' not in sys.modules\n")
    script = Path(fairseq_luong.__file__).parents[1] / "scripts" / "fairseq_tests.py"
    proc = subprocess.run([sys.executable, str(script), str(tmp_path / "checkout"), "--out", str(tmp_path / "out"),
                           "--workers", "1"],
                          capture_output=True, text=True, env=dict(os.environ, PYTHONWARNINGS="ignore"))
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "| without the plugin | 2 | 2 | 0 | 0 | 0 |" in proc.stdout
    assert "| with the plugin | 2 | 1 | 1 | 0 | 0 |" in proc.stdout
    assert "| `tests.test_alone::test_no_plugin` | passed | failed |" in proc.stdout
    assert (tmp_path / "out" / "differences.md").read_text() == proc.stdout.rstrip("\n") + "\n"
