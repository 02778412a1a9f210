"""The restart policy's budget counts the restarts of a recent window, as supervisord's and
systemd's start limits do: blips far apart never add up to a failed run, a crash loop still
ends it."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from tests.support.fakes import make_config
from tui.config.cluster import Job, RestartMode, RestartPolicy
from tui.config.restart_policy import Decision, FailureFacts, decide, restarts_within


def test_only_the_restarts_of_the_window_count() -> None:
    times = [0.0, 200.0, 650.0, 700.0]
    assert restarts_within(times, now=710.0, window=600.0) == 3  # 200, 650 and 700
    assert restarts_within(times, now=1300.0, window=600.0) == 0  # 700 is exactly 600 s old
    assert restarts_within(times, now=1299.0, window=600.0) == 1
    assert restarts_within(times, now=10_000.0, window=0.0) == 4  # no window: the whole run
    assert restarts_within([], now=5.0, window=600.0) == 0


def test_a_worker_is_restarted_again_once_old_restarts_left_the_window(tmp_path: Path) -> None:
    policy = RestartPolicy(RestartMode.ON_FAILURE, max_restarts=3, window=600.0)
    config = dataclasses.replace(make_config(tmp_path), restart=policy)
    times = [10.0, 3000.0, 7000.0, 9000.0]  # four blips over a long run, far apart

    def decision(now: float) -> Decision:
        facts = FailureFacts(job=Job.WORKER, was_running=True, declared_by_controller=False,
                             lost_peer=False, cluster_up=True, workers_done=False,
                             restarts=restarts_within(times, now, policy.window))
        return decide(config, facts, fail_fast=True, ps=[])

    assert decision(9100.0) is Decision.RESTART_TASK  # the fifth failure: one restart counts
    crash_loop = [9000.0, 9001.0, 9002.0]
    times = crash_loop
    assert decision(9003.0) is Decision.FAIL_RUN  # three in the last 600 s: the budget is spent
