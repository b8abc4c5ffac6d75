#!/usr/bin/env python3
"""scripts/data/check_parallel.py, kept at this path for run.sh (which calls it by this path)."""
import os
import runpy

runpy.run_path(os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "check_parallel.py"),
               run_name="__main__")
