"""Suite-wide pytest configuration."""

from __future__ import annotations

import os
from typing import Any

import pytest

from tests.support import schedule
from tests.support.schedule import SlowFilesFirst

#: Fixtures of real parts any test file may ask for (a private sshd, ...), shared by name.
pytest_plugins = ["tests.support.sshd", "tests.support.slurm_fixture", "tests.support.netlab_fixture"]

#: The suite runs on pytest-xdist workers (``-n auto`` in pyproject.toml). Its integration tests
#: each start whole TensorFlow clusters, so past a few workers they only compete for cores and
#: stretch each other's timeouts.
MAX_WORKERS = 4
#: Workers beyond one per core. Much of the suite waits (a link cut for 20 s, a lease running
#: out) rather than computes, and on 2 cores three workers took 11:43-13:03 against two's
#: 14:43-15:35; but the load of three failed a test of some timing judgement (a chief's CPU
#: use past the target, a toast's lifetime, a message racing its value) in five full runs of seven.
#: Until those judge load rather than meet it, one per core.
EXTRA_WORKERS = 0


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """One worker per core this process may use and :data:`EXTRA_WORKERS`, at most
    :data:`MAX_WORKERS`."""
    return max(1, min(MAX_WORKERS, len(os.sched_getaffinity(0)) + EXTRA_WORKERS))


#: Fixtures whose users carry a marker of the same name, so ``-m "not sshd"`` deselects them.
MARKED_FIXTURES = ("sshd", "slurm", "netlab")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark each test by the real parts its fixtures start (a marker, not a folder)."""
    for item in items:
        for name in MARKED_FIXTURES:
            if name in getattr(item, "fixturenames", ()):
                item.add_marker(name)


def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """``--dist loadfile`` (pyproject.toml) with the slowest files handed out first
    (tests/support/schedule.py); any other ``--dist`` is xdist's own."""
    if config.getvalue("dist") != "loadfile" or not schedule.usable():
        return None
    return SlowFilesFirst(config, log)
