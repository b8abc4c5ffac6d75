"""Validation and training statistics from fairseq-train logs (``--log-format`` simple,
tqdm or json; the console output or ``--log-file``), for learning curves (Luong et al.
2015, Fig. 5)."""
import bisect
import json
import re
from typing import Dict, List, NamedTuple, Optional

# "... | valid | epoch 003 | valid on 'valid' subset | loss 6.07 | ppl 67.17 | ... | num_updates 10"
# (fairseq-validate: "... | valid | valid on 'valid' subset | loss 6.07 | ...", no epoch)
_SIMPLE_VALID = re.compile(r"\| (?:valid|\S+) \| (?:epoch (\d+) \| )?valid on '([^']+)' subset \| (.*)$")
# "... | train | epoch 002 | loss 6.254 | ppl 76.31 | ... | num_updates 10 | ..."
_SIMPLE_TRAIN = re.compile(r"\| train \| epoch (\d+) \| (.*)$")
# "... | train_inner | epoch 002:      3 / 5 loss=6.302, ppl=78.89, ..., num_updates=8, ..."
_SIMPLE_INNER = re.compile(r"\| train_inner \| epoch (\d+):\s+(\d+) / (\d+) (.*)$")
# "... | valid | {"epoch": 2, "valid_loss": "6.07", ...}" (json: keys prefixed by the tag)
_JSON = re.compile(r"\| (\w+) \| (\{\".*\})\s*$")
# "... | fairseq.trainer | Loaded checkpoint DIR/checkpoint_last.pt (epoch 15 @ 3178 updates)": a resume
_RESUMED = re.compile(r"Loaded checkpoint .* \(epoch \d+ @ (\d+) updates\)")


class LogLine(NamedTuple):
    """One statistics line of a fairseq-train (or fairseq-validate) log, as printed."""

    tag: str  # "valid", "train" (end of an epoch) or "train_inner" (every --log-interval updates)
    subset: Optional[str]  # valid: the subset validated
    epoch: Optional[str]  # as printed ("003"); None in fairseq-validate's lines
    fields: Dict[str, str]  # {"loss": "6.302", "ppl": "78.89", "num_updates": "8", ...};
    # train_inner also "step" and "steps": the batch of the epoch and the epoch's batches


class Record(NamedTuple):
    epoch: int
    num_updates: int
    stats: Dict[str, float]  # loss, nll_loss, ppl, ... (whatever the line has)


class TrainingLog(NamedTuple):
    path: str
    valid: Dict[str, List[Record]]  # by subset name
    train: List[Record]  # end of each epoch
    train_inner: List[Record]  # every --log-interval updates


def _bar_fields(text: str) -> Dict[str, str]:
    """"loss 6.07 | ppl 67.17" -> {"loss": "6.07", "ppl": "67.17"}."""
    return {k.strip(): v.strip() for k, _, v in (item.strip().partition(" ") for item in text.split(" | "))
            if v.strip()}


def parse_log_line(line: str) -> Optional[LogLine]:
    """The statistics of one line of a fairseq-train log (``--log-format`` simple, tqdm or
    json; fairseq-validate's too), or None for any other line. Raises ValueError (or a
    json error) for a recognised line that is malformed."""
    m = _SIMPLE_VALID.search(line)
    if m:
        return LogLine("valid", m.group(2), m.group(1), _bar_fields(m.group(3)))
    m = _SIMPLE_TRAIN.search(line)
    if m:
        return LogLine("train", None, m.group(1), _bar_fields(m.group(2)))
    m = _SIMPLE_INNER.search(line)
    if m:
        items = (item.split("=", 1) for item in m.group(4).split(", ") if "=" in item)
        fields = {k.strip(): v.strip() for k, v in items}
        return LogLine("train_inner", None, m.group(1), {**fields, "step": m.group(2), "steps": m.group(3)})
    m = _JSON.search(line)
    if m:
        tag, data = m.group(1), json.loads(m.group(2))
        if "epoch" not in data:
            return None
        if tag in ("train_inner", "train"):
            prefix = "" if tag == "train_inner" else "train_"
            return LogLine(tag, None, str(data["epoch"]), _json_fields(data, prefix))
        if f"{tag}_loss" in data:
            return LogLine("valid", tag, str(data["epoch"]), _json_fields(data, f"{tag}_"))
    return None


def _json_fields(data: dict, prefix: str) -> Dict[str, str]:
    return {k[len(prefix):]: str(v) for k, v in data.items()
            if k.startswith(prefix) and k not in ("epoch", "update")}


def _numbers(fields: Dict[str, str]) -> Dict[str, float]:
    out = {}
    for key, value in fields.items():
        try:
            out[key] = float(value)
        except ValueError:
            pass
    return out


def _record(line: LogLine) -> Record:
    stats = _numbers({k: v for k, v in line.fields.items() if k not in ("step", "steps")})
    if "num_updates" not in stats:
        raise ValueError("no num_updates")
    return Record(int(line.epoch), int(stats.pop("num_updates")), stats)


def read_training_log(path: str) -> TrainingLog:
    """Every validation, epoch and inner training record in a fairseq-train log, in order.

    A log that resumes (fairseq-train run again into the same --save-dir, its output appended)
    reads as one training: at each "Loaded checkpoint ... (epoch E @ U updates)" the records
    after update U go (that work was lost with the stopped run and is done again), and the
    wall clock, which fairseq restarts at 0 in each run, goes on from its value at update U.

    Raises ValueError naming the file when it holds none (not a fairseq-train log), and
    naming the line when a recognised line is malformed.
    """
    valid: Dict[str, List[Record]] = {}
    train: List[Record] = []
    inner: List[Record] = []
    offset = 0.0  # seconds of wall clock before this run of fairseq-train
    with open(path, encoding="utf-8", errors="replace") as f:
        for lineno, line in enumerate(f, 1):
            resumed = _RESUMED.search(line)
            if resumed and int(resumed.group(1)) > 0:
                at = int(resumed.group(1))
                train, inner = [r for r in train if r.num_updates <= at], [r for r in inner if r.num_updates <= at]
                valid = {k: [r for r in v if r.num_updates <= at] for k, v in valid.items()}
                offset = _wall_at(train + inner, at) or 0.0
                continue
            try:
                parsed = parse_log_line(line)
                if parsed is None or parsed.epoch is None:  # not a statistics line of training
                    continue
                record = _record(parsed)
                if offset and "wall" in record.stats:
                    record.stats["wall"] += offset
            except (ValueError, KeyError) as err:
                raise ValueError(f"{path}:{lineno}: malformed fairseq-train log line ({err}): {line.strip()[:200]}")
            if parsed.tag == "valid":
                valid.setdefault(parsed.subset, []).append(record)
            else:
                (train if parsed.tag == "train" else inner).append(record)
    if not (valid or train or inner):
        raise ValueError(
            f"{path}: no fairseq-train statistics found (expected the output of fairseq-train "
            "with --log-format simple, tqdm or json)"
        )
    return TrainingLog(path, valid, train, inner)


def wall_seconds(log: TrainingLog, num_updates: int) -> Optional[float]:
    """fairseq's wall clock (``wall``: seconds since training began, carried over a resume
    by read_training_log) after ``num_updates`` updates. Validation lines carry none, so it
    is interpolated linearly in updates between the train and train_inner records around it
    (from 0 s at update 0), and extrapolated past the last one at the rate of the last two.
    None when the log has no wall clock (e.g. fairseq-validate output)."""
    return _wall_at(log.train_inner + log.train, num_updates)


def _wall_at(records: List[Record], num_updates: int) -> Optional[float]:
    known = {r.num_updates: r.stats["wall"] for r in records if "wall" in r.stats}
    if not known:
        return None
    known.setdefault(0, 0.0)
    updates = sorted(known)
    k = min(max(bisect.bisect_left(updates, num_updates), 1), len(updates) - 1)
    if len(updates) < 2:
        return known[updates[0]]
    (u0, w0), (u1, w1) = (updates[k - 1], known[updates[k - 1]]), (updates[k], known[updates[k]])
    return max(0.0, w0 + (num_updates - u0) * (w1 - w0) / (u1 - u0))
