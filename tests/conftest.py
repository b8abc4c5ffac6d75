import os
import sys
from pathlib import Path

import pytest
import torch

# the repository root on sys.path: ``import fairseq_luong`` and ``tests.helpers``
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("PYTHONWARNINGS", "ignore")
torch.set_num_threads(min(2, os.cpu_count() or 1))


@pytest.fixture
def one_thread():
    """Tiny models: one thread beats two contending ones."""
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)
