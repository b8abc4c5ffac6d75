"""Run fairseq commands in one process, with or without the plugin, and print what they gave.

  python tests/coexistence_driver.py SPEC.json OUT.json

SPEC: {"plugin": bool, "steps": [{"name": ..., "command": "train" | "generate" | "validate" |
"eval_lm" | "interactive" | "hub_lm" | "hub_roberta", "argv": [...], "stdin": str}]}. Without
"plugin" the package is never imported (fairseq alone, as a user without ``--user-dir`` runs
it); with it every command gets ``--user-dir``. Each step's result in OUT: what decides a result
(loss lines, hypotheses, scores), or the error it stopped with ({"error": "Type: message"}).
tests/test_coexistence.py compares the two.
"""
import contextlib
import importlib
import io
import json
import logging
import os
import re
import sys

USER_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "fairseq_luong")
# fairseq's log lines that hold results, by logger; and the clocks and speeds in them
RESULT_LOGGERS = ("train_inner", "train", "valid", "fairseq_cli.eval_lm", "fairseq_cli.validate")
TIMINGS = re.compile(r"[,|]?\s*\b(wps|ups|wall|train_wall|gb_free|cuda_gb_\w+|sentences/s|tokens/s)[= ][\d.]+")


def results_of_log(log):
    """The results a command logged (losses, perplexities, learning rates), without its timings."""
    lines = []
    for line in log.splitlines():
        level, _, rest = line.partition(" | ")
        name, _, message = rest.partition(" | ")
        if name in RESULT_LOGGERS and "tokens/s" not in message and ("loss" in message or "Loss" in message) \
                and not message.startswith(("{", "Namespace(")):  # not a dump of the options (paths)
            lines.append(TIMINGS.sub("", message).strip())
    return lines


def results_of_output(out):
    """fairseq-generate's and -interactive's S/T/H/D/P/A/E lines, in order."""
    return [line for line in out.splitlines() if re.match(r"^[STHDPAE]-\d+\t", line)]


def command(name, argv, stdin):
    """fairseq_cli.NAME's cli_main with ``argv``: (printed, logged)."""
    module = importlib.import_module(f"fairseq_cli.{name}")
    from fairseq import checkpoint_utils

    if hasattr(checkpoint_utils.save_checkpoint, "best"):
        del checkpoint_utils.save_checkpoint.best  # a fresh process starts without
    out, log = io.StringIO(), io.StringIO()
    handler = logging.StreamHandler(log)
    handler.setFormatter(logging.Formatter("%(levelname)s | %(name)s | %(message)s"))
    root = logging.getLogger()
    root.addHandler(handler)
    root.setLevel(logging.INFO)
    saved = sys.argv, sys.stdin
    sys.argv = [f"fairseq-{name.replace('_', '-')}", *argv]
    if stdin is not None:
        sys.stdin = io.TextIOWrapper(io.BytesIO(stdin.encode("utf-8")), encoding="utf-8")
    try:
        with contextlib.redirect_stdout(out):
            module.cli_main()
    finally:
        sys.argv, sys.stdin = saved
        root.removeHandler(handler)
    return out.getvalue(), log.getvalue()


def hub(kind, argv):
    """from_pretrained of a language model (scores of a sentence) or RoBERTa (its features)."""
    folder, checkpoint, data, sentence = argv
    if kind == "hub_lm":
        from fairseq.models.transformer_lm import TransformerLanguageModel

        model = TransformerLanguageModel.from_pretrained(folder, checkpoint, data_name_or_path=data)
        return {"scores": [round(float(x), 4) for x in model.score(sentence)["positional_scores"]]}
    from fairseq.models.roberta import RobertaModel

    # bpe=None: the words are the data's own (RoBERTa's default, GPT-2's BPE, downloads its files)
    model = RobertaModel.from_pretrained(folder, checkpoint, data_name_or_path=data, bpe=None)
    model.eval()
    tokens = model.task.source_dictionary.encode_line(sentence, append_eos=True).long().unsqueeze(0)
    import torch

    with torch.no_grad():
        features = model.extract_features(tokens)
    return {"features": [round(float(x), 4) for x in features.sum(-1).flatten()]}


def main():
    spec_path, out_path = sys.argv[1:3]
    with open(spec_path, encoding="utf-8") as f:
        spec = json.load(f)
    import torch

    torch.set_num_threads(1)
    if not spec["plugin"]:
        # fairseq alone cannot load its own checkpoints on torch >= 2.6 (weights_only by default):
        # the reference side allows exactly the globals they hold, as any user of today's torch must
        # (the plugin does the same: fairseq_fixes/checkpoint_loading.py); weights_only stays on
        import argparse

        import numpy as np

        torch.serialization.add_safe_globals([argparse.Namespace, np.core.multiarray._reconstruct, np.ndarray,
                                              np.dtype, np.dtypes.Int64DType])
        # and numpy 2 removed np.compat.long, which fairseq's TokenBlockDataset and LanguagePairDataset
        # read (AttributeError): put back, as the plugin does for those modules (batching.py)
        if not hasattr(np, "compat"):
            import types

            np.compat = types.SimpleNamespace(long=int)
    results = {}
    for step in spec["steps"]:
        argv = list(step.get("argv", []))
        try:
            if step["command"].startswith("hub_"):
                if spec["plugin"]:
                    import fairseq_luong  # noqa: F401  (from_pretrained has no --user-dir: a user imports it)
                results[step["name"]] = hub(step["command"], argv)
                continue
            if spec["plugin"]:
                argv += ["--user-dir", USER_DIR]
            if step["command"] in ("train", "generate", "validate", "interactive", "eval_lm"):
                argv += ["--num-workers", "0"]
            out, log = command(step["command"], argv, step.get("stdin"))
            results[step["name"]] = {"log": results_of_log(log), "output": results_of_output(out)}
        except BaseException as err:  # noqa: BLE001  (what the step died of is its result)
            message = str(err).strip().splitlines()
            results[step["name"]] = {"error": f"{type(err).__name__}: {message[-1] if message else ''}"}
    with open(out_path, "w", encoding="utf-8") as f:
        json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
