"""The task and run state machines (tui.core.task_state) and the restart policy's decisions
(tui.config.restart_policy): pure logic, table-driven."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from tests.support.fakes import make_config
from tui.config.cluster import Job, RestartMode, RestartPolicy
from tui.config.restart_policy import Decision, FailureFacts, PsFacts, decide
from tui.core.task_state import (
    RUN_TRANSITIONS,
    TASK_TRANSITIONS,
    IllegalTransition,
    RunPhase,
    TaskState,
    check_run_transition,
    check_task_transition,
)

S = TaskState


def test_every_state_has_a_row_and_finished_states_only_restart() -> None:
    assert set(TASK_TRANSITIONS) == set(TaskState) and set(RUN_TRANSITIONS) == set(RunPhase)
    for state in TaskState:
        if state.is_finished:  # nothing but a new launch (or its failure, or a coming restart)
            assert TASK_TRANSITIONS[state] <= {S.STARTING, S.FAILED, S.BACKOFF}
    assert not RUN_TRANSITIONS[RunPhase.FINISHED]


@pytest.mark.parametrize(("old", "new"), [
    (S.PENDING, S.RUNNING),     # ready without a launch
    (S.RUNNING, S.STOPPED),     # stopped without STOPPING
    (S.STOPPING, S.RUNNING),    # `ready` of a task being stopped
    (S.BACKOFF, S.RUNNING),
    (S.SUCCEEDED, S.BACKOFF),
])
def test_illegal_task_transitions_raise(old: TaskState, new: TaskState) -> None:
    with pytest.raises(IllegalTransition, match=f"worker1: {old.value} -> {new.value}"):
        check_task_transition("worker1", old, new)


def test_legal_transitions_pass_and_illegal_run_transitions_raise() -> None:
    check_task_transition("ps0", S.RUNNING, S.STOPPING)
    check_run_transition(RunPhase.UP, RunPhase.RECOVERING)
    with pytest.raises(IllegalTransition):
        check_run_transition(RunPhase.ENDING, RunPhase.UP)
    with pytest.raises(IllegalTransition):
        check_run_transition(RunPhase.WORKERS_DONE, RunPhase.RECOVERING)


def facts(job: Job = Job.WORKER, **changes: object) -> FailureFacts:
    base = FailureFacts(job=job, was_running=True, declared_by_controller=False, lost_peer=False,
                        cluster_up=True, workers_done=False, restarts=0)
    return dataclasses.replace(base, **changes)  # type: ignore[arg-type]


ON_FAILURE = RestartPolicy(RestartMode.ON_FAILURE, max_restarts=2, backoff=1.0)
PS_OK = [PsFacts(restarts=0, declared_failed=False)]


@pytest.mark.parametrize(("policy", "case", "fail_fast", "expected"), [
    (None, facts(), True, Decision.FAIL_RUN),
    (None, facts(), False, Decision.NOTHING),
    (ON_FAILURE, facts(), True, Decision.RESTART_TASK),
    (ON_FAILURE, facts(restarts=2), True, Decision.FAIL_RUN),                 # budget spent
    (ON_FAILURE, facts(was_running=False), True, Decision.FAIL_RUN),          # failed the start
    (ON_FAILURE, facts(declared_by_controller=True), True, Decision.FAIL_RUN),
    (ON_FAILURE, facts(lost_peer=True), True, Decision.SETTLE),
    (ON_FAILURE, facts(lost_peer=True, settled=True), True, Decision.RESTART_TASK),
    (ON_FAILURE, facts(lost_peer=True, cluster_up=False), True, Decision.RESTART_TASK),
    (ON_FAILURE, facts(Job.PS), True, Decision.RESTART_CLUSTER),
    (ON_FAILURE, facts(Job.PS, cluster_up=False), True, Decision.FAIL_RUN),  # during the start
    (ON_FAILURE, facts(Job.PS, workers_done=True), False, Decision.NOTHING),
    # An evaluator only watches training: restarted by default, never failing the run.
    (None, facts(Job.EVALUATOR), True, Decision.RESTART_TASK),
    (None, facts(Job.EVALUATOR, restarts=3), True, Decision.NOTHING),
    (None, facts(Job.EVALUATOR, lost_peer=True), True, Decision.RESTART_TASK),
])
def test_the_restart_policy_decides(tmp_path: Path, policy: RestartPolicy | None,
                                    case: FailureFacts, fail_fast: bool, expected: Decision) -> None:
    config = make_config(tmp_path)
    if policy is not None:
        config = dataclasses.replace(config, restart_overrides={Job.PS: policy, Job.WORKER: policy})
    assert decide(config, case, fail_fast=fail_fast, ps=PS_OK) is expected
