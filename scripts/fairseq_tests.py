#!/usr/bin/env python3
"""fairseq's own test suite, without the plugin and with it imported: what differs.

  python scripts/fairseq_tests.py FAIRSEQ_CHECKOUT [--out DIR] [--workers N] [-k EXPR] [--package P] [FILE ...]

FAIRSEQ_CHECKOUT is a checkout of fairseq (its ``tests/`` folder), at the commit ve-fairseq
0.12.3 is built from, ecbf110e (``git clone https://github.com/facebookresearch/fairseq &&
git -C fairseq checkout ecbf110e``); nothing of it is copied into this repository. The tests
run twice, each in a copy of that ``tests/`` folder under --out: once as they are (fairseq
alone; the plugin is never imported), once with a ``conftest.py`` that imports
``fairseq_luong`` first, as a notebook or a training script that imports the plugin beside
fairseq's own models does (its patches then act on every model); ``--package fairseq_fixes``
imports the fixes alone instead. FILES (default: every top-level ``tests/test_*.py``) are given
relative to ``tests/``.

Prints the counts of each run (passed, failed, skipped, errors) and every test whose outcome
differs, with the first line of its failure; writes both JUnit reports and ``differences.md``
under --out. The rule it checks: no test that passes without the plugin fails with it (exit
status 1 if one does).
"""
import argparse
import os
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET

CONFTEST = '''"""Written by fairseq_luong's scripts/fairseq_tests.py: {package} imported before any test."""
import {package}  # noqa: F401
'''


def outcomes(junit):
    """{test id: (outcome, first line of its message)} of a JUnit report."""
    result = {}
    for case in ET.parse(junit).getroot().iter("testcase"):
        name = f"{case.get('classname')}::{case.get('name')}"
        outcome, message = "passed", ""
        for kind in ("failure", "error", "skipped"):
            node = case.find(kind)
            if node is not None:
                outcome = {"failure": "failed", "error": "error", "skipped": "skipped"}[kind]
                message = (node.get("message") or node.text or "").strip().splitlines()
                message = message[0][:200] if message else ""
                break
        result[name] = (outcome, message)
    return result


def run(side, source, out, files, workers, keyword, package=None):
    root = os.path.join(out, side)
    shutil.rmtree(root, ignore_errors=True)
    shutil.copytree(os.path.join(source, "tests"), os.path.join(root, "tests"))
    if package:
        with open(os.path.join(root, "conftest.py"), "w", encoding="utf-8") as f:
            f.write(CONFTEST.format(package=package))
    junit = os.path.join(out, f"{side}.xml")
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-o", "addopts=", f"--junitxml={junit}",
           *[os.path.join("tests", f) for f in files]]
    if workers > 1:
        cmd += ["-n", str(workers)]
    if keyword:
        cmd += ["-k", keyword]
    env = dict(os.environ, PYTHONWARNINGS="ignore", OMP_NUM_THREADS="1")
    print(f"[fairseq_tests] {side}: {' '.join(cmd)} (in {root})", file=sys.stderr, flush=True)
    with open(os.path.join(out, f"{side}.log"), "w", encoding="utf-8") as log:
        subprocess.run(cmd, cwd=root, env=env, stdout=log, stderr=subprocess.STDOUT)
    if not os.path.exists(junit):
        raise SystemExit(f"fairseq_tests.py: pytest wrote no report for {side}: see {out}/{side}.log")
    return outcomes(junit)


def counts(results):
    c = {"passed": 0, "failed": 0, "error": 0, "skipped": 0}
    for outcome, _ in results.values():
        c[outcome] += 1
    return c


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    parser.add_argument("checkout", help="a fairseq checkout (its tests/ folder is used)")
    parser.add_argument("files", nargs="*", help="test files relative to tests/ (default: every top-level test_*.py)")
    parser.add_argument("--out", default="fairseq_tests", help="where the copies and reports go (default: %(default)s)")
    parser.add_argument("--workers", type=int, default=2, help="pytest-xdist workers (default: 2)")
    parser.add_argument("-k", dest="keyword", help="pytest -k expression")
    parser.add_argument("--package", default="fairseq_luong", choices=["fairseq_luong", "fairseq_fixes"],
                        help="what the second run imports first: the plugin, or the fixes alone (default: %(default)s)")
    args = parser.parse_args(argv)
    tests = os.path.join(args.checkout, "tests")
    if not os.path.isdir(tests):
        parser.error(f"{args.checkout} has no tests/ folder: give a checkout of fairseq")
    files = args.files or sorted(f for f in os.listdir(tests) if f.startswith("test_") and f.endswith(".py"))
    missing = [f for f in files if not os.path.isfile(os.path.join(tests, f))]
    if missing:
        parser.error(f"no {', '.join(missing)} in {tests}")
    out = os.path.abspath(args.out)
    os.makedirs(out, exist_ok=True)
    plain = run("without_plugin", args.checkout, out, files, args.workers, args.keyword)
    side = "with_plugin" if args.package == "fairseq_luong" else f"with_{args.package}"
    plugin = run(side, args.checkout, out, files, args.workers, args.keyword, args.package)
    label = "with the plugin" if args.package == "fairseq_luong" else f"with {args.package} alone"
    lines = ["| run | tests | passed | failed | errors | skipped |", "|---|---|---|---|---|---|"]
    for side, results in (("without the plugin", plain), (label, plugin)):
        c = counts(results)
        lines.append(f"| {side} | {len(results)} | {c['passed']} | {c['failed']} | {c['error']} | {c['skipped']} |")
    differ = sorted(t for t in set(plain) | set(plugin)
                    if plain.get(t, ("missing",))[0] != plugin.get(t, ("missing",))[0])
    lines += ["", f"{len(differ)} tests differ:" if differ else "No test differs.", ""]
    if differ:
        lines += ["| test | without | with | message with the plugin (or without) |", "|---|---|---|---|"]
        for t in differ:
            a, b = plain.get(t, ("missing", "")), plugin.get(t, ("missing", ""))
            message = (b[1] or a[1]).replace("|", "\\|")
            lines.append(f"| `{t}` | {a[0]} | {b[0]} | {message} |")
    text = "\n".join(lines) + "\n"
    with open(os.path.join(out, "differences.md"), "w", encoding="utf-8") as f:
        f.write(text)
    print(text)
    worse = [t for t in differ if plain.get(t, ("",))[0] == "passed"]
    if worse:
        print(f"{len(worse)} tests pass without the plugin and not with it", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
