"""What the supervisor concludes from a task's events, as logic: a restarted TF2 worker reports
nothing itself, so its rejoin is read from the coordinator's count of the functions it
finished, and only from counts that grew after its restart."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from trainer import protocol
from tui.core.events import Incident, IncidentKind
from tui.core.supervisor import process


def coordinator_step(step: int, by_worker: tuple[int, ...]) -> protocol.Step:
    return protocol.Step(role="chief", index=0, global_step=step, local_step=step, loss=None,
                         examples_per_sec=0.0, step_time=0.1, coordinator=True, by_worker=by_worker)


def a_run() -> Any:
    """The parts of a run record the rejoin rule reads: worker1 was SIGKILLed at step 13 and
    started again when the coordinator had counted 7 of its functions."""
    worker1 = SimpleNamespace(plan=SimpleNamespace(spec=SimpleNamespace(index=1)))
    incident = Incident(kind=IncidentKind.TASK_RESTART, task="worker1", reason="was killed by SIGKILL",
                        global_step=13, restarted=True)
    return SimpleNamespace(tasks={"worker1": worker1}, incidents=[incident], awaiting_resume={"worker1": 0},
                           resume_baseline={"worker1": 7}, worker_functions=(9, 7))


def test_a_restarted_worker_rejoined_once_the_coordinator_counts_new_functions_of_it() -> None:
    run = a_run()
    process._functions_finished(run, coordinator_step(20, (12, 7)))  # only worker0 moved
    assert run.incidents[0].resumed_step is None and run.worker_functions == (12, 7)
    process._functions_finished(run, coordinator_step(24, (14, 8)))
    assert run.incidents[0].resumed_step == 24
    assert run.incidents[0].describe().endswith("restarted, rejoined at step 24")
    assert run.awaiting_resume == {} and run.resume_baseline == {}
