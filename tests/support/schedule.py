"""The order in which pytest-xdist hands out test files (``--dist loadfile``), longest first.

xdist queues whole files, the files with the most tests first. The suite's slowest files hold
one to three tests each (whole clusters on lab hosts, benchmark smoke runs), so they were queued
last: one worker ran the last of them alone while the other had nothing left, and the suite's
end waited for it. Handed out first, they overlap each other and the many short files fill the
end instead. This changes only the order; every test still runs, in its own file's order.

With more workers than cores, the first worker is a lane of its own for the files of
:data:`MOSTLY_WAITING` (hosts cut off for 20 s, leases running out, connections left to time
out): they hold a worker for minutes while using little CPU, so beside one worker per core
computing they cost the suite's end almost nothing, where in a worker of their own kind they
held it (the cores were 62 % busy in a 23.5 min run on 2 cores). The other workers take every
other file, and a waiting file only when nothing else is left; the lane ends once no waiting
file is left, so that at most one worker per core computes at any time.
"""

from __future__ import annotations

import os
from typing import Any

from xdist.scheduler import LoadFileScheduling

#: Files that take the longest, longest first (seconds a file took in two full runs on 2
#: cores, from their ``--durations``: one at a load of ~2, one loaded by other work; a test
#: that hung is left out). Every file of over ~15 s is named: one left to xdist's order (most
#: tests first) could start last and hold the suite's end while the other worker idles, as the
#: 72 s slow-link and 85 s cluster-runs files could. A file not listed keeps xdist's order,
#: after these; a name no longer in the suite is passed over here and named by
#: tests/test_schedule.py.
SLOW_FIRST = (
    "tests/launch/test_network_faults.py",  # 3-4 tests, 175-210 s (20 s cuts on a lab)
    "tests/launch/test_network_faults_ps.py",  # 2 tests, 100-120 s
    "tests/launch/test_soak_faults.py",  # 1 test, 75-150 s (4 faults on a lab)
    "tests/launch/test_lab_hosts.py",  # 3 tests, 80-115 s
    "tests/trainer/test_cluster_runs.py",  # 83-86 s
    "tests/launch/test_warm_runs.py",  # 55-95 s
    "tests/bench/test_warm_smoke.py",  # 60-80 s
    "tests/experiments/test_sweep_traffic.py",  # 1 test, 35-105 s (4 runs)
    "tests/program/test_styles.py",  # 1 test, 35-80 s
    "tests/launch/test_lab_slow_link.py",  # 1 test, ~70 s (calm windows, then a capped link)
    "tests/trainer/test_shim.py",  # ~55 s
    "tests/bench/test_smoke.py",  # 40-55 s
    "tests/trainer/test_warm_imports.py",  # 30-45 s
    "tests/launch/test_lab_runs.py",  # 30-45 s
    "tests/launch/test_lab_traffic.py",  # 30-45 s
    "tests/core/supervisor/test_restarts.py",  # 30-40 s
    "tests/program/test_tf2_programs.py",  # 25-50 s
    "tests/launch/test_slurm_runs.py",  # 17-43 s
    "tests/trainer/test_layout.py",  # 23-40 s (vgg19's placement)
    "tests/core/supervisor/test_records.py",  # ~30 s
    "tests/launch/test_ssh_cli.py",  # 14-39 s
    "tests/app/test_core_lifetime.py",  # ~30 s
    "tests/program/test_after_the_target.py",  # 18-29 s
    "tests/app/test_tmux.py",  # ~28 s
    "tests/app/test_usage.py",  # ~27 s
    "tests/trainer/test_shim_steps.py",  # ~26 s
    "tests/launch/test_ssh_runs.py",  # 20-26 s
    "tests/examples/test_tf2_ps_strategy.py",  # ~25 s
    "tests/program/test_examples.py",  # 17-25 s
    "tests/core/supervisor/test_stall.py",  # 16-24 s
    "tests/launch/test_lost_connection.py",  # ~15 s
    "tests/bench/test_app_scale.py",  # ~15 s
    # The quick subset's longest (python -m pytest -m quick: each 6-12 s of Pilot tests and
    # subprocesses), so that it too ends on short files.
    "tests/app/test_logsearch.py",
    "tests/app/test_keys.py",
    "tests/app/test_screen_fit.py",
    "tests/app/test_trust.py",
    "tests/common/test_completion.py",
    "tests/trainer/test_loop.py",
    "tests/test_cli.py",
    "tests/app/test_logactions.py",
)


#: Files that mostly wait, for the waiting lane (see above): each alone, everything it started
#: used at most about half a core while it ran (test_lab_hosts.py ~28 s of CPU in 153 s,
#: test_network_faults_ps.py ~85 s in 338 s, both at a load average of 60-80 from other work;
#: the soak 16 s in 107 s quiet, its lab's tasks not counted), their training paced by a
#: capped link or their hosts cut off, waiting for a lease or a connection's timeout.
MOSTLY_WAITING = frozenset({
    "tests/launch/test_network_faults.py",
    "tests/launch/test_network_faults_ps.py",
    "tests/launch/test_soak_faults.py",
    "tests/launch/test_lab_hosts.py",
})


def cores() -> int:
    """The cores this process may use."""
    return len(os.sched_getaffinity(0))


def usable() -> bool:
    """Whether this xdist schedules files the way :class:`SlowFilesFirst` reorders (its
    private queue and hook): a newer xdist without them keeps its own order, never breaks."""
    return callable(getattr(LoadFileScheduling, "_assign_work_unit", None))


class SlowFilesFirst(LoadFileScheduling):
    """``--dist loadfile`` with the files of :data:`SLOW_FIRST` queued first, in that order,
    and with more workers than cores, the first one a lane for :data:`MOSTLY_WAITING`."""

    _ordered = False

    def _assign_work_unit(self, node: Any) -> None:
        # The queue is complete (and in xdist's order) from the first assignment on.
        queue: Any = getattr(self, "workqueue", None)
        if not hasattr(queue, "move_to_end"):  # (else xdist's own order)
            super()._assign_work_unit(node)
            return
        if not self._ordered:
            self._ordered = True
            for scope in reversed(SLOW_FIRST):
                if scope in queue:
                    queue.move_to_end(scope, last=False)
        if len(self.nodes) > cores():
            lane = node is self.nodes[0]
            scope = next((s for s in queue if (s in MOSTLY_WAITING) == lane), None)
            if scope is None and lane:
                node.shutdown()  # no waiting file left: the others compute, one per core
                return
            if scope is not None:
                queue.move_to_end(scope, last=False)
        super()._assign_work_unit(node)
