"""The style checker fairseq runs (flake8, through pre-commit), with this repository's
setup.cfg: 120 columns, pyflakes' checks (unused imports and names, undefined names)."""
import subprocess
import sys

from tests.helpers import REPO


def test_flake8_finds_nothing():
    proc = subprocess.run([sys.executable, "-m", "flake8", "."], cwd=REPO, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
