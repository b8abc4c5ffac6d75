#!/usr/bin/env bash
# Set up everything fairseq_luong needs, idempotently.
#
# Usage: source scripts/setup.sh   (or: bash scripts/setup.sh)
#
# Uses the active virtual environment if there is one ($VIRTUAL_ENV);
# otherwise creates .venv/ inside the checkout. Installs the pinned CPU
# torch, the ve-fairseq fork with --no-deps (its metadata asks for
# torchaudio, which we never use and which would pull a CUDA torch), the
# rest of requirements.txt, and this package (fairseq_luong and fairseq_fixes) in
# editable mode. A stamp
# file makes a second run a no-op when requirements.txt, setup.py and this
# script are unchanged.
set -euo pipefail

_repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
if [[ -n "${VIRTUAL_ENV:-}" ]]; then
  _venv="$VIRTUAL_ENV"
else
  _venv="$_repo/.venv"
  if [[ ! -x "$_venv/bin/python" ]]; then
    echo "[setup] creating virtual environment $_venv" >&2
    python3 -m venv "$_venv"
  fi
fi
_py="$_venv/bin/python"
_stamp="$_venv/.fairseq_luong_setup"
_want="$(cat "$_repo/requirements.txt" "$_repo/scripts/setup.sh" "$_repo/setup.py" | sha1sum | cut -d' ' -f1)"

if [[ ! -f "$_stamp" ]] || [[ "$(cat "$_stamp")" != "$_want" ]]; then
  _t0=$(date +%s)
  echo "[setup] installing into $_venv (takes about 1-2 minutes the first time)" >&2
  "$_py" -m pip install -q --disable-pip-version-check --upgrade pip
  # --no-compile: pip would byte-compile every module it installs (all of torch, scipy,
  # matplotlib: about 40 s of a 100 s set-up); the modules we use are compiled below instead.
  _pip=("$_py" -m pip install -q --disable-pip-version-check --no-compile)
  # torch first, alone and pinned: nothing after it may replace it.
  "${_pip[@]}" "torch==2.13.0"
  "${_pip[@]}" -r "$_repo/requirements.txt"
  "${_pip[@]}" --no-deps "ve-fairseq==0.12.3"
  "${_pip[@]}" --no-deps --no-build-isolation -e "$_repo"
  # a one-line error, not fairseq's KeyError, for our checkpoints used without --user-dir
  # (fairseq_luong/fairseq_patches/no_user_dir_hint.py: standard library only, idle until fairseq is imported)
  "$_py" - "$_repo/fairseq_luong/fairseq_patches/no_user_dir_hint.py" <<'PY'
import os, sys, sysconfig
hint = sys.argv[1]
with open(os.path.join(sysconfig.get_paths()["purelib"], "fairseq_luong_hint.pth"), "w") as f:
    f.write(f"import os, runpy; os.path.exists({hint!r}) and runpy.run_path({hint!r})\n")
PY
  # The check imports what the plugin, fairseq's commands and the tests load, and so compiles
  # it (written even where PYTHONDONTWRITEBYTECODE is set, as pip would have): a module
  # imported later is compiled when it is first imported, as Python does.
  env -u PYTHONDONTWRITEBYTECODE "$_py" - <<'PY'
import logging
import warnings

logging.disable(logging.WARNING)  # fairseq's notes about optional packages it lacks
warnings.simplefilter("ignore")  # a fairseq module's SyntaxWarning, once, as it is compiled
import torch, fairseq, MeCab, ipadic, nltk, sacrebleu, sentencepiece  # noqa: E401,F401
import fairseq_luong  # noqa: F401
import fairseq_cli.eval_lm, fairseq_cli.generate, fairseq_cli.interactive  # noqa: E401,F401
import fairseq_cli.preprocess, fairseq_cli.score, fairseq_cli.train, fairseq_cli.validate  # noqa: E401,F401
import torch._dynamo, torch.distributed.run, torch.testing  # noqa: E401,F401  (Optimizer imports _dynamo; torchrun)
import matplotlib.pyplot, pytest, xdist, sacremoses, scipy.stats, sklearn  # noqa: E401,F401
import importlib, _pytest.config, execnet, xdist.looponfail, xdist.newhooks  # noqa: E401,F401  (pytest-xdist's workers)
from hydra.core.plugins import Plugins

Plugins.instance()  # hydra's plugins, which fairseq's configuration loads
for plugin in (*_pytest.config.essential_plugins, *_pytest.config.default_plugins):
    importlib.import_module(f"_pytest.{plugin}")  # pytest's own, loaded by every pytest process
assert torch.__version__.startswith("2.13.0"), torch.__version__
print(f"[setup] torch {torch.__version__}, fairseq {fairseq.__version__}, sacrebleu {sacrebleu.__version__}")
PY
  echo "$_want" > "$_stamp"
  echo "[setup] done in $(( $(date +%s) - _t0 )) s" >&2
fi
export PATH="$_venv/bin:$PATH"
export VIRTUAL_ENV="$_venv"
