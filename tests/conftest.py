"""Suite-wide pytest configuration."""

from __future__ import annotations

import os

import pytest

#: The suite runs on pytest-xdist workers (``-n auto`` in pyproject.toml). Its integration tests
#: each start whole TensorFlow clusters, so past a few workers they only compete for cores and
#: stretch each other's timeouts.
MAX_WORKERS = 4


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """One worker per core this process may use, at most :data:`MAX_WORKERS`."""
    return max(1, min(MAX_WORKERS, len(os.sched_getaffinity(0))))
