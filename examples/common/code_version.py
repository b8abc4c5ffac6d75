#!/usr/bin/env python3
"""The code version of a recipe step: a hash of the code the step runs, and nothing else.

  hash ROOT... [--dist NAME...] [--manifest FILE]
        the version (12 hex digits) of the code that ROOTs run: each ROOT is a Python
        file (a script such as scripts/data/chunk_japanese.py) or a package folder (what
        fairseq's --user-dir runs: its __init__ and the PLUGIN_MODULES it names, imported
        once fairseq is); with --manifest, one
        "sha1 path" line per file into FILE
  hashes
        one version per line of stdin, each line the arguments of ``hash`` (ROOT...
        [--dist NAME...]) quoted for the shell: several versions in one process (a recipe
        computes its shared steps' versions at its start)
  diff MANIFEST ROOT... [--dist NAME...]
        the files that differ between MANIFEST and the code ROOTs run now, one a line

What counts as the code of a step: every file of the checkout that Python would execute
for the ROOTs (their imports of the checkout's own modules, followed to the end, package
__init__ files included, read with the ast module: nothing is imported), the data files
beside those modules (the chunk grammar next to the chunker: *.txt, *.json, *.tsv,
*.yaml), and the versions of the installed distributions named by --dist (fairseq,
sentencepiece, ...). Not the documentation (README.md, docs/), not the tests, not the
recipe's shell script: a README-only commit leaves every version unchanged, a change of
the model code changes the version of training and translation. Files are named by their
path inside the checkout, so a move is a change.
"""
import argparse
import ast
import functools
import hashlib
import os
import shlex
import sys
from importlib import metadata

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DATA_SUFFIXES = (".txt", ".json", ".tsv", ".yaml")


def module_file(name):
    """The checkout's file of module ``name`` (a.b.c), or None when it is not ours."""
    base = os.path.join(REPO, *name.split("."))
    for path in (base + ".py", os.path.join(base, "__init__.py")):
        if os.path.isfile(path):
            return path
    return None


def module_name(path):
    """The dotted name of the checkout's module ``path`` (None for a script outside a package)."""
    rel = os.path.relpath(path, REPO)[:-3].split(os.sep)
    if rel[-1] == "__init__":
        rel = rel[:-1]
    # a module belongs to a package only if every folder above it has an __init__.py
    for i in range(1, len(rel)):
        if not os.path.isfile(os.path.join(REPO, *rel[:i], "__init__.py")):
            return None
    return ".".join(rel)


def with_parents(name):
    """``a.b.c`` -> the files of a, a.b and a.b.c (Python runs each package's __init__)."""
    parts = name.split(".")
    files = [module_file(".".join(parts[:i])) for i in range(1, len(parts) + 1)]
    return [f for f in files if f]


def statements(tree):
    """Every statement of ``tree``, nested ones too: an import is a statement, and statements
    are 8 % of the nodes ast.walk visits (14,302 of 180,867 in the checkout's Python files)."""
    todo = [tree]
    while todo:
        node = todo.pop()
        yield node
        for field in ("body", "orelse", "finalbody", "handlers", "cases"):  # try/except, match
            todo.extend(getattr(node, field, None) or ())


@functools.lru_cache(maxsize=None)  # one process reads each file once, however many versions it makes
def imported(path):
    """The checkout's files that the imports in ``path`` run."""
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read(), path)
    own = module_name(path)
    package = own if path.endswith("__init__.py") else (own.rpartition(".")[0] if own else None)
    found = []
    for node in statements(tree):
        names = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                if package is None:
                    continue
                base = package.split(".")
                base = base[:len(base) - node.level + 1]
                stem = ".".join(base + ([node.module] if node.module else []))
            else:
                stem = node.module
            names = [stem] + [f"{stem}.{alias.name}" for alias in node.names]  # a name may be a module
        for name in names:
            if name and module_file(name):
                found.extend(with_parents(name))
    return found


def plugin_modules(init):
    """The PLUGIN_MODULES tuple of a package's __init__.py (fairseq_luong: what it imports
    when fairseq is imported, by name), or ()."""
    with open(init, encoding="utf-8") as f:
        tree = ast.parse(f.read(), init)
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "PLUGIN_MODULES" for t in node.targets):
            return ast.literal_eval(node.value)
    return ()


def code_files(roots):
    """Every checkout file the ROOTs run, and the data files beside those modules, sorted."""
    todo, seen = [], set()
    for root in roots:
        path = os.path.abspath(root)
        folder = os.path.isdir(path)
        if folder:
            path = os.path.join(path, "__init__.py")
        if not os.path.isfile(path):
            raise SystemExit(f"code_version.py: error: {root}: no such file or package")
        todo.append(path)
        name = module_name(path) if path.startswith(REPO + os.sep) else None
        if name:
            todo.extend(with_parents(name))
        if folder and name:  # a plugin folder: also what its register() imports once fairseq is there
            todo.extend(f for m in plugin_modules(path) for f in with_parents(f"{name}.{m}"))
    while todo:
        path = todo.pop()
        if path in seen:
            continue
        seen.add(path)
        todo.extend(imported(path))
    folders = {os.path.dirname(p) for p in seen if module_name(p)}
    for folder in folders:
        for entry in os.listdir(folder):
            if entry.endswith(DATA_SUFFIXES):
                seen.add(os.path.join(folder, entry))
    return sorted(seen)


def manifest(roots, dists):
    """["sha1 path", ...] of the code files, then one "version NAME" line per distribution."""
    lines = []
    for path in code_files(roots):
        with open(path, "rb") as f:
            digest = hashlib.sha1(f.read()).hexdigest()
        lines.append(f"{digest} {os.path.relpath(path, REPO)}")
    for dist in dists:
        try:
            version = metadata.version(dist)
        except metadata.PackageNotFoundError:
            version = "not installed"
        lines.append(f"{version} [{dist}]")
    return lines


def version(lines):
    """The 12 hex digits of a manifest."""
    return hashlib.sha1("\n".join(lines).encode()).hexdigest()[:12]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     epilog=__doc__.split("\n\n", 1)[1],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("hash", help="the code version of ROOTs")
    p.add_argument("roots", nargs="*")
    p.add_argument("--dist", nargs="*", default=[], help="installed distributions whose version counts")
    p.add_argument("--manifest", help="also write the files and their hashes here")
    sub.add_parser("hashes", help="one version per stdin line of `hash` arguments (shell-quoted)")
    p = sub.add_parser("diff", help="what changed since MANIFEST")
    p.add_argument("manifest")
    p.add_argument("roots", nargs="*")
    p.add_argument("--dist", nargs="*", default=[])
    args = parser.parse_args(argv)
    if args.command == "hashes":
        for line in sys.stdin:
            group = parser.parse_args(["hash", *shlex.split(line)])
            print(version(manifest(group.roots, group.dist)))
        return
    lines = manifest(args.roots, args.dist)
    if args.command == "hash":
        print(version(lines))
        if args.manifest:
            with open(args.manifest, "w", encoding="utf-8") as f:
                f.write("\n".join(lines) + "\n")
        return
    try:
        with open(args.manifest, encoding="utf-8") as f:
            before = dict(line.rstrip("\n").split(" ", 1)[::-1] for line in f if " " in line)
    except OSError:
        print("(no record of the code it was made with)")
        return
    now = dict(line.split(" ", 1)[::-1] for line in lines)
    for name in sorted(set(before) | set(now)):
        if before.get(name) != now.get(name):
            state = "added" if name not in before else "removed" if name not in now else "changed"
            print(f"{name} ({state})")


if __name__ == "__main__":
    sys.exit(main())
