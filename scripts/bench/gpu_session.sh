#!/usr/bin/env bash
# The one command of a GPU session: fairseq from carried wheels, then scripts/bench/gpu_check.py
# and its speed table, every result under $OUT (docs/gpu.md, "A GPU session, step by step").
#
# Usage, from the repository root:
#   bash scripts/bench/gpu_session.sh                 on the GPU machine (CUDA device 0)
#   bash scripts/bench/gpu_session.sh --cpu-stand-in  the CPU stands in for the GPU, a tiny speed
#                                                     table (what the tests run; about 2 min on 2 cores)
# Options: --speed "OPTIONS"  benchmark_speed.py's options for the speed table (default below;
#                             none: no speed table)
#          --budget SECONDS   gpu_check.py is stopped after this long (default 520); what it wrote
#                             by then still comes back
#          --work DIR         gpu_check.py's work folder, emptied first (default work_dir/gpu_check)
#          -- ...             further options for gpu_check.py (e.g. -- --updates 100; -- --no-checks:
#                             the speed table alone)
#
# 1. Without CUDA (and without --cpu-stand-in) it stops at once: one line, exit status 1.
# 2. Installs the wheels in .whl/ (scripts/bench/gpu_wheels.sh fills it here; copy .whl/ with the
#    checkout) with pip --target into /tmp/site (GPU_SESSION_SITE), when this Python is the 3.12
#    they are built for: PYTHONPATH=/tmp/site:REPO, PATH=/tmp/site/bin:PATH (pip --target writes
#    fairseq-train, fairseq-generate, ... there); without them, this environment's fairseq. The
#    plugin is not installed: fairseq imports it from --user-dir fairseq_luong. Then checks, one
#    line if not, that it registers its models, criterions and task with fairseq and that
#    fairseq-train starts.
# 3. Prints the machine (nvidia-smi, Python, torch, CUDA, cuDNN, the commit: .whl/COMMIT's when
#    the files' digest is the one recorded there, else git's, marked) and runs gpu_check.py: on
#    the GPU its checks at their defaults and this speed table (6 measurements, each a fresh
#    process):
#      --shape paper --sizes 4x1000 --precisions bf16 --repeats 1 --updates 20
#      --gen-sentences 256 --systems lstm luong_global_general luong_global_general_no_feed
#    On an NVIDIA H200 (commit e0b734a) the install and preflight took 27 s, the checks 300 s and
#    6 measurements 139 s: about 470 s in all (docs/gpu.md).
# 4. Writes under $OUT (default work_dir/gpu_session): gpu_session.log (all
#    the output), machine.txt, gpu_check.md (the tables), gpu_check.json and
#    gpu_check_logs.tar.gz (every command's log). Exit status: gpu_check.py's (1: a check
#    failed; 124: stopped by --budget).
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
SPEED="--shape paper --sizes 4x1000 --precisions bf16 --repeats 1 --updates 20 --gen-sentences 256 \
--systems lstm luong_global_general luong_global_general_no_feed"
# --cpu-stand-in's tiny table: one row, fairseq's lstm (tests/test_gpu_session.py runs it)
STAND_IN_SPEED="--shape paper --vocab 300 --sizes 1x16 --precisions bf16 --systems lstm \
--repeats 1 --updates 2 --gen-sentences 8 --gen-batch 8 --busy --busy-steps 1 --threads 1 --gemm-size 512"
PY="${PYTHON:-python3}"
SITE="${GPU_SESSION_SITE:-/tmp/site}"

stand_in=0 speed="" budget=520 work="$REPO/work_dir/gpu_check" extra=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    -h|--help) sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    --cpu-stand-in) stand_in=1; shift ;;
    --speed) speed="$2"; shift 2 ;;
    --budget) budget="$2"; shift 2 ;;
    --work) work="$2"; shift 2 ;;
    --) shift; extra=("$@"); break ;;
    *) echo "gpu_session.sh: unknown option $1 (--help)" >&2; exit 2 ;;
  esac
done

if [[ $stand_in == 0 ]]; then
  if ! msg="$("$PY" - 2>/dev/null <<'PY'
import sys
try:
    import torch
except ImportError as e:
    print(f"no torch for {sys.executable} ({e}): nothing run")
    sys.exit(1)
if not torch.cuda.is_available():
    print(f"no CUDA device here (torch {torch.__version__}): nothing run; --cpu-stand-in runs it with the CPU "
          "standing in for the GPU")
    sys.exit(1)
PY
  )"; then
    echo "gpu_session.sh: ${msg:-$PY did not start}" >&2
    exit 1
  fi
  device=(--device cuda)
  speed="${speed:-$SPEED}"
else
  device=(--device cpu --updates 20 --size 16)
  speed="${speed:-$STAND_IN_SPEED}"
fi

OUT="${OUT:-$REPO/work_dir/gpu_session}"
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 PYTHONWARNINGS=ignore

session() {
  local t0=$SECONDS
  cd "$REPO"
  local wheels
  mapfile -t wheels < <(compgen -G '.whl/*.whl' || true)
  if [[ ${#wheels[@]} -gt 0 ]] && "$PY" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 12))'; then
    echo "[gpu_session] installing ${#wheels[@]} wheels into $SITE"
    "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$SITE" \
      "${wheels[@]}"
    export PYTHONPATH="$SITE:$REPO${PYTHONPATH:+:$PYTHONPATH}" PATH="$SITE/bin:$PATH"
  else
    echo "[gpu_session] no wheels installed (.whl/: ${#wheels[@]} wheels for Python 3.12; this is" \
      "$("$PY" -c 'import platform; print(platform.python_version())')): this environment's fairseq"
    export PYTHONPATH="$REPO${PYTHONPATH:+:$PYTHONPATH}"
  fi
  "$PY" - "$REPO/fairseq_luong" <<'PY' || return 1
import argparse
import sys

try:
    import fairseq
    from fairseq import utils
    from fairseq.criterions import CRITERION_REGISTRY
    from fairseq.models import ARCH_MODEL_REGISTRY
    from fairseq.tasks import TASK_REGISTRY

    utils.import_user_module(argparse.Namespace(user_dir=sys.argv[1]))
except Exception as e:  # one line, whatever broke
    hint = ("; run bash scripts/bench/gpu_wheels.sh beside the checkout and name .whl in the device call's carry"
            if isinstance(e, ModuleNotFoundError) else "")
    sys.exit(f"gpu_session.sh: fairseq with --user-dir fairseq_luong does not import: {type(e).__name__}: {e}{hint}")
wanted = [("arch", "luong_global_general", ARCH_MODEL_REGISTRY), ("arch", "transformer_perspe_tiny", ARCH_MODEL_REGISTRY),
          ("criterion", "fused_label_smoothed_cross_entropy", CRITERION_REGISTRY),
          ("task", "translation_chunks", TASK_REGISTRY)]
missing = [f"{kind} {name}" for kind, name, registry in wanted if name not in registry]
if missing:
    sys.exit(f"gpu_session.sh: --user-dir fairseq_luong registers no {', '.join(missing)}")
print(f"[gpu_session] fairseq {fairseq.__version__} from {fairseq.__file__}; fairseq_luong registered")
PY
  local tool
  # gpu_check.py's bin_path, with scripts/bench on this one command's PYTHONPATH (as when it runs as a script)
  tool="$(PYTHONPATH="$REPO/scripts/bench:$PYTHONPATH" "$PY" -c 'from gpu_check import bin_path
print(bin_path("fairseq-train"))')"
  if ! "$tool" --help > /dev/null 2>&1; then
    echo "gpu_session.sh: $tool --help fails: gpu_check.py could not train"
    return 1
  fi
  echo "[gpu_session] fairseq's commands: $(dirname "$tool")/fairseq-* ($((SECONDS - t0)) s so far)"

  # the commit: .whl/COMMIT's when these files are the ones it was written beside (their digest),
  # else git's here (the copy's .git may be another commit's), marked (bench_device.session_commit)
  local revision
  revision="$("$PY" scripts/bench/bench_device.py --session-commit 2>/dev/null || echo '?')"
  export FAIRSEQ_LUONG_COMMIT="$revision"
  {
    echo "date: $(date -u '+%Y-%m-%d %H:%M:%S UTC'); commit: $FAIRSEQ_LUONG_COMMIT"
    "$PY" -c 'import platform, torch
print(f"python {platform.python_version()}, torch {torch.__version__}, CUDA {torch.version.cuda}, "
      f"cuDNN {torch.backends.cudnn.version()}, CPU threads {torch.get_num_threads()}")
if torch.cuda.is_available():
    p = torch.cuda.get_device_properties(0)
    print(f"device 0: {p.name}, {p.total_memory / 2**30:.1f} GiB, {p.multi_processor_count} SMs, "
          f"capability {p.major}.{p.minor}; {torch.cuda.device_count()} device(s)")'
    command -v nvidia-smi > /dev/null && nvidia-smi || echo "(no nvidia-smi)"
  } 2>&1 | tee "$OUT/machine.txt"

  rm -rf "$work"  # a checkpoint left there would make fairseq-train resume instead of train
  echo "[gpu_session] gpu_check.py ${device[*]} ${extra[*]} (at most $budget s), speed table: $speed"
  local status=0
  timeout --kill-after=15 "$budget" "$PY" scripts/bench/gpu_check.py "${device[@]}" --out "$work" \
    --speed "$speed" "${extra[@]}" | tee "$OUT/gpu_check.md" || status=${PIPESTATUS[0]}
  if [[ $status == 124 || $status == 137 ]]; then
    echo "gpu_session.sh: gpu_check.py stopped after $budget s (--budget); the speed rows it had:"
    grep -h '^| ' "$work/speed.log" 2>/dev/null | tee -a "$OUT/gpu_check.md" || echo "(none)"
  fi
  [[ -f "$work/gpu_check.json" ]] && cp "$work/gpu_check.json" "$OUT/"
  (cd "$work" 2>/dev/null && find . -name '*.log' -print0 | tar -czf "$OUT/gpu_check_logs.tar.gz" --null -T -) || true
  echo "[gpu_session] done in $((SECONDS - t0)) s, gpu_check.py's exit status $status; in $OUT:" \
    "$(cd "$OUT" && echo *)"
  return "$status"
}

session 2>&1 | tee "$OUT/gpu_session.log"
exit "${PIPESTATUS[0]}"
