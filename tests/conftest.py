import os
import sys
from pathlib import Path

import torch

# the repository root on sys.path: ``import fairseq_luong`` and ``tests.helpers``
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("PYTHONWARNINGS", "ignore")
torch.set_num_threads(min(2, os.cpu_count() or 1))
