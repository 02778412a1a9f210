"""The order in which pytest-xdist hands out test files (``--dist loadfile``), longest first.

xdist queues whole files, the files with the most tests first. The suite's slowest files hold
one to three tests each (whole clusters on lab hosts, benchmark smoke runs), so they were queued
last: one worker ran the last of them alone while the other had nothing left, and the suite's
end waited for it. Handed out first, they overlap each other and the many short files fill the
end instead. This changes only the order; every test still runs, in its own file's order.
"""

from __future__ import annotations

from typing import Any

from xdist.scheduler import LoadFileScheduling

#: Files of few tests that take the longest, longest first (seconds in a full run on 2 cores,
#: from its ``--durations``). A file not listed keeps xdist's order, after these; a name no
#: longer in the suite is passed over here and named by tests/test_schedule.py.
SLOW_FIRST = (
    "tests/launch/test_soak_faults.py",  # 1 test, ~170 s (4 faults on a lab)
    "tests/launch/test_lab_hosts.py",  # 2 tests, ~90 s
    "tests/launch/test_network_faults.py",  # 3 tests, ~175 s (~140 s alone, paced, warm)
    "tests/launch/test_network_faults_ps.py",  # 2 tests, ~120 s (~100 s alone, warm)
    "tests/bench/test_warm_smoke.py",  # ~60 s
    "tests/launch/test_warm_runs.py",  # ~50 s
    "tests/experiments/test_sweep_traffic.py",  # ~35 s
    "tests/launch/test_lab_traffic.py",  # ~35 s
    "tests/program/test_styles.py",  # ~30 s
    "tests/core/supervisor/test_restarts.py",  # ~30 s
    "tests/launch/test_lab_runs.py",  # ~30 s
    "tests/program/test_after_the_target.py",  # ~25 s
    "tests/launch/test_ssh_runs.py",  # ~25 s
    "tests/program/test_examples.py",  # ~25 s
    "tests/examples/test_tf2_ps_strategy.py",  # ~25 s
    "tests/launch/test_lost_connection.py",  # ~15 s
    "tests/bench/test_app_scale.py",  # ~15 s
)


def usable() -> bool:
    """Whether this xdist schedules files the way :class:`SlowFilesFirst` reorders (its
    private queue and hook): a newer xdist without them keeps its own order, never breaks."""
    return callable(getattr(LoadFileScheduling, "_assign_work_unit", None))


class SlowFilesFirst(LoadFileScheduling):
    """``--dist loadfile`` with the files of :data:`SLOW_FIRST` queued first, in that order."""

    _ordered = False

    def _assign_work_unit(self, node: Any) -> None:
        # The queue is complete (and in xdist's order) from the first assignment on.
        queue: Any = getattr(self, "workqueue", None)
        if not self._ordered and hasattr(queue, "move_to_end"):  # (else xdist's own order)
            self._ordered = True
            for scope in reversed(SLOW_FIRST):
                if scope in queue:
                    queue.move_to_end(scope, last=False)
        super()._assign_work_unit(node)
