"""Validation and training statistics from fairseq-train logs (``--log-format`` simple,
tqdm or json; the console output or ``--log-file``), for learning curves (Luong et al.
2015, Fig. 5)."""
import bisect
import json
import re
from typing import Dict, List, NamedTuple, Optional

# "... | valid | epoch 003 | valid on 'valid' subset | loss 6.07 | ppl 67.17 | ... | num_updates 10"
_SIMPLE_VALID = re.compile(r"\| (?:valid|\S+) \| epoch (\d+) \| valid on '([^']+)' subset \| (.*)$")
# "... | train | epoch 002 | loss 6.254 | ppl 76.31 | ... | num_updates 10 | ..."
_SIMPLE_TRAIN = re.compile(r"\| train \| epoch (\d+) \| (.*)$")
# "... | train_inner | epoch 002:      3 / 5 loss=6.302, ppl=78.89, ..., num_updates=8, ..."
_SIMPLE_INNER = re.compile(r"\| train_inner \| epoch (\d+):\s+\d+ / \d+ (.*)$")
# "... | valid | {"epoch": 2, "valid_loss": "6.07", ...}" (json: keys prefixed by the tag)
_JSON = re.compile(r"\| (\w+) \| (\{\".*\})\s*$")


class Record(NamedTuple):
    epoch: int
    num_updates: int
    stats: Dict[str, float]  # loss, nll_loss, ppl, ... (whatever the line has)


class TrainingLog(NamedTuple):
    path: str
    valid: Dict[str, List[Record]]  # by subset name
    train: List[Record]  # end of each epoch
    train_inner: List[Record]  # every --log-interval updates


def _numbers(pairs) -> Dict[str, float]:
    out = {}
    for key, value in pairs:
        try:
            out[key.strip()] = float(value)
        except ValueError:
            pass
    return out


def _bar_stats(text: str) -> Dict[str, float]:
    return _numbers(item.strip().split(" ", 1) for item in text.split(" | ") if " " in item.strip())


def _record(epoch, stats) -> Record:
    if "num_updates" not in stats:
        raise ValueError("no num_updates")
    return Record(int(epoch), int(stats.pop("num_updates")), stats)


def _json_record(tag: str, data: dict, prefix: str) -> Record:
    stats = _numbers((k[len(prefix):], v) for k, v in data.items()
                     if k.startswith(prefix) and k not in ("epoch", "update"))
    return _record(data["epoch"], stats)


def read_training_log(path: str) -> TrainingLog:
    """Every validation, epoch and inner training record in a fairseq-train log, in order.

    Raises ValueError naming the file when it holds none (not a fairseq-train log), and
    naming the line when a recognised line is malformed.
    """
    valid: Dict[str, List[Record]] = {}
    train: List[Record] = []
    inner: List[Record] = []
    with open(path, encoding="utf-8", errors="replace") as f:
        for lineno, line in enumerate(f, 1):
            try:
                m = _SIMPLE_VALID.search(line)
                if m:
                    valid.setdefault(m.group(2), []).append(_record(m.group(1), _bar_stats(m.group(3))))
                    continue
                m = _SIMPLE_TRAIN.search(line)
                if m:
                    train.append(_record(m.group(1), _bar_stats(m.group(2))))
                    continue
                m = _SIMPLE_INNER.search(line)
                if m:
                    pairs = (item.split("=", 1) for item in m.group(2).split(", ") if "=" in item)
                    inner.append(_record(m.group(1), _numbers(pairs)))
                    continue
                m = _JSON.search(line)
                if m:
                    tag, data = m.group(1), json.loads(m.group(2))
                    if "epoch" not in data:
                        continue
                    if tag == "train_inner":
                        inner.append(_json_record(tag, data, ""))
                    elif tag == "train":
                        train.append(_json_record(tag, data, "train_"))
                    elif f"{tag}_loss" in data:
                        valid.setdefault(tag, []).append(_json_record(tag, data, f"{tag}_"))
            except (ValueError, KeyError) as err:
                raise ValueError(f"{path}:{lineno}: malformed fairseq-train log line ({err}): {line.strip()[:200]}")
    if not (valid or train or inner):
        raise ValueError(
            f"{path}: no fairseq-train statistics found (expected the output of fairseq-train "
            "with --log-format simple, tqdm or json)"
        )
    return TrainingLog(path, valid, train, inner)


def wall_seconds(log: TrainingLog, num_updates: int) -> Optional[float]:
    """fairseq's wall clock (``wall``: seconds since training began, carried over a resume)
    after ``num_updates`` updates. Validation lines carry none, so it is interpolated
    linearly in updates between the train and train_inner records around it (from 0 s at
    update 0), and extrapolated past the last one at the rate of the last two. None when
    the log has no wall clock (e.g. fairseq-validate output)."""
    known = {r.num_updates: r.stats["wall"] for r in log.train_inner + log.train if "wall" in r.stats}
    if not known:
        return None
    known.setdefault(0, 0.0)
    updates = sorted(known)
    k = min(max(bisect.bisect_left(updates, num_updates), 1), len(updates) - 1)
    if len(updates) < 2:
        return known[updates[0]]
    (u0, w0), (u1, w1) = (updates[k - 1], known[updates[k - 1]]), (updates[k], known[updates[k]])
    return max(0.0, w0 + (num_updates - u0) * (w1 - w0) / (u1 - u0))
