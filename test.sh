#!/usr/bin/env bash
# Set everything up (scripts/setup.sh) and run the test suite.
#   bash test.sh [pytest options]      e.g. bash test.sh -k attention
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
source "$REPO/scripts/setup.sh"
cd "$REPO"
export PYTHONWARNINGS=ignore
exec python -m pytest tests -q -p no:cacheprovider --durations=10 "$@"
