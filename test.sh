#!/usr/bin/env bash
# Set everything up (scripts/setup.sh) and run the test suite.
#   bash test.sh [pytest options]         the quick tier: unit, equivalence, reference, CLI,
#                                         error messages, data checks (e.g. bash test.sh -k attention)
#   bash test.sh --all [pytest options]   everything: also the learning tests, the recipe
#                                         rehearsals, the in-form study, the GPU stand-ins (CI)
# The files run on two processes (pytest-xdist, a file's tests together so its fixtures are built
# once), one thread each, in tests/conftest.py's order (the long files first; xdist would otherwise
# start the files with the most tests first): TEST_WORKERS=1 runs them in one process.
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
source "$REPO/scripts/setup.sh"
cd "$REPO"
export PYTHONWARNINGS=ignore
export OMP_NUM_THREADS="${OMP_NUM_THREADS:-1}"
workers=(); [[ "${TEST_WORKERS:-2}" != 1 ]] && workers=(-n "${TEST_WORKERS:-2}" --dist loadfile --no-loadscope-reorder)
tier=(-m "not full")  # tests/conftest.py says what the full tier adds
if [[ "${1:-}" == --all ]]; then shift; tier=(); fi
exec python -m pytest tests -q -p no:cacheprovider --durations=10 "${workers[@]}" "${tier[@]}" "$@"
