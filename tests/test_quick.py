"""The quick subset (``python -m pytest -m quick``, tests/conftest.py): a test is quick unless
it starts a real part (a marker or a fixture of one) or is known to be slow, and every test
named slow still exists."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import HEAVY_AT_COLLECTION, IMPORTED_AT_COLLECTION, SLOW_WITHOUT_PARTS

REPO = Path(__file__).resolve().parent.parent


def test_every_test_named_slow_still_exists() -> None:
    for entry in SLOW_WITHOUT_PARTS:
        path, _, name = entry.partition("::")
        assert (REPO / path).is_file(), entry
        if name:
            assert re.search(rf"def {re.escape(name)}\(", (REPO / path).read_text()), entry


def test_quick_leaves_out_real_parts_and_known_slow_tests() -> None:
    files = ["tests/config/test_load.py", "tests/bench/test_warm_smoke.py"]
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-n", "0", "-p", "no:cacheprovider",
         "-m", "quick", *files],
        cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)}, capture_output=True, text=True, timeout=600)
    collected = set(done.stdout.split())
    assert "tests/config/test_load.py::test_any_text_loads_or_raises_config_error" not in collected
    assert "tests/config/test_load.py::test_apply_overrides_raises_only_config_error" in collected
    assert not any("test_warm_smoke.py" in line for line in collected)


def test_collecting_the_tests_imports_no_tensorflow(pytestconfig: pytest.Config) -> None:
    # A test file imports TensorFlow in its tests or their fixtures, never at its top. Each
    # xdist worker collects every file of the run before its first test, this one's too.
    assert pytestconfig.stash[IMPORTED_AT_COLLECTION] == [], (
        f"collecting the tests imported {pytestconfig.stash[IMPORTED_AT_COLLECTION]} "
        f"(of {HEAVY_AT_COLLECTION}): look for a module-level import in a test file or its helpers")
