"""Cluster restarts: a ps that fails mid-run takes the model's variables with it, so the
supervisor restarts every task in order and the chief resumes from the latest checkpoint.
Scripted fake processes and a fake clock; the real thing is in test_integration_restart."""

from __future__ import annotations

import asyncio
import dataclasses
from pathlib import Path
from types import SimpleNamespace

import pytest

from tests.support.fakes import (
    FakeClock,
    FakeLauncher,
    FakeProcess,
    Recorder,
    finish_cleanly,
    make_config,
    running,
)
from trainer import protocol
from trainer.settings import Mode
from tui.config.cluster import Job, RestartMode, RestartPolicy
from tui.config.restart_policy import PEER_LOSS_SETTLE
from tui.core.events import Incident, IncidentKind, Notice, RunOutcome, TrainerEvent
from tui.core.supervisor import recovery
from tui.core.supervisor.lifecycle import Supervisor
from tui.core.task_state import TaskState

S = TaskState
NAMES = ["ps0", "worker0", "worker1"]
UNAVAILABLE_LINE = "tensorflow.python.framework.errors_impl.UnavailableError: Socket closed"


def make(tmp_path: Path, ps: RestartPolicy, worker: RestartPolicy | None = None
         ) -> tuple[Supervisor, FakeLauncher, FakeClock, Recorder]:
    config = make_config(tmp_path, steps=1000)
    overrides = {Job.PS: ps, **({Job.WORKER: worker} if worker else {})}
    config = dataclasses.replace(config, restart_overrides=overrides)
    launcher, clock, recorder = FakeLauncher(), FakeClock(), Recorder()
    supervisor = Supervisor(config, runs_root=tmp_path / "runs", launcher=launcher, clock=clock)
    supervisor.subscribe(recorder)
    return supervisor, launcher, clock, recorder


def on_failure(max_restarts: int = 2, backoff: float = 5.0) -> RestartPolicy:
    # (Not 1 s: the run directory's flush sleeps that long, and clock.sleeping would match it.)
    return RestartPolicy(RestartMode.ON_FAILURE, max_restarts=max_restarts, backoff=backoff)


def initialized(process: FakeProcess, global_step: int) -> None:
    process.emit(protocol.Initialized(role="worker", index=process.task.index, global_step=global_step,
                                      seconds=1.0, is_chief=process.task.index == 0))


async def test_a_failed_ps_restarts_the_whole_cluster_which_resumes_from_the_checkpoint(
        tmp_path: Path) -> None:
    supervisor, launcher, clock, recorder = make(tmp_path, ps=on_failure(backoff=5.0))
    await supervisor.start()
    first = await running(launcher, recorder, NAMES)
    first["worker0"].step(350, target=1000)
    first["ps0"].exit(-9)
    # Every other task is stopped by the controller, not left to fail on its own.
    await recorder.state("worker0", S.STOPPED)
    await recorder.state("worker1", S.STOPPED)
    await clock.sleeping(5.0)
    assert supervisor.is_running
    clock.advance(5.0)
    second = await running(launcher, recorder, NAMES, launch=2)
    # Staged start again: ps first, then the chief, then the others.
    assert launcher.starts == NAMES + NAMES
    assert [e for e in launcher.log if e[0] == "send"][-3:] == [
        ("send", "ps0 go"), ("send", "worker0 go"), ("send", "worker1 go")]
    initialized(second["worker0"], 200)  # the chief restored the checkpoint of step 200
    await recorder.wait_for(lambda e: isinstance(e, TrainerEvent)
                            and isinstance(e.event, protocol.Initialized))
    progress = supervisor.progress()
    assert progress is not None and progress.global_step == 200  # back to the checkpoint's step
    await finish_cleanly(second)
    summary = await supervisor.wait()
    assert summary.outcome is RunOutcome.SUCCEEDED
    assert summary.incidents == (Incident(kind=IncidentKind.CLUSTER_RESTART, task="ps0",
                                          reason="was killed by SIGKILL", global_step=350,
                                          resumed_step=200, t=summary.incidents[0].t),)
    assert summary.incidents[0].steps_lost == 150
    assert summary.incidents[0].describe() == ("ps0 was killed by SIGKILL at step 350: cluster "
                                               "restarted, resumed from step 200 (150 steps lost)")
    assert {t.name: t.restarts for t in summary.tasks} == {"ps0": 1, "worker0": 0, "worker1": 0}
    notices = [n.text for n in recorder.of(Notice) if n.task == "ps0"]
    assert notices == ["was killed by SIGKILL; restarting the whole cluster (restart 1 of 2 within 600 s "
                       "in 5 s), training resumes from the latest checkpoint"]


async def test_workers_that_lose_the_ps_first_are_its_casualties_not_failures(tmp_path: Path) -> None:
    # Worker restarts are off: judged alone, worker1 would fail the run at once.
    supervisor, launcher, clock, recorder = make(tmp_path, ps=on_failure(backoff=7.0))
    await supervisor.start()
    first = await running(launcher, recorder, NAMES)
    first["worker1"].say(UNAVAILABLE_LINE)
    first["worker1"].exit(1)  # its exit arrives before the ps's
    await recorder.state("worker1", S.FAILED)
    await clock.sleeping(PEER_LOSS_SETTLE)
    first["ps0"].exit(-9)
    await clock.sleeping(7.0)  # the backoff of the cluster restart
    clock.advance(7.0)
    second = await running(launcher, recorder, NAMES, launch=2)
    await finish_cleanly(second)
    summary = await supervisor.wait()
    assert summary.outcome is RunOutcome.SUCCEEDED
    assert [i.kind for i in summary.incidents] == [IncidentKind.CLUSTER_RESTART]
    assert {t.name: t.restarts for t in summary.tasks} == {"ps0": 1, "worker0": 0, "worker1": 0}


async def test_a_worker_that_lost_a_ps_which_did_not_fail_is_judged_alone(tmp_path: Path) -> None:
    supervisor, launcher, clock, recorder = make(tmp_path, ps=on_failure())
    await supervisor.start()
    first = await running(launcher, recorder, NAMES)
    first["worker1"].say(UNAVAILABLE_LINE)
    first["worker1"].exit(1)
    await clock.sleeping(PEER_LOSS_SETTLE)
    assert supervisor.is_running and first["worker0"].terminated == 0  # still waiting
    clock.advance(PEER_LOSS_SETTLE)
    summary = await supervisor.wait()
    assert summary.outcome is RunOutcome.FAILED
    assert summary.reason == "worker1 exited with code 1 (UnavailableError: Socket closed)"
    assert summary.incidents == ()
    assert launcher.starts == NAMES


async def test_a_failure_is_named_by_its_own_launch_s_error_only(tmp_path: Path) -> None:
    # Workers died of "AbortedError: The same RunGraph ..." and the incident said only "exited
    # with code 1". A later launch's exit must not borrow an earlier launch's error.
    supervisor, launcher, clock, recorder = make(tmp_path, ps=on_failure(), worker=on_failure(1, 5.0))
    await supervisor.start()
    first = await running(launcher, recorder, NAMES)
    first["worker1"].say("tensorflow.python.framework.errors_impl.AbortedError: The same RunGraph "
                         "(Worker) request was received twice.")
    first["worker1"].exit(1)
    await clock.sleeping(5.0)
    clock.advance(5.0)
    again = await launcher.started("worker1", launch=2)
    again.ready()
    await recorder.state("worker1", S.RUNNING, nth=2)
    again.exit(1)
    summary = await supervisor.wait()
    (incident,) = summary.incidents
    assert incident.reason == ("exited with code 1 (AbortedError: The same RunGraph (Worker) request "
                               "was received twice.)")
    assert summary.reason == "worker1 exited with code 1"


async def test_a_ps_failure_while_a_worker_s_own_restart_is_launching_starts_it_once(tmp_path: Path) -> None:
    # Over SSH a start takes a while: worker1's own restart is still launching when ps0's
    # failure restarts the whole cluster (a host back from a cut: both at once).
    supervisor, launcher, clock, recorder = make(tmp_path, ps=on_failure(backoff=7.0),
                                                 worker=on_failure(backoff=3.0))
    gate = launcher.gates[("worker1", 2)] = asyncio.Event()
    await supervisor.start()
    first = await running(launcher, recorder, NAMES)
    first["worker1"].exit(1)
    await clock.sleeping(3.0)  # its own restart's backoff
    clock.advance(3.0)
    await launcher.logged(("held", "worker1"))
    first["ps0"].exit(-9)
    await recorder.wait_for(lambda e: isinstance(e, Notice) and "restarting the whole cluster" in e.text)
    gate.set()  # its own launch ends during the cluster restart: that process is stopped
    own = await launcher.started("worker1", launch=2)
    await recorder.state("worker1", S.STOPPED)
    assert own.terminated == 1
    await clock.sleeping(7.0)
    clock.advance(7.0)
    second = {"ps0": await launcher.started("ps0", 2), "worker0": await launcher.started("worker0", 2),
              "worker1": await launcher.started("worker1", 3)}
    for process in second.values():
        process.ready()
    await recorder.state("worker1", S.RUNNING, nth=2)
    await finish_cleanly(second)
    summary = await supervisor.wait()
    assert summary.outcome is RunOutcome.SUCCEEDED, summary.reason
    assert launcher.starts == [*NAMES, "worker1", *NAMES]


async def test_a_ps_failure_past_its_restart_budget_fails_the_run(tmp_path: Path) -> None:
    supervisor, launcher, clock, recorder = make(tmp_path, ps=on_failure(max_restarts=1, backoff=7.0))
    await supervisor.start()
    first = await running(launcher, recorder, NAMES)
    first["ps0"].exit(1)
    await clock.sleeping(7.0)
    clock.advance(7.0)
    second = await running(launcher, recorder, NAMES, launch=2)
    initialized(second["worker0"], 0)
    second["ps0"].exit(1)
    summary = await supervisor.wait()
    assert summary.outcome is RunOutcome.FAILED
    assert summary.reason == "ps0 exited with code 1"
    assert [(i.task, i.resumed_step) for i in summary.incidents] == [("ps0", 0)]
    assert launcher.starts == NAMES + NAMES


async def test_a_ps_failing_during_the_start_fails_the_start(tmp_path: Path) -> None:
    supervisor, launcher, _clock, recorder = make(tmp_path, ps=on_failure())
    await supervisor.start()
    ps0 = await launcher.started("ps0")
    ps0.ready()
    await recorder.state("ps0", S.RUNNING)
    ps0.exit(1)  # before the chief is up: there is nothing to resume yet
    summary = await supervisor.wait()
    assert summary.outcome is RunOutcome.FAILED
    assert summary.incidents == ()
    assert launcher.starts == NAMES


async def test_a_stop_during_the_backoff_ends_the_run_without_restarting(tmp_path: Path) -> None:
    supervisor, launcher, clock, recorder = make(tmp_path, ps=on_failure(backoff=30.0))
    await supervisor.start()
    first = await running(launcher, recorder, NAMES)
    first["ps0"].exit(1)
    await clock.sleeping(30.0)
    summary = await supervisor.stop_all()
    assert summary is not None and summary.outcome is RunOutcome.FAILED  # ps0 failed
    assert launcher.starts == NAMES
    assert [(i.task, i.resumed_step) for i in summary.incidents] == [("ps0", None)]
    assert summary.incidents[0].describe().endswith("cluster restarted, training did not resume")


@pytest.mark.parametrize(("mode", "replicas", "warned"), [
    (Mode.SYNC, None, True), (Mode.SYNC, 1, False), (Mode.ASYNC, None, False)])
async def test_stopping_a_worker_by_hand_in_sync_mode_warns_that_training_pauses(
        tmp_path: Path, mode: Mode, replicas: int | None, warned: bool) -> None:
    config = make_config(tmp_path, mode=mode, replicas_to_aggregate=replicas)
    launcher, recorder = FakeLauncher(), Recorder()
    supervisor = Supervisor(config, runs_root=tmp_path / "runs", launcher=launcher, clock=FakeClock())
    supervisor.subscribe(recorder)
    await supervisor.start()
    await running(launcher, recorder, NAMES)
    await supervisor.stop_task("worker1")
    warnings = [n.text for n in recorder.of(Notice) if n.task == "worker1"]
    assert bool(warnings) is warned
    if warned:
        assert warnings[0].startswith("sync mode: every round needs a gradient from each worker")
    await supervisor.stop_all()


def test_a_failures_step_is_the_tasks_own_last_report_where_it_made_one() -> None:
    """A chief that reported step 21 and was then killed failed at 21, whatever the run's
    step had last been told (13); a task that reported nothing failed at the run's step."""
    run = SimpleNamespace(incidents=[], awaiting_resume={}, progress=SimpleNamespace(global_step=13),
                          clock=SimpleNamespace(time=lambda: 5.0))
    for name, last_step in (("chief0", 21), ("worker1", None)):
        task = SimpleNamespace(name=name, last_step=last_step)
        recovery._record_incident(run, task, "was killed by SIGKILL", IncidentKind.TASK_RESTART, resumes=task)
    assert [(i.task, i.global_step, i.restarted) for i in run.incidents] == [("chief0", 21, False),
                                                                             ("worker1", 13, False)]



async def restarting_cluster(tmp_path: Path) -> tuple[Supervisor, FakeLauncher, FakeClock, Recorder]:
    """A run whose ps0 failed, its cluster restart past its backoff of 7 s: launching again."""
    supervisor, launcher, clock, recorder = make(tmp_path, ps=on_failure(backoff=7.0))
    await supervisor.start()
    first = await running(launcher, recorder, NAMES)
    first["ps0"].exit(-9)
    await clock.sleeping(7.0)
    clock.advance(7.0)
    return supervisor, launcher, clock, recorder


async def test_a_stop_during_a_cluster_restart_whose_stage_never_gets_ready_ends_the_run_at_once(
        tmp_path: Path) -> None:
    # The stage waits for ps0's `loaded`, which never comes: a stop (SIGTERM) must not wait for
    # the start's deadline (the clock never moves here).
    supervisor, launcher, _, _ = await restarting_cluster(tmp_path)
    for name in NAMES:
        await launcher.started(name, 2)
    stopping = supervisor.stop_all(RunOutcome.INTERRUPTED, "interrupted by SIGTERM")
    summary = await asyncio.wait_for(stopping, 10)
    assert summary is not None and summary.outcome is RunOutcome.INTERRUPTED
    assert all(t.state is S.STOPPED for t in summary.tasks)


async def test_a_task_that_dies_in_a_cluster_restart_s_stage_ends_the_wait_at_once(tmp_path: Path) -> None:
    supervisor, launcher, clock, recorder = await restarting_cluster(tmp_path)
    second = {name: await launcher.started(name, 2) for name in NAMES}
    second["ps0"].ready()
    await recorder.state("ps0", S.RUNNING, nth=2)
    second["worker0"].exit(1)  # the chief, before it reported ready: not its stage's deadline
    summary = await asyncio.wait_for(supervisor.wait(), 10)
    assert summary.outcome is RunOutcome.FAILED
    assert summary.reason.startswith("cluster restart failed: worker0 exited with code 1")
    assert clock.monotonic() == 7.0
