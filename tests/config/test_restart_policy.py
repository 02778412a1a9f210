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


def test_a_tf2_coordinators_lost_worker_is_left_to_it_when_it_may_not_be_restarted(tmp_path: Path) -> None:
    """A worker of a cluster a TF2 coordinator runs (another worker still serving it) that may
    not be restarted is left to the coordinator, which reschedules its functions; restartable,
    it is restarted; without a coordinator it fails the run as before; a ps never is left."""
    never = dataclasses.replace(make_config(tmp_path), restart=RestartPolicy(RestartMode.NEVER))

    def decision(job: Job, coordinated: bool, config: object = never) -> Decision:
        facts = FailureFacts(job=job, was_running=True, declared_by_controller=False, lost_peer=False,
                             cluster_up=True, workers_done=False, restarts=0, coordinated=coordinated)
        return decide(config, facts, fail_fast=True, ps=[])  # type: ignore[arg-type]

    assert decision(Job.WORKER, coordinated=True) is Decision.LEAVE_TO_COORDINATOR
    assert decision(Job.WORKER, coordinated=False) is Decision.FAIL_RUN
    assert decision(Job.PS, coordinated=True) is Decision.FAIL_RUN
    assert decision(Job.CHIEF, coordinated=True) is Decision.FAIL_RUN
    restartable = dataclasses.replace(never, restart=RestartPolicy(RestartMode.ON_FAILURE, max_restarts=3))
    assert decision(Job.WORKER, coordinated=True, config=restartable) is Decision.RESTART_TASK
