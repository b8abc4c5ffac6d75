"""The recipes' freshness rule: when a derived file is up to date, and why not.

A derived file OUT (data, model, translation, score, table) is made from a KEY, the text
of everything it depends on: its inputs (by identity: :func:`ident` of a derived input,
:func:`data_key` of a raw one), its options, and the version of the code that makes it
(``examples/common/code_version.py``). :func:`stamp` writes ``OUT.key``: KEY, then a line
``@@@ stamp`` and what OUT is: the paths it covers (``over``), their content hash (``id``)
and a hash of their names, sizes and modification times (``stat``).

OUT is **fresh** for KEY (:func:`fresh`) when the KEY it records equals KEY and its files
are unchanged since it was stamped: the same ``stat`` (cheap), or, when the times differ
(a copy, a restored backup), the same content (``id``). A step whose output is fresh is
skipped; :func:`stale_reason` says why one is not.

Raw inputs are named by content, not by time (:func:`data_key`: path, size, content
hash), so a dataset copied again, or a machine that mounts it afresh, changes no key.
Keys written before that held ``PATH SIZE MTIME``; such a record still matches a
``PATH SIZE HASH`` of the same path and size (:func:`same_key`), so work done before
is kept.

``examples/common/recipe.sh`` runs this file as a script, its command line (``stamp``,
``fresh``, ``stale-reason``, ``ident``, ``data-key``, ``recorded``, ``field``,
``same-or-refuse``, with ``--bounds`` for a training's options: :func:`raised_bounds`); the
stamps it reads and writes are byte for byte those the shell functions wrote before (checked
on the 158 stamps of a study's work folder).
Needs neither fairseq nor torch.
"""
import argparse
import hashlib
import os
import re
import sys
from fnmatch import fnmatch
from typing import List, Optional, Sequence

STAMP = "@@@ stamp"
# not part of what a stamp covers: key files, markers, unfinished outputs, logs (fairseq-
# preprocess writes its log into the data folder), the save-dir lock (fairseq_fixes/save_dir.py)
SKIP = ("*.key", ".done", "*.part", "*.log", ".fairseq_luong.lock")
HASH_CHARS = 16
# A training's options that say only when it stops: fairseq-train resumed from
# checkpoint_last.pt with a larger one goes on where it stopped, as the training that had it
# from the start would have (the data order and the dropout seed follow the epoch and update
# numbers; the plateau schedules resume exactly: fairseq_fixes/resume_state.py,
# tests/test_until_flat.py). Not --max-update: polynomial_decay, cosine and tri_stage read it
# (their total_num_update); not with --quantization-config-path, which reads --max-epoch.
BOUNDS = ("--max-epoch", "--stop-time-hours")
UNLIMITED = 0  # fairseq's value of either bound for none


def _sha1(data: bytes) -> str:
    return hashlib.sha1(data).hexdigest()


def file_sha1(path: str) -> str:
    h = hashlib.sha1()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def covered_files(path: str) -> List[str]:
    """The files a stamp over the folder PATH covers, named as ``find`` names them from
    inside it (``./sub/file``), in C-locale order (``[]`` for a folder with none); ``None``
    when PATH is not a folder (a file stands for itself, a missing path for nothing)."""
    if os.path.isdir(path):
        found = []
        for root, _dirs, files in os.walk(path):
            for name in files:
                full = os.path.join(root, name)
                if os.path.isfile(full) and not os.path.islink(full) and not any(fnmatch(name, p) for p in SKIP):
                    found.append("./" + os.path.relpath(full, path))
        return sorted(found, key=os.fsencode)
    return None


def _find_time(path: str) -> str:
    """A file's modification time as GNU find's %T@ prints it (nanoseconds and a 0)."""
    ns = os.stat(path).st_mtime_ns
    return f"{ns // 10**9}.{ns % 10**9:09d}0"


def stat_hash(paths: Sequence[str]) -> str:
    """A hash of the names, sizes and modification times of the files under PATHS."""
    text = ""
    for path in paths:
        names = covered_files(path)
        if names is not None:
            lines = [f"{n} {os.path.getsize(os.path.join(path, n))} {_find_time(os.path.join(path, n))}"
                     for n in names]
            text += "".join(line + "\n" for line in sorted(lines, key=os.fsencode))
        elif os.path.exists(path):
            text += f". {os.path.getsize(path)} {int(os.stat(path).st_mtime)}\n"
    return _sha1(text.encode())[:HASH_CHARS]


def content_hash(paths: Sequence[str]) -> str:
    """A hash of the names and contents of the files under PATHS: what they are."""
    text = ""
    for path in paths:
        names = covered_files(path)
        if names is not None:
            text += "".join(f"{file_sha1(os.path.join(path, n))}  {n}\n" for n in names)
        elif os.path.exists(path):
            text += f"{file_sha1(path)}  -\n"
    return _sha1(text.encode())[:HASH_CHARS]


def default_cover(out: str) -> List[str]:
    """What a stamp of OUT covers by default: OUT, or the folder of a marker ``DIR/.done``."""
    return [os.path.dirname(out) or "."] if os.path.basename(out) == ".done" else [out]


def stamp(out: str, key: str, over: Optional[Sequence[str]] = None):
    """Record that OUT was made from KEY, and what OUT is (written whole: .part, renamed)."""
    over = list(over) if over else default_cover(out)
    text = (f"{key}\n{STAMP}\n" + "".join(f"over {p}\n" for p in over)
            + f"id {content_hash(over)}\nstat {stat_hash(over)}\n")
    with open(f"{out}.key.part", "w", encoding="utf-8", newline="\n") as f:
        f.write(text)
    os.replace(f"{out}.key.part", f"{out}.key")


def _read_key_file(out: str) -> List[str]:
    with open(f"{out}.key", encoding="utf-8", newline="\n") as f:
        return f.read().split("\n")[:-1]


def recorded(out: str) -> str:
    """The KEY OUT.key records: everything before its last ``@@@ stamp`` line (a key may
    hold other stamps: a key made of key files)."""
    lines = _read_key_file(out)
    last = max((i for i, line in enumerate(lines) if line == STAMP), default=len(lines))
    return "\n".join(lines[:last]).rstrip("\n")


def stamp_field(out: str, field: str) -> List[str]:
    """The values of FIELD (over, id, stat) in OUT's stamp, the one after the last ``@@@ stamp``."""
    lines = _read_key_file(out)
    starts = [i for i, line in enumerate(lines) if line == STAMP]
    if not starts:
        return []
    return [line[len(field) + 1:] for line in lines[starts[-1] + 1:] if line.split(" ", 1)[0] == field]


# a raw input in a key: PATH SIZE HASH (now) or PATH SIZE MTIME (keys written before)
_LEGACY_DATA = re.compile(r"(\S+) (\d+) (\d{9,11})(?=\s|$)")
_DATA = re.compile(r"(\S+) (\d+) ([0-9a-f]{%d})(?=\s|$)" % HASH_CHARS)


def same_key(before: str, now: str) -> bool:
    """KEY BEFORE (recorded) is KEY NOW; a raw input recorded by time before inputs were
    named by content (``PATH SIZE MTIME``) is the same as ``PATH SIZE HASH`` now when path
    and size agree."""
    if before == now:
        return True
    if not _LEGACY_DATA.search(before) or not _DATA.search(now):
        return False
    return _LEGACY_DATA.sub(r"\1 \2 *", before) == _DATA.sub(r"\1 \2 *", now)


def fresh(out: str, key: str) -> bool:
    """OUT was stamped with KEY, and its files have not changed since: the same names,
    sizes and times, or (times differ: a copy) the same content."""
    if not (os.path.exists(out) and os.path.isfile(f"{out}.key")):
        return False
    if not same_key(recorded(out), key):
        return False
    over, stat, ids = stamp_field(out, "over"), stamp_field(out, "stat"), stamp_field(out, "id")
    if not over or not stat:
        return False
    return stat_hash(over) == stat[-1] or (bool(ids) and content_hash(over) == ids[-1])


_KINDS = {"code": None, "from": "made from other input", "inputs": "made from other input files",
          "data": "made from other data"}


def stale_reason(out: str, key: str) -> str:
    """Why OUT is not fresh for KEY: ``missing``, ``made with other options`` (or other
    data, input, code NAME, ...: from the first key line that differs), ``changed since
    it was made``, or ``fresh``."""
    if not (os.path.exists(out) and os.path.isfile(f"{out}.key")):
        return "missing"
    before = recorded(out)
    if not same_key(before, key):
        old = set(before.split("\n"))
        line = next((line for line in key.split("\n") if line not in old), None)
        if line is not None:
            word, _, rest = line.partition(" ")
            if word == "code":
                return f"made by other code ({rest.split(' ')[0]})"
            return _KINDS.get(word) or f"made with other {word}"
    return "fresh" if fresh(out, key) else "changed since it was made"


def ident(path: str) -> str:
    """What FILE is, for the keys of what is made from it: ``PATH#ID``, the id its stamp
    recorded (a derived file), else the hash of its content (a raw input)."""
    ids = stamp_field(path, "id") if os.path.isfile(f"{path}.key") else []
    return f"{path}#{ids[-1] if ids and ids[-1] else file_sha1(path)[:HASH_CHARS]}"


def data_key(paths: Sequence[str], cache: Optional[str] = None) -> str:
    """Raw input files by what they are: ``PATH SIZE HASH`` each (a space after each).

    CACHE (the recipes give ``WORK/.input_hashes``) remembers each file's hash by its real
    path, size, time and inode, so a multi-GB corpus is read once, not at every step."""
    known = _read_cache(cache)
    hashes, new = [], {}
    for path in paths:
        st = os.stat(path)
        where = f"{os.path.realpath(path)}\t{st.st_size}\t{st.st_mtime_ns}\t{st.st_ino}"
        if where not in known:
            known[where] = new[where] = file_sha1(path)[:HASH_CHARS]
        hashes.append((path, st.st_size, known[where]))
    if cache and new:
        _write_cache(cache, known)
    return "".join(f"{path} {size} {h} " for path, size, h in hashes)


def _read_cache(cache: Optional[str]) -> dict:
    known = {}
    if cache and os.path.isfile(cache):
        with open(cache, encoding="utf-8") as f:
            for line in f:
                where, _, h = line.rstrip("\n").rpartition("\t")
                if where and len(h) == HASH_CHARS:
                    known[where] = h
    return known


def _write_cache(cache: str, known: dict):
    os.makedirs(os.path.dirname(cache) or ".", exist_ok=True)
    part = f"{cache}.{os.getpid()}.part"
    with open(part, "w", encoding="utf-8") as f:
        f.writelines(f"{where}\t{h}\n" for where, h in known.items())
    os.replace(part, cache)


def refusal(file: str, key: str, what: str) -> Optional[str]:
    """None when FILE holds KEY (or is new, or holds it in the words of before); else the
    message that refuses: WHAT was made with other options, and each ``--option`` (or other
    part of the key) that differs, before and now."""
    if not os.path.isfile(file):
        return None
    with open(file, encoding="utf-8") as f:
        before = f.read().rstrip("\n")
    if same_key(before, key):
        return None

    def options(text):
        return text.replace(" --", "\n--").split("\n")

    old, new = options(before), options(key)
    lines = ([f"  before: {line}" for line in old if line not in new]
             + [f"  now:    {line}" for line in new if line not in old])
    return "\n".join([f"{what} was made with other options:", *lines])


def _bound(value: str) -> Optional[float]:
    try:
        number = float(value)
    except ValueError:
        return None
    return None if number < 0 else float("inf") if number == UNLIMITED else number


def raised_bounds(before: str, now: str, bounds: Sequence[str] = BOUNDS) -> Optional[List[str]]:
    """``["--max-epoch 9 -> 20", ...]``: the :data:`BOUNDS` whose value NOW raises (0: no
    bound), when NOW differs from the key BEFORE in nothing else (as :func:`same_key` judges
    it); None otherwise: another option differs, a bound is lowered or not a number, or NOW
    has ``--quantization-config-path``."""
    if "--quantization-config-path" in now:
        return None
    # "... --max-epoch 9 --seed 1" -> ["...", "max-epoch 9", "seed 1"]: an option a part
    old, new = before.split(" --"), now.split(" --")
    if len(old) != len(new):
        return None
    raised = []
    for i, (a, b) in enumerate(zip(old, new)):
        name = next((o for o in bounds if a.startswith(o[2:] + " ") and b.startswith(o[2:] + " ")), None)
        if i == 0 or name is None or a == b:
            continue
        # "max-epoch 9  data: ..." -> value "9", the rest "data: ..." (the last option's part)
        was, _, rest = a[len(name) - 1:].partition(" ")
        value, _, _ = b[len(name) - 1:].partition(" ")
        low, high = _bound(was), _bound(value)
        if low is None or high is None or high < low:
            return None
        raised.append(f"{name} {was} -> {value}")
        old[i] = f"{name[2:]} {value}" + (f" {rest}" if rest or a.endswith(" ") else "")
    return raised if raised and same_key(" --".join(old), now) else None


def same_or_refuse(file: str, key: str, what: str, bounds: Sequence[str] = ()) -> Optional[str]:
    """FILE holds KEY from now on, unless it holds another: then the refusal (see
    :func:`refusal`) is returned and nothing is written. With BOUNDS (a training's options:
    :data:`BOUNDS`), a KEY that only raises them (:func:`raised_bounds`) is taken too."""
    message = refusal(file, key, what)
    if message is not None and bounds:
        with open(file, encoding="utf-8") as f:
            if raised_bounds(f.read().rstrip("\n"), key, bounds):
                message = None
    if message is None:
        os.makedirs(os.path.dirname(file) or ".", exist_ok=True)
        with open(file, "w", encoding="utf-8", newline="\n") as f:
            f.write(key + "\n")
    return message


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python examples/common/freshness.py",
                                     description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    for name, help in (("stamp", "record that OUT was made from KEY (stdin), over PATHs"),
                       ("fresh", "exit 0 when OUT is fresh for KEY (stdin), else 1"),
                       ("stale-reason", "why OUT is not fresh for KEY (stdin)"),
                       ("recorded", "the KEY OUT.key records"),
                       ("field", "a field of OUT's stamp (over, id, stat)"),
                       ("ident", "PATH#ID of each file, one a line"),
                       ("data-key", "PATH SIZE HASH of each raw input file (hashes remembered in "
                                    "$FAIRSEQ_LUONG_HASH_CACHE when set)"),
                       ("same-or-refuse", "FILE gets KEY (stdin) unless it holds another: exit 3 with why")):
        p = sub.add_parser(name, help=help)
        if name == "data-key":
            p.add_argument("paths", nargs="*")
        elif name == "same-or-refuse":
            p.add_argument("file")
            p.add_argument("what")
            p.add_argument("--bounds", action="store_true",
                           help=f"a training's options: take a KEY that only raises {' or '.join(BOUNDS)}, "
                                f"printing what it raised")
        elif name == "ident":
            p.add_argument("paths", nargs="+")
        else:
            p.add_argument("path")
            if name == "stamp":
                p.add_argument("over", nargs="*")
            if name == "field":
                p.add_argument("field")
    args = parser.parse_args(argv)
    # keys come as the shell's $(...) leaves them: without trailing newlines
    keyed = ("stamp", "fresh", "stale-reason", "same-or-refuse")
    key = sys.stdin.read().rstrip("\n") if args.command in keyed else None
    out = sys.stdout
    if args.command == "stamp":
        stamp(args.path, key, args.over)
    elif args.command == "fresh":
        return 0 if fresh(args.path, key) else 1
    elif args.command == "stale-reason":
        print(stale_reason(args.path, key), file=out)
    elif args.command == "recorded":
        print(recorded(args.path), file=out)
    elif args.command == "field":
        for value in stamp_field(args.path, args.field):
            print(value, file=out)
    elif args.command == "ident":
        for path in args.paths:
            print(ident(path), file=out)
    elif args.command == "data-key":
        try:
            out.write(data_key(args.paths, os.environ.get("FAIRSEQ_LUONG_HASH_CACHE")))
        except OSError as e:
            print(f"error: cannot read {e.filename}: {e.strerror}", file=sys.stderr)
            return 1
    elif args.command == "same-or-refuse":
        before = None
        if args.bounds and os.path.isfile(args.file):
            with open(args.file, encoding="utf-8") as f:
                before = f.read().rstrip("\n")
        message = same_or_refuse(args.file, key, args.what, BOUNDS if args.bounds else ())
        if message:
            print(message, file=out)
            return 3
        if before is not None and not same_key(before, key):
            print(f"raised {', '.join(raised_bounds(before, key))}", file=out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
