#!/usr/bin/env bash
# Set everything up (scripts/setup.sh) and run the test suite.
#   bash test.sh [pytest options]      e.g. bash test.sh -k attention
# The files run on two processes (pytest-xdist, a file's tests together so its fixtures are built
# once), one thread each: TEST_WORKERS=1 runs them in one process.
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
source "$REPO/scripts/setup.sh"
cd "$REPO"
export PYTHONWARNINGS=ignore
export OMP_NUM_THREADS="${OMP_NUM_THREADS:-1}"
workers=(); [[ "${TEST_WORKERS:-2}" != 1 ]] && workers=(-n "${TEST_WORKERS:-2}" --dist loadfile)
exec python -m pytest tests -q -p no:cacheprovider --durations=10 "${workers[@]}" "$@"
