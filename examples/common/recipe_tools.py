#!/usr/bin/env python3
"""Small tools the recipes in examples/ share (called from examples/common/recipe.sh).

  progress NAME            read a fairseq-train log on stdin, print one line per epoch
                           (and per mid-epoch validation) to stderr
  curve LOG                the learning curve of a fairseq-train log as TSV:
                           updates, wall seconds, epoch, valid loss, valid ppl
                           (fairseq_luong/analysis/training_log.py reads the log)
  valid-json LOG           the last validation of a fairseq-train/-validate log as
                           JSON: {"loss": ..., "ppl": ...}
  hyps GENERATE_OUT --ref REF
                           fairseq-generate's best hypotheses (H- lines) in sample order,
                           one per line; every line of REF must have one
  vocab-to-dict VOCAB DICT  a vocabulary file (one word a line, as the Stanford release's
                           vocab.50K.*) as a fairseq dictionary; <unk>, <s>, </s> dropped
                           (fairseq has its own)
  detok LANG               tokenised text on stdin (Moses escapes, ##AT##-##AT## hyphens)
                           to plain text on stdout (sacremoses)
  time-epoch LOG           seconds per update of a fairseq-train log with --log-interval 1
                           (the first update untimed) and the time of one epoch
  table WORK NAME...       the results table of the systems in WORK/systems/NAME
                           (parameters, epochs, updates, wall time, best valid ppl while
                           training, valid ppl and test BLEU of the final model), markdown
"""
import argparse
import importlib
import importlib.util
import json
import os
import re
import sys

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def package_module(name):
    """fairseq_luong.NAME ("analysis.training_log"), without running fairseq_luong/__init__.py:
    that registers the plugin with fairseq, importing torch and fairseq (seconds that every
    recipe step would wait for), and the readers used here need neither. The package is
    entered in sys.modules unexecuted, with its folder as its path, so its modules and
    their relative imports load as usual; this process never registers the plugin."""
    if "fairseq_luong" not in sys.modules:
        folder = os.path.join(REPO, "fairseq_luong")
        spec = importlib.util.spec_from_file_location("fairseq_luong", os.path.join(folder, "__init__.py"),
                                                      submodule_search_locations=[folder])
        sys.modules["fairseq_luong"] = importlib.util.module_from_spec(spec)
    return importlib.import_module(f"fairseq_luong.{name}")


def read_curve(path):
    """[(updates, wall_s, epoch, valid_loss, valid_ppl)] for each validation in a log;
    the wall clock interpolated between fairseq's train lines (valid lines carry none)."""
    tl = package_module("analysis.training_log")
    try:
        log = tl.read_training_log(path)
    except ValueError as err:
        raise SystemExit(f"error: {err}")
    wall_seconds = tl.wall_seconds
    curve = []
    for r in log.valid.get("valid", []):
        wall = wall_seconds(log, r.num_updates)
        curve.append((r.num_updates, None if wall is None else round(wall, 1), r.epoch,
                      r.stats["loss"], r.stats["ppl"]))
    return curve


def text_lines(path):
    """The lines of a text file ('-': stdin) as the package reads them: only \\n ends a line."""
    text = package_module("data.text")
    try:
        for _, line in text.iter_lines(path):
            yield line
    except text.DataError as err:
        raise SystemExit(f"error: {err}")


def log_lines(path):
    """The statistics lines (``training_log.LogLine``) of a fairseq-train or -validate log."""
    parse = package_module("analysis.training_log").parse_log_line
    for line in text_lines(path):
        parsed = parse(line)
        if parsed is not None:
            yield parsed


def cmd_progress(args):
    """One line per epoch end and per validation, as the log streams by."""
    parse = package_module("analysis.training_log").parse_log_line
    for line in text_lines("-"):
        parsed, msg = parse(line), None
        f = parsed.fields if parsed is not None else {}
        if parsed is not None and parsed.tag == "valid" and "ppl" in f:
            msg = f"valid ppl {f['ppl']} after {f.get('num_updates', '?')} updates"
        elif parsed is not None and parsed.tag == "train" and "ppl" in f:
            minutes = float(f.get("wall", 0)) / 60
            msg = (f"epoch {int(parsed.epoch)} done: {f.get('num_updates', '?')} updates, "
                   f"train ppl {f['ppl']}, {minutes:.1f} min")
        elif "Stopping training due to" in line:  # "... due to num_updates: 5 >= max_update: 5"
            msg = "stopping: " + line.split("Stopping training due to", 1)[1].strip().replace(":", "")
        elif "Traceback" in line or line.startswith(("RuntimeError", "ValueError")):
            msg = line.strip()
        if msg:
            print(f"[{args.name}] {msg}", file=sys.stderr, flush=True)


def cmd_curve(args):
    print("updates\twall_s\tepoch\tvalid_loss\tvalid_ppl")
    for row in read_curve(args.log):
        print("\t".join(str(x) for x in row))


def cmd_valid_json(args):
    last = None
    for parsed in log_lines(args.log):
        if parsed.tag == "valid" and "ppl" in parsed.fields:
            last = parsed.fields
    if last is None:
        raise SystemExit(f"error: {args.log}: no validation line (| valid | ... | ppl ...)")
    print(json.dumps({"loss": float(last["loss"]), "ppl": float(last["ppl"])}))


def cmd_hyps(args):
    n_ref = sum(1 for _ in text_lines(args.ref))
    reader = package_module("analysis.generate_output")
    try:
        translations = reader.read_generate_output(args.generate_out)
    except reader.GenerateOutputError as err:
        raise SystemExit(f"error: {err}")
    hyps = {i: t.hypothesis for i, t in translations.items() if t.hypothesis is not None}
    missing = [i for i in range(n_ref) if i not in hyps]
    if missing or len(hyps) != n_ref:
        raise SystemExit(
            f"error: {args.generate_out}: {len(hyps)} hypotheses for the {n_ref} lines of "
            f"{args.ref} (first missing sample id: {missing[0] if missing else 'none'}): "
            "the test set was filtered or generation did not finish")
    sys.stdout.writelines(hyps[i] + "\n" for i in range(n_ref))


SPECIALS = {"<unk>", "<s>", "</s>", "<pad>"}


def cmd_vocab_to_dict(args):
    seen = set()
    with open(args.dict, "w", encoding="utf-8") as out:
        for lineno, line in enumerate(text_lines(args.vocab), 1):
            word = line.strip()
            if not word or word in SPECIALS or word in seen:
                continue
            if len(word.split()) != 1:
                raise SystemExit(f"error: {args.vocab}:{lineno}: more than one word on a line")
            seen.add(word)
            out.write(f"{word} 1\n")
    if not seen:
        raise SystemExit(f"error: {args.vocab}: no words")


def cmd_detok(args):
    from sacremoses import MosesDetokenizer

    detok = MosesDetokenizer(lang=args.lang)
    for line in text_lines("-"):
        line = line.strip().replace(" ##AT##-##AT## ", "-").replace("##AT##-##AT##", "-")
        print(detok.detokenize(line.split(), unescape=True))


PAPER_PAIRS = 4_500_000  # Luong et al. section 4: 4.5M sentence pairs (before the length filter)


def cmd_time_epoch(args):
    walls, batches = [], None
    for parsed in log_lines(args.log):
        if parsed.tag == "train_inner" and "wall" in parsed.fields:
            walls.append(float(parsed.fields["wall"]))
            batches = int(parsed.fields["steps"])
    if len(walls) < 2:
        raise SystemExit(f"error: {args.log}: fewer than 2 updates logged (--log-interval 1)")
    per_update = (walls[-1] - walls[0]) / (len(walls) - 1)
    paper_batches = -(-PAPER_PAIRS // args.batch_size)
    print(f"{per_update:.1f} s per update ({len(walls) - 1} updates timed after one untimed, "
          f"batches of up to {args.batch_size} sentences)")
    print(f"one epoch of these data ({batches} batches): {per_update * batches / 3600:.1f} h")
    print(f"one epoch of 4.5M pairs ({paper_batches} batches of {args.batch_size}, an upper bound: "
          f"the length filter removes some): {per_update * paper_batches / 3600:.0f} h "
          f"= {per_update * paper_batches / 86400:.1f} days")


def system_row(work, name):
    """The table's cells of WORK/systems/NAME: parameters, epochs, updates, wall minutes,
    best valid ppl while training, valid ppl of the final model, test BLEU (None when missing)."""
    d = os.path.join(work, "systems", name)
    row = dict.fromkeys(("params", "epochs", "updates", "wall", "best_ppl", "ppl", "bleu"))
    log_path, tl = os.path.join(d, "train.log"), package_module("analysis.training_log")
    try:
        log = tl.read_training_log(log_path) if os.path.exists(log_path) else None
    except ValueError as err:  # e.g. a training that failed before its first update
        print(f"warning: {err}", file=sys.stderr)
        log = None
    if log is not None:
        records = log.train_inner + log.train + [r for rs in log.valid.values() for r in rs]
        last = max(records, key=lambda r: r.num_updates)
        row.update(epochs=last.epoch, updates=last.num_updates)
        wall = tl.wall_seconds(log, last.num_updates)
        row["wall"] = None if wall is None else wall / 60
        valid = [r.stats["ppl"] for r in log.valid.get("valid", []) if "ppl" in r.stats]
        row["best_ppl"] = min(valid) if valid else None
        with open(log_path, encoding="utf-8") as f:  # "num. shared model params: 4,612,096 (..."
            found = re.findall(r"num\. (?:shared )?model params: ([\d,]+)", f.read())
        row["params"] = int(found[-1].replace(",", "")) if found else None
    for key, file in (("ppl", "valid.json"), ("bleu", "bleu.json")):
        path = os.path.join(d, file)
        if os.path.exists(path):
            with open(path, encoding="utf-8") as f:
                row[key] = json.load(f)
    row["ppl"] = row["ppl"] and row["ppl"]["ppl"]
    return row


def cmd_table(args):
    rows, signature = [], None
    fmt = lambda x, spec: "-" if x is None else format(x, spec)  # noqa: E731
    for name in args.names:
        r = system_row(args.work, name)
        params = None if r["params"] is None else r["params"] / 1e6
        rows.append(f"| {name} | {fmt(params, '.2f')} | {fmt(r['epochs'], 'd')} | {fmt(r['updates'], 'd')} | "
                    f"{fmt(r['wall'], '.1f')} | {fmt(r['best_ppl'], '.2f')} | {fmt(r['ppl'], '.2f')} | "
                    f"{fmt(r['bleu'] and r['bleu']['score'], '.2f')} |")
        signature = signature or (r["bleu"] and r["bleu"].get("signature"))
    print(f"| system | M params | epochs | updates | wall min | best valid ppl (training) | "
          f"valid ppl | test {args.metric} |")
    print("|---|---|---|---|---|---|---|---|")
    print("\n".join(rows))
    if signature:
        print(f"\nsacreBLEU signature: {signature}")


def main(argv=None):
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        epilog=__doc__.split("\n\n", 1)[1],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("progress", help="per-epoch lines from a fairseq-train log on stdin")
    p.add_argument("name", help="printed before each line")
    p = sub.add_parser("curve", help="learning curve of a fairseq-train log as TSV")
    p.add_argument("log")
    p = sub.add_parser("valid-json", help="last validation loss and ppl of a log as JSON")
    p.add_argument("log")
    p = sub.add_parser("hyps", help="hypotheses of a fairseq-generate output in sample order")
    p.add_argument("generate_out")
    p.add_argument("--ref", required=True, help="the reference file the hypotheses must match")
    p = sub.add_parser("vocab-to-dict", help="vocabulary file -> fairseq dictionary")
    p.add_argument("vocab")
    p.add_argument("dict")
    p = sub.add_parser("detok", help="Moses-detokenise stdin")
    p.add_argument("lang")
    p = sub.add_parser("time-epoch", help="seconds per update and per epoch from a log")
    p.add_argument("log")
    p.add_argument("--batch-size", type=int, default=128, help="sentences per batch")
    p = sub.add_parser("table", help="results table of the systems in WORK")
    p.add_argument("work")
    p.add_argument("names", nargs="+")
    p.add_argument("--metric", default="sacreBLEU", help="column title of the score")
    args = parser.parse_args(argv)
    {"progress": cmd_progress, "curve": cmd_curve, "valid-json": cmd_valid_json, "hyps": cmd_hyps,
     "vocab-to-dict": cmd_vocab_to_dict,
     "detok": cmd_detok, "time-epoch": cmd_time_epoch, "table": cmd_table}[args.command](args)


if __name__ == "__main__":
    main()
