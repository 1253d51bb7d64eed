"""The linter is part of the suite: `ruff check` (settings in ruff.toml) finds nothing in the repository,
so `python -m pytest tests`, the README's test command and what CI runs, fails on a lint finding."""
import os
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_ruff_finds_nothing():
    proc = subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache", "--output-format", "concise", REPO],
                          cwd=REPO, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
