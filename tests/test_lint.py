"""The whole tree stays ruff- and mypy-clean (both configured in pyproject.toml), examples
included: they are the code users copy first."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
#: Each example is a program of its own, run from its own folder: two have a ``train.py``
#: and cmle_package has a ``trainer`` package, so one mypy run over them all would see
#: duplicate (or the project's own) modules. Each is checked alone, from where it runs.
EXAMPLES = sorted(path for path in (REPO / "examples").iterdir() if path.is_dir())


def test_ruff_whole_tree() -> None:
    result = subprocess.run([sys.executable, "-m", "ruff", "check", "."],
                            cwd=REPO, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def test_mypy() -> None:
    # tests/ is excluded in pyproject.toml (fixtures and Textual widgets looked up by id do
    # not type well); docs/ holds the screenshot script, checked like the code.
    result = subprocess.run([sys.executable, "-m", "mypy", "trainer", "tui", "bench", "docs"], cwd=REPO,
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def test_examples_are_all_checked() -> None:
    assert {path.name for path in EXAMPLES} >= {"cmle_package", "tf2_coordinator", "tf_config_monitored"}


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda path: path.name)
def test_mypy_example(example: Path) -> None:
    config = str(REPO / "pyproject.toml")
    result = subprocess.run([sys.executable, "-m", "mypy", "--config-file", config, "."], cwd=example,
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
