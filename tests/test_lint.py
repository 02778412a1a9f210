"""The code stays ruff- and mypy-clean (both configured in pyproject.toml)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def test_ruff() -> None:
    result = subprocess.run([sys.executable, "-m", "ruff", "check", "trainer", "tui", "bench", "tests"],
                            cwd=REPO, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def test_mypy() -> None:
    result = subprocess.run([sys.executable, "-m", "mypy", "trainer", "tui", "bench"], cwd=REPO,
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
