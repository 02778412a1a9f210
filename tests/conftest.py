"""Suite-wide pytest configuration."""

from __future__ import annotations

import os
import sys
from typing import Any

import pytest

from tests.support import schedule
from tests.support.schedule import SlowFilesFirst

# The suite's processes keep compiled bytecode, where Python keeps it by default (each
# package's own gitignored __pycache__), though the environment says not to write it: with
# PYTHONDONTWRITEBYTECODE (this project's machines set it) every process of the suite (each
# xdist worker, each controller and task it starts) compiled tui/ and trainer/ again, and
# pytest rewrote every test module's asserts again (collecting the suite took 18.9 s of CPU
# uncached against 11.0 s cached, per worker). Not under a PYTHONPYCACHEPREFIX: Python then
# ignores the bytecode pip wrote beside the installed packages, and a first run compiled every
# dependency again (351 files for the quick subset). Copies uploaded to hosts leave
# __pycache__ out (tui.launch.package).
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
sys.dont_write_bytecode = False

#: Fixtures of real parts any test file may ask for (a private sshd, ...), shared by name.
pytest_plugins = ["tests.support.sshd", "tests.support.slurm_fixture", "tests.support.netlab_fixture"]

#: The suite runs on pytest-xdist workers (``-n auto`` in pyproject.toml). Its integration tests
#: each start whole TensorFlow clusters, so past a few workers they only compete for cores and
#: stretch each other's timeouts.
MAX_WORKERS = 4
#: Workers beyond one per core. Much of the suite waits (a link cut for 20 s, a lease running
#: out) rather than computes, and on 2 cores three workers took 11:43-13:03 against two's
#: 14:43-15:35; but the load of three computing at once failed a test of some timing judgement
#: (a chief's CPU use past the target, a toast's lifetime, a message racing its value) in five
#: full runs of seven. An extra worker can be a lane for the files that mostly wait
#: (tests/support/schedule.py), so that one worker per core computes; but those files run
#: TensorFlow clusters between their waits, and the lane's first full run (20:51 against
#: 23:28 with two) failed a stop-within-5-s promise under SIGINT that passes alone (9 of 9).
#: Until the lane's load is shown harmless over several full runs, none.
WAITING_LANE = 0


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """One worker per core this process may use, at most :data:`MAX_WORKERS`, and the
    :data:`WAITING_LANE` unless only the quick subset runs (none of its files waits: the
    lane's worker would only collect the suite and end)."""
    lane = 0 if config.getoption("markexpr", "") == "quick" else WAITING_LANE
    return max(1, min(MAX_WORKERS, schedule.cores())) + lane


#: Fixtures whose users carry a marker of the same name, so ``-m "not sshd"`` deselects them.
MARKED_FIXTURES = ("sshd", "slurm", "netlab")


#: Markers of the real parts a test starts (TensorFlow servers, sshd, tmux, Slurm, a lab of
#: namespace hosts): a test with none of them, and not in :data:`SLOW_WITHOUT_PARTS`, is
#: ``quick``: ``python -m pytest -m quick`` is a contributor's inner loop.
REAL_PARTS = ("integration", "sshd", "tmux", "slurm", "netlab")
#: Test files, and single tests (``FILE::NAME``, every parameter of it), that start none of
#: those parts yet take seconds all the same: TensorFlow graphs and warm pools (TensorFlow
#: imported in a subprocess), the trainer's command line, real controller processes, mypy on
#: the examples, and the largest generated-input searches. From ``--durations`` of the
#: candidate subset on 2 cores (loaded: 973 tests in 32 min at a load average of 10-23;
#: these were the slowest third of its time).
SLOW_WITHOUT_PARTS = frozenset({
    "tests/trainer/test_graph.py",
    "tests/trainer/test_layout.py",
    "tests/trainer/test_cli_errors.py",
    "tests/trainer/test_warm_server.py",
    "tests/trainer/test_warm_hostile.py",
    "tests/launch/test_warm_local.py",
    "tests/launch/test_warm_venv.py",
    "tests/trainer/test_warm_imports.py",
    # Leases of real shells run out in seconds of real time.
    "tests/launch/test_lease_watcher.py",
    "tests/program/test_ending.py::test_the_cores_a_busy_process_group_of_this_machine_uses",
    "tests/test_cli.py::test_the_cores_process_and_its_warm_pool_start_before_the_app_loads",
    "tests/config/test_yamlload.py::test_deep_nesting_is_located",
    "tests/test_lint.py",
    "tests/test_controller_process.py",
    "tests/app/test_readme.py",
    "tests/app/test_process_bridge.py::test_a_run_crosses_from_the_core_process",
    "tests/app/test_process_bridge.py::test_a_front_end_that_drains_rarely_gets_a_bounded_backlog_and_the_runs_end",
    "tests/test_headless.py::test_a_flooding_task_loses_no_line_on_screen_or_in_its_log",
    "tests/config/test_load.py::test_schema_shaped_structure_loads_or_raises_config_error",
    "tests/config/test_load.py::test_any_structure_loads_or_raises_config_error",
    "tests/config/test_load.py::test_any_text_loads_or_raises_config_error",
    "tests/config/test_yamlload.py::test_too_many_values",
    "tests/core/test_events.py::test_objects_of_a_valid_kind_with_random_fields_never_raise",
    "tests/core/test_events.py::test_events_between_random_bytes_survive_any_chunking",
    "tests/core/test_hints.py::test_a_failures_clues_are_in_every_line_its_pattern_matches",
    "tests/launch/test_lines.py::test_carriage_returns_split_the_same_in_any_chunking",
    # Real zsh and fish, each completing six lines: a Python start per completion.
    "tests/common/test_completion.py::test_zsh_and_fish_complete_commands_options_and_choices",
    # A pytest of its own, collecting two files.
    "tests/test_quick.py::test_quick_leaves_out_real_parts_and_known_slow_tests",
})


def is_quick(item: pytest.Item) -> bool:
    """Whether ``item`` starts none of :data:`REAL_PARTS` and is not known to be slow."""
    if any(item.get_closest_marker(name) for name in REAL_PARTS):
        return False
    path = item.nodeid.split("::", 1)[0]
    return path not in SLOW_WITHOUT_PARTS and item.nodeid.split("[", 1)[0] not in SLOW_WITHOUT_PARTS


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark each test by the real parts its fixtures start (a marker, not a folder), and
    mark ``quick`` each test that starts none and is not known to be slow; first, so that
    ``-m`` selects by these markers."""
    for item in items:
        for name in MARKED_FIXTURES:
            if name in getattr(item, "fixturenames", ()):
                item.add_marker(name)
        if is_quick(item):
            item.add_marker("quick")


#: Modules no test file may import when it is collected: every collection (each xdist worker's,
#: and the quick subset's, which collects every file before it deselects) paid for them. One
#: file's ``pytest.importorskip("tf_keras")`` imported TensorFlow so: collecting the quick
#: subset took 39.3 s of CPU with a cold bytecode cache, 14.7 s without it.
HEAVY_AT_COLLECTION = ("tensorflow", "keras", "tf_keras")
#: Which of :data:`HEAVY_AT_COLLECTION` this process had imported when its collection ended.
IMPORTED_AT_COLLECTION = pytest.StashKey[list[str]]()


def pytest_collection_finish(session: pytest.Session) -> None:
    """Note which heavy modules collecting the tests imported (before any test ran), for
    tests/test_quick.py to judge."""
    session.config.stash[IMPORTED_AT_COLLECTION] = [m for m in HEAVY_AT_COLLECTION if m in sys.modules]


def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """``--dist loadfile`` (pyproject.toml) with the slowest files handed out first
    (tests/support/schedule.py); any other ``--dist`` is xdist's own."""
    if config.getvalue("dist") != "loadfile" or not schedule.usable():
        return None
    return SlowFilesFirst(config, log)
