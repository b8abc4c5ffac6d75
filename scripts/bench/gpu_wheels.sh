#!/usr/bin/env bash
# Fill .whl/ (git-ignored) with the wheels that the GPU machine lacks, for Python 3.12 on
# manylinux x86_64, pinned to the versions scripts/setup.sh installs here; then
# scripts/bench/gpu_session.sh installs them there (docs/gpu.md, "A GPU session, step by step").
#
# Usage: bash scripts/bench/gpu_wheels.sh [--out DIR]   fetch into DIR (default: .whl in the
#                                                        repository root); a wheel already there is
#                                                        kept, one of another version removed
#        bash scripts/bench/gpu_wheels.sh --list        the pins, one NAME==VERSION a line
#
# The GPU machine has what scripts/bench/gpu_machine_packages.txt lists (torch, numpy, sacrebleu,
# sentencepiece, scikit-learn, regex, tqdm, cython, pyyaml, ...). Beyond those, gpu_check.py needs
# (tests/test_gpu_session.py traces what it imports):
#   ve-fairseq               fairseq itself; compiled (Cython helpers, libbleu): the cp312 wheel
#   hydra-core, omegaconf    fairseq's configuration (pure Python)
#   antlr4-python3-runtime   omegaconf's parser; PyPI has no wheel of 4.9.3: built here from its
#                            source (pure Python, a py3 wheel)
#   bitarray                 fairseq.data.indexed_dataset; compiled: the cp312 manylinux wheel
#   sacremoses               not gpu_check: the recipes' Moses tokenizer (pure Python, small)
# Not carried: cffi (ve-fairseq's metadata names it; fairseq never imports it), mecab-python3,
# ipadic, nltk (the perSPE Japanese chunker only), matplotlib-fontja (plots only).
# Then each wheel's needs (Requires-Dist, without extras, for Python 3.12 on Linux) are checked
# against the carried wheels and the machine's list, and the total size is printed: the wheels
# travel with the working tree, 64 MiB at most in all. .whl/COMMIT records the commit they go
# with and a digest of the checkout's files (the GPU machine's copy may have no .git, or a .git
# of another commit: seen on 2026-11-27). Takes about a minute the first time.
set -euo pipefail

PINS=(
  "ve-fairseq==0.12.3"
  "hydra-core==1.3.8"
  "omegaconf==2.3.1"
  "antlr4-python3-runtime==4.9.3"
  "bitarray==3.12.3"
  "sacremoses==0.2.0"
)
BUILT_HERE=("antlr4-python3-runtime")  # no wheel on PyPI: pip wheel from the source
NOT_NEEDED=("cffi")                    # in a wheel's Requires-Dist, never imported
PLATFORMS=(manylinux_2_28_x86_64 manylinux_2_27_x86_64 manylinux_2_17_x86_64 manylinux2014_x86_64
           manylinux1_x86_64)

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
out="$REPO/.whl"
while [[ $# -gt 0 ]]; do
  case "$1" in
    -h|--help) sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    --list) printf '%s\n' "${PINS[@]}"; exit 0 ;;
    --out) out="$2"; shift 2 ;;
    *) echo "gpu_wheels.sh: unknown option $1 (--help)" >&2; exit 2 ;;
  esac
done
mkdir -p "$out"
py=python3
platform_flags=()
for p in "${PLATFORMS[@]}"; do platform_flags+=(--platform "$p"); done

stem() {  # a wheel file's name up to its version: ve-fairseq==0.12.3 -> ve_fairseq-0.12.3
  local name="${1%%==*}" version="${1##*==}"
  name="$(echo "$name" | tr 'A-Z' 'a-z' | sed 's/[-_.]\{1,\}/_/g')"
  echo "$name-$version"
}

for pin in "${PINS[@]}"; do
  if compgen -G "$out/$(stem "$pin")-*.whl" > /dev/null; then
    echo "[gpu_wheels] $pin: already in $out"
    continue
  fi
  if [[ " ${BUILT_HERE[*]} " == *" ${pin%%==*} "* ]]; then
    echo "[gpu_wheels] $pin: building the wheel from its source (pure Python)"
    "$py" -m pip wheel -q --no-deps -w "$out" "$pin"
  else
    echo "[gpu_wheels] $pin: downloading the wheel for CPython 3.12, manylinux x86_64"
    "$py" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
      "${platform_flags[@]}" -d "$out" "$pin"
  fi
done
# one version of each: a second one stops the whole install on the GPU machine
for f in "$out"/*.whl; do
  keep=0
  for pin in "${PINS[@]}"; do
    case "$(basename "$f" | tr 'A-Z' 'a-z')" in "$(stem "$pin")"-*) keep=1 ;; esac
  done
  if [[ $keep == 0 ]]; then echo "[gpu_wheels] removing $(basename "$f") (not pinned here)"; rm -f "$f"; fi
done
# the commit, and a digest of the files a device call carries: gpu_session.sh names this commit
# only when its copy's files have this digest
{
  "$py" "$REPO/scripts/bench/bench_device.py" --commit
  echo "files $("$py" "$REPO/scripts/bench/bench_device.py" --digest)"
} > "$out/COMMIT"

"$py" - "$out" "$REPO/scripts/bench/gpu_machine_packages.txt" "${NOT_NEEDED[*]}" "${PINS[@]}" <<'PY'
"""Each wheel: its tags fit CPython 3.12 on manylinux x86_64, its needs are carried or there."""
import os
import re
import sys
import zipfile

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name, parse_wheel_filename

out, machine_list, not_needed, pins = sys.argv[1], sys.argv[2], sys.argv[3].split(), sys.argv[4:]
machine = {canonicalize_name(line.strip()) for line in open(machine_list, encoding="utf-8")
           if line.strip() and not line.startswith("#")}
carried = {canonicalize_name(p.split("==")[0]): p.split("==")[1] for p in pins}
target = {"python_version": "3.12", "python_full_version": "3.12.3", "implementation_name": "cpython",
          "platform_python_implementation": "CPython", "sys_platform": "linux", "os_name": "posix",
          "platform_system": "Linux", "platform_machine": "x86_64", "extra": ""}
problems, total = [], 0
wheels = sorted(f for f in os.listdir(out) if f.endswith(".whl"))
found = {}
print(f"[gpu_wheels] {len(wheels)} wheels in {out}:")
for name in wheels:
    path = os.path.join(out, name)
    dist, version, _, tags = parse_wheel_filename(name)
    found[dist] = str(version)
    fits = any(t.interpreter in ("py3", "cp312") and t.abi in ("none", "abi3", "cp312")
               and (t.platform == "any" or re.fullmatch(r"manylinux\w*_x86_64", t.platform)) for t in tags)
    if not fits:
        problems.append(f"{name}: not a wheel for CPython 3.12 on manylinux x86_64")
    with zipfile.ZipFile(path) as z:
        meta = next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))
        requires = [line.split(":", 1)[1].strip() for line in z.read(meta).decode().splitlines()
                    if line.startswith("Requires-Dist:")]
    needs = []
    for text in requires:
        req = Requirement(text)
        if req.marker is not None and not req.marker.evaluate(target):
            continue  # an extra, or another Python
        need = canonicalize_name(req.name)
        where = ("carried" if need in carried else "on the machine" if need in machine
                 else "not needed" if need in not_needed else None)
        if where is None:
            problems.append(f"{name} needs {req}: neither carried nor on the GPU machine")
        needs.append(f"{need} ({where or 'MISSING'})")
    size = os.path.getsize(path)
    total += size
    print(f"  {name:<66} {size / 2**20:6.2f} MiB  needs: {', '.join(needs) or 'nothing'}")
for dist, version in carried.items():
    if found.get(dist) != version:
        problems.append(f"{dist}=={version}: no wheel of it in {out}")
print(f"[gpu_wheels] total {total / 2**20:.1f} MiB (a device call carries 64 MiB at most with the working tree)")
if total > 48 * 2**20:
    problems.append(f"{total / 2**20:.1f} MiB of wheels: leaves too little of the 64 MiB a device call carries")
for p in problems:
    print(f"gpu_wheels.sh: {p}", file=sys.stderr)
sys.exit(1 if problems else 0)
PY
