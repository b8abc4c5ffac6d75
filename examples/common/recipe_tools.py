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
  filter-length SRC TGT OUT_PREFIX --max-words N
                           keep the line pairs with at most N words on both sides
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
import json
import os
import re
import sys

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def log_fields(line):
    """(tag, {key: value}) of a fairseq ``--log-format simple`` stats line, or (None, {}).

    ``... | INFO | valid | epoch 003 | valid on 'valid' subset | loss 4.1 | ppl 9.7 | num_updates 900``
    ``... | INFO | train_inner | epoch 004:    175 / 275 loss=6.177, ppl=33.81, ..., wall=475``
    (train_inner lines also get ``step`` and ``steps``: 175 and 275 here)
    """
    parts = [p.strip() for p in line.rstrip("\n").split(" | ")]
    if len(parts) < 4 or parts[1] != "INFO" or parts[2] not in ("train", "valid", "train_inner"):
        return None, {}
    fields = {}
    if parts[2] == "train_inner":
        head, _, rest = " | ".join(parts[3:]).partition(":")  # "epoch 004", "  175 / 275 loss=..."
        words = rest.split(None, 3)
        if not head.startswith("epoch ") or len(words) < 4 or words[1] != "/":
            return None, {}
        fields = {"epoch": head.split()[1], "step": words[0], "steps": words[2]}
        for item in words[3].split(", "):
            key, _, value = item.partition("=")
            fields[key.strip()] = value.strip()
        return parts[2], fields
    for part in parts[3:]:
        key, _, value = part.partition(" ")
        fields[key] = value.strip()
    return parts[2], fields


def training_log():
    """fairseq_luong/analysis/training_log.py, the reader of fairseq-train logs, loaded from
    its file alone: it needs nothing else of the package, whose import loads torch and
    fairseq (seconds that every table and curve would wait for)."""
    import importlib.util

    path = os.path.join(REPO, "fairseq_luong", "analysis", "training_log.py")
    spec = importlib.util.spec_from_file_location("fairseq_luong_training_log", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def read_curve(path):
    """[(updates, wall_s, epoch, valid_loss, valid_ppl)] for each validation in a log;
    the wall clock interpolated between fairseq's train lines (valid lines carry none)."""
    tl = training_log()
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


def cmd_progress(args):
    """One line per epoch end and per validation, as the log streams by."""
    valid = None
    for line in sys.stdin:
        tag, f = log_fields(line)
        msg = None
        if tag == "valid" and "ppl" in f:
            valid = f["ppl"]
            msg = f"valid ppl {valid} after {f.get('num_updates', '?')} updates"
        elif tag == "train" and "ppl" in f:
            minutes = float(f.get("wall", 0)) / 60
            msg = (f"epoch {int(f['epoch'])} done: {f.get('num_updates', '?')} updates, "
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
    with open(args.log, encoding="utf-8") as f:
        for line in f:
            tag, fields = log_fields(line)
            if tag == "valid" and "ppl" in fields:
                last = fields
    if last is None:
        raise SystemExit(f"error: {args.log}: no validation line (| valid | ... | ppl ...)")
    print(json.dumps({"loss": float(last["loss"]), "ppl": float(last["ppl"])}))


def cmd_hyps(args):
    with open(args.ref, encoding="utf-8") as f:
        n_ref = sum(1 for _ in f)
    hyps = {}
    with open(args.generate_out, encoding="utf-8") as f:
        for lineno, line in enumerate(f, 1):
            if not line.startswith("H-"):
                continue
            tag, _, rest = line.rstrip("\n").partition("\t")
            fields = rest.split("\t")
            if not tag[2:].isdigit() or len(fields) < 1:
                raise SystemExit(f"error: {args.generate_out}:{lineno}: malformed H- line")
            hyps.setdefault(int(tag[2:]), fields[1] if len(fields) > 1 else "")
    missing = [i for i in range(n_ref) if i not in hyps]
    if missing or len(hyps) != n_ref:
        raise SystemExit(
            f"error: {args.generate_out}: {len(hyps)} hypotheses for the {n_ref} lines of "
            f"{args.ref} (first missing sample id: {missing[0] if missing else 'none'}): "
            "the test set was filtered or generation did not finish")
    sys.stdout.writelines(hyps[i] + "\n" for i in range(n_ref))


def cmd_filter_length(args):
    kept = total = lineno = 0
    with open(args.src, encoding="utf-8") as fs, open(args.tgt, encoding="utf-8") as ft, \
            open(f"{args.out_prefix}.{args.src_lang}", "w", encoding="utf-8") as os_, \
            open(f"{args.out_prefix}.{args.tgt_lang}", "w", encoding="utf-8") as ot:
        for lineno, (s, t) in enumerate(zip(fs, ft), 1):
            total += 1
            if 0 < len(s.split()) <= args.max_words and 0 < len(t.split()) <= args.max_words:
                os_.write(s)
                ot.write(t)
                kept += 1
        if fs.readline() or ft.readline():
            raise SystemExit(f"error: {args.src} and {args.tgt} differ in line count "
                             f"(one ends after line {lineno})")
    print(f"kept {kept} of {total} pairs with 1..{args.max_words} words on both sides",
          file=sys.stderr)


SPECIALS = {"<unk>", "<s>", "</s>", "<pad>"}


def cmd_vocab_to_dict(args):
    seen = set()
    with open(args.vocab, encoding="utf-8") as f, open(args.dict, "w", encoding="utf-8") as out:
        for lineno, line in enumerate(f, 1):
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
    for line in sys.stdin:
        line = line.strip().replace(" ##AT##-##AT## ", "-").replace("##AT##-##AT##", "-")
        print(detok.detokenize(line.split(), unescape=True))


PAPER_PAIRS = 4_500_000  # Luong et al. section 4: 4.5M sentence pairs (before the length filter)


def cmd_time_epoch(args):
    walls, batches = [], None
    with open(args.log, encoding="utf-8") as f:
        for line in f:
            tag, fields = log_fields(line)
            if tag == "train_inner" and "wall" in fields:
                walls.append(float(fields["wall"]))
                batches = int(fields["steps"])
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
    log_path, tl = os.path.join(d, "train.log"), training_log()
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
    p = sub.add_parser("filter-length", help="drop line pairs longer than --max-words")
    p.add_argument("src")
    p.add_argument("tgt")
    p.add_argument("out_prefix")
    p.add_argument("--src-lang", required=True)
    p.add_argument("--tgt-lang", required=True)
    p.add_argument("--max-words", type=int, required=True)
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
     "filter-length": cmd_filter_length, "vocab-to-dict": cmd_vocab_to_dict,
     "detok": cmd_detok, "time-epoch": cmd_time_epoch, "table": cmd_table}[args.command](args)


if __name__ == "__main__":
    main()
