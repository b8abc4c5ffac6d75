"""The linter (ruff, with this repository's ruff.toml: pycodestyle, pyflakes and isort's checks at
120 columns), as fairseq runs flake8 and isort through pre-commit."""
import subprocess
import sys

from tests.helpers import REPO


def test_ruff_finds_nothing():
    # --no-cache: the suite writes nothing into the checkout (tests/conftest.py)
    proc = subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache", "."], cwd=REPO, capture_output=True,
                          text=True)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
