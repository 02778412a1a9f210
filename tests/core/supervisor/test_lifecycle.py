"""The supervisor's state machine, start order, stops and timeouts, against scripted fake
processes and a fake clock. Synchronisation is always on events, never on sleeps."""

from __future__ import annotations

import asyncio
import dataclasses
import json
from pathlib import Path

import pytest

from tests.support.fakes import FakeClock, FakeLauncher, Recorder, finish_cleanly, make_config, start_all
from trainer import protocol
from trainer.settings import TrainingSettings
from tui.config.cluster import Job, RestartMode, RestartPolicy
from tui.core.events import (
    Notice,
    RunFinished,
    RunOutcome,
    RunStarted,
    TaskHint,
    TaskOutput,
    TaskStateChanged,
    TrainerEvent,
)
from tui.core.supervisor.lifecycle import Supervisor
from tui.core.supervisor.records import SupervisorOptions
from tui.core.task_state import TaskState
from tui.launch.base import PortProblem
from tui.launch.lines import Stream
from tui.plan.preflight import PreflightError

S = TaskState


def make(tmp_path: Path, **kwargs: object) -> tuple[Supervisor, FakeLauncher, FakeClock, Recorder]:
    config_kwargs = {k: kwargs.pop(k) for k in ("num_ps", "num_workers", "ports") if k in kwargs}
    config = make_config(tmp_path, **config_kwargs)  # type: ignore[arg-type]
    launcher, clock, recorder = FakeLauncher(), FakeClock(), Recorder()
    options = SupervisorOptions(**kwargs)  # type: ignore[arg-type]
    supervisor = Supervisor(config, runs_root=tmp_path / "runs", launcher=launcher, clock=clock,
                            options=options)
    supervisor.subscribe(recorder)
    return supervisor, launcher, clock, recorder


async def test_start_order_ps_then_chief_then_other_workers(tmp_path: Path) -> None:
    supervisor, launcher, _, recorder = make(tmp_path, num_ps=2, num_workers=3, hold=False)
    await supervisor.start()
    ps0 = await launcher.started("ps0")
    ps1 = await launcher.started("ps1")
    assert launcher.starts == ["ps0", "ps1"]
    ps0.ready()
    await recorder.state("ps0", S.RUNNING)
    # The chief waits for every ps: with ps1 still starting it cannot have been launched.
    assert launcher.starts == ["ps0", "ps1"]
    ps1.ready()
    chief = await launcher.started("worker0")
    assert launcher.starts == ["ps0", "ps1", "worker0"]
    chief.ready()
    await launcher.started("worker2")
    assert launcher.starts == ["ps0", "ps1", "worker0", "worker1", "worker2"]
    assert all("--hold" not in p.argv for p in (ps0, ps1, chief))
    await supervisor.stop_all()


async def test_with_hold_all_launch_at_once_and_go_follows_the_start_order(tmp_path: Path) -> None:
    supervisor, launcher, _, recorder = make(tmp_path, num_ps=2, num_workers=2)
    await supervisor.start()
    worker1 = await launcher.started("worker1")
    assert launcher.starts == ["ps0", "ps1", "worker0", "worker1"]
    procs = {name: launcher.processes[name][0] for name in launcher.starts}
    assert all(p.argv[1:3] == ("-m", "trainer") and p.argv[3] == "--hold" for p in procs.values())
    # Loaded out of order: nobody may go before every ps is loaded.
    worker1.loaded()
    procs["worker0"].loaded()
    procs["ps0"].loaded()
    await recorder.wait_for(lambda e: isinstance(e, TrainerEvent) and e.task == "ps0")
    assert all(p.sent == [] for p in procs.values())
    procs["ps1"].loaded()
    await recorder.wait_for(lambda e: isinstance(e, TrainerEvent) and e.task == "ps1")
    await supervisor_went(launcher, "ps1")
    assert [p.sent for p in procs.values()] == [["go"], ["go"], [], []]
    procs["ps0"].ready()
    procs["ps1"].ready()
    await supervisor_went(launcher, "worker0")
    assert procs["worker1"].sent == []
    procs["worker0"].ready()
    await supervisor_went(launcher, "worker1")
    sends = [entry for kind, entry in launcher.log if kind == "send"]
    assert sends == ["ps0 go", "ps1 go", "worker0 go", "worker1 go"]
    await supervisor.stop_all()


async def supervisor_went(launcher: FakeLauncher, name: str) -> None:
    """Wait until the supervisor sent `go` to ``name``."""
    await launcher.logged(("send", f"{name} go"))


async def test_clean_run_succeeds_with_summary(tmp_path: Path) -> None:
    supervisor, launcher, _, recorder = make(tmp_path)
    await supervisor.start()
    processes = await start_all(launcher, ["ps0", "worker0", "worker1"])
    await finish_cleanly(processes)
    summary = await supervisor.wait()
    assert summary.outcome is RunOutcome.SUCCEEDED
    assert summary.reason == ""
    assert summary.global_step == 100 and summary.target == 100
    assert summary.final_loss == 0.25 and summary.final_accuracy == 0.9
    assert [(t.name, t.state, t.exit_code) for t in summary.tasks] == [
        ("ps0", S.SUCCEEDED, 0), ("worker0", S.SUCCEEDED, 0), ("worker1", S.SUCCEEDED, 0)]
    assert recorder.states("worker1") == [S.STARTING, S.RUNNING, S.SUCCEEDED]
    assert isinstance(recorder.events[0], RunStarted)
    assert isinstance(recorder.events[-1], RunFinished)
    assert not any(p.terminated for p in processes.values())


async def test_state_change_events_carry_pid_and_exit_code(tmp_path: Path) -> None:
    supervisor, launcher, _, recorder = make(tmp_path, num_workers=1)
    await supervisor.start()
    processes = await start_all(launcher, ["ps0", "worker0"])
    await finish_cleanly(processes)
    await supervisor.wait()
    changes = [e for e in recorder.of(TaskStateChanged) if e.task == "worker0"]
    assert [(c.old, c.new) for c in changes] == [(S.PENDING, S.STARTING), (S.STARTING, S.RUNNING),
                                                 (S.RUNNING, S.SUCCEEDED)]
    assert all(c.pid == processes["worker0"].pid for c in changes)
    assert [c.exit_code for c in changes] == [None, None, 0]


async def test_ready_timeout_fails_the_start_clearly(tmp_path: Path) -> None:
    supervisor, launcher, clock, _recorder = make(tmp_path, ready_timeout=60.0)
    await supervisor.start()
    ps0 = await launcher.started("ps0")
    await clock.sleeping(60.0)
    clock.advance(60.0)
    summary = await supervisor.wait()
    assert summary.outcome is RunOutcome.FAILED
    assert summary.reason == "start failed: ps0 did not report ready within 60 s"
    assert launcher.starts == ["ps0", "worker0", "worker1"]  # --hold: launched, never told to go
    assert ps0.terminated == 1 and not any(p.sent for ps in launcher.processes.values() for p in ps)
    result = summary.tasks[0]
    assert (result.state, result.exit_code) == (S.FAILED, -15)
    assert result.reason == "did not report ready within 60 s"
    assert [t.state for t in summary.tasks[1:]] == [S.STOPPED, S.STOPPED]


async def test_exit_before_ready_fails_the_start_and_stops_the_rest(tmp_path: Path) -> None:
    supervisor, launcher, _, _ = make(tmp_path)
    await supervisor.start()
    ps0 = await launcher.started("ps0")
    ps0.ready()
    chief = await launcher.started("worker0")
    chief.say("trainer: error: --data-path: no such file", Stream.STDERR)
    chief.exit(2)
    summary = await supervisor.wait()
    assert summary.outcome is RunOutcome.FAILED
    assert summary.reason == "worker0 exited with code 2 before reporting ready"
    by_name = {t.name: t for t in summary.tasks}
    assert (by_name["worker0"].state, by_name["worker0"].exit_code) == (S.FAILED, 2)
    assert by_name["worker0"].last_lines == ("trainer: error: --data-path: no such file",)
    assert by_name["ps0"].state is S.STOPPED
    assert by_name["worker1"].state is S.STOPPED
    assert launcher.processes["worker1"][0].sent == []


async def test_worker_failure_mid_run_stops_everything_fail_fast(tmp_path: Path) -> None:
    supervisor, launcher, _, _recorder = make(tmp_path)
    await supervisor.start()
    processes = await start_all(launcher, ["ps0", "worker0", "worker1"])
    processes["worker1"].emit(protocol.Error(role="worker", index=1, type="RuntimeError",
                                             message="boom"))
    processes["worker1"].exit(3)
    summary = await supervisor.wait()
    assert summary.outcome is RunOutcome.FAILED
    assert summary.reason == "worker1 exited with code 3"
    states = {t.name: (t.state, t.exit_code) for t in summary.tasks}
    assert states == {"ps0": (S.STOPPED, -15), "worker0": (S.STOPPED, -15), "worker1": (S.FAILED, 3)}
    assert summary.tasks[2].last_lines[-1] == "error: RuntimeError: boom"


async def test_without_fail_fast_a_failed_worker_leaves_the_others_running(tmp_path: Path) -> None:
    supervisor, launcher, _, recorder = make(tmp_path, fail_fast=False)
    await supervisor.start()
    processes = await start_all(launcher, ["ps0", "worker0", "worker1"])
    processes["worker1"].exit(3)
    await recorder.state("worker1", S.FAILED)
    assert processes["worker0"].terminated == 0 and supervisor.is_running
    processes["worker0"].exit(0)
    summary = await supervisor.wait()
    assert summary.outcome is RunOutcome.FAILED
    # A ps never exits by itself after a worker failed: it is stopped right away.
    assert {t.name: t.state for t in summary.tasks}["ps0"] is S.STOPPED


async def test_stop_all_escalates_to_sigkill_after_the_grace_period(tmp_path: Path) -> None:
    supervisor, launcher, clock, recorder = make(tmp_path, grace=3.0)
    await supervisor.start()
    processes = await start_all(launcher, ["ps0", "worker0", "worker1"])
    processes["ps0"].ignore_term = True
    stopping = asyncio.ensure_future(supervisor.stop_all(RunOutcome.INTERRUPTED, "interrupted by SIGINT"))
    await recorder.state("worker0", S.STOPPED)
    await recorder.state("worker1", S.STOPPED)
    await clock.sleeping(3.0)  # now only ps0's grace period is left
    assert processes["ps0"].killed == 0
    clock.advance(3.0)
    summary = await stopping
    assert summary is not None
    assert summary.outcome is RunOutcome.INTERRUPTED
    assert summary.reason == "interrupted by SIGINT"
    assert processes["ps0"].killed == 1 and processes["worker0"].killed == 0
    assert {t.name: t.exit_code for t in summary.tasks} == {"ps0": -9, "worker0": -15, "worker1": -15}
    assert all(t.state is S.STOPPED for t in summary.tasks)


async def test_kill_all_skips_the_rest_of_the_grace_period(tmp_path: Path) -> None:
    supervisor, launcher, clock, recorder = make(tmp_path, grace=3.0)
    await supervisor.start()
    processes = await start_all(launcher, ["ps0", "worker0", "worker1"])
    processes["ps0"].ignore_term = True
    stopping = asyncio.ensure_future(supervisor.stop_all(RunOutcome.INTERRUPTED, "interrupted"))
    await recorder.state("worker0", S.STOPPED)
    await recorder.state("worker1", S.STOPPED)
    await clock.sleeping(3.0)
    supervisor.kill_all()
    summary = await stopping
    assert summary is not None and processes["ps0"].killed == 1


async def test_stop_during_start_stops_what_started_and_launches_nothing_more(tmp_path: Path) -> None:
    supervisor, launcher, _, _ = make(tmp_path)
    await supervisor.start()
    await launcher.started("ps0")
    summary = await supervisor.stop_all(RunOutcome.TIMEOUT, "timed out after 5 s")
    assert summary is not None and summary.outcome is RunOutcome.TIMEOUT
    assert not any(p.sent for ps in launcher.processes.values() for p in ps)


async def test_ps_that_does_not_exit_after_the_workers_is_a_failure(tmp_path: Path) -> None:
    supervisor, launcher, clock, _ = make(tmp_path, ps_exit_timeout=5.0)
    await supervisor.start()
    processes = await start_all(launcher, ["ps0", "worker0", "worker1"])
    for name in ("worker0", "worker1"):
        processes[name].exit(0)
    await clock.sleeping(5.0)
    clock.advance(5.0)
    summary = await supervisor.wait()
    assert summary.outcome is RunOutcome.FAILED
    assert summary.reason == "ps0 did not exit within 5 s after the last worker finished"
    ps0 = summary.tasks[0]
    assert (ps0.state, ps0.exit_code) == (S.FAILED, -15)


async def test_ps_exiting_within_the_window_is_clean(tmp_path: Path) -> None:
    supervisor, launcher, clock, _ = make(tmp_path, ps_exit_timeout=5.0)
    await supervisor.start()
    processes = await start_all(launcher, ["ps0", "worker0", "worker1"])
    processes["worker0"].exit(0)
    processes["worker1"].exit(0)
    await clock.sleeping(5.0)
    processes["ps0"].exit(0)
    summary = await supervisor.wait()
    assert summary.outcome is RunOutcome.SUCCEEDED


async def test_restart_one_task(tmp_path: Path) -> None:
    supervisor, launcher, _, recorder = make(tmp_path)
    await supervisor.start()
    processes = await start_all(launcher, ["ps0", "worker0", "worker1"])
    await recorder.state("worker1", S.RUNNING)
    await supervisor.restart_task("worker1")
    second = await launcher.started("worker1", launch=2)
    assert processes["worker1"].terminated == 1
    assert second.argv == processes["worker1"].argv and second.env == processes["worker1"].env
    second.ready()
    await recorder.state("worker1", S.RUNNING, nth=2)
    assert recorder.states("worker1") == [S.STARTING, S.RUNNING, S.STOPPING, S.STOPPED, S.BACKOFF,
                                          S.STARTING, S.RUNNING]
    assert supervisor.is_running
    view = {t.name: t for t in supervisor.tasks()}["worker1"]
    assert (view.state, view.launches, view.pid) == (S.RUNNING, 2, second.pid)
    await finish_cleanly({**processes, "worker1": second})
    summary = await supervisor.wait()
    assert summary.outcome is RunOutcome.SUCCEEDED


async def test_stop_and_start_one_task(tmp_path: Path) -> None:
    supervisor, launcher, _, recorder = make(tmp_path)
    await supervisor.start()
    await start_all(launcher, ["ps0", "worker0", "worker1"])
    await recorder.state("worker1", S.RUNNING)
    await supervisor.stop_task("worker1")
    assert {t.name: t.state for t in supervisor.tasks()}["worker1"] is S.STOPPED
    assert supervisor.is_running  # worker0 still runs
    await supervisor.start_task("worker1")
    (await launcher.started("worker1", launch=2)).ready()
    await recorder.state("worker1", S.RUNNING, nth=2)
    await supervisor.stop_all()
    with pytest.raises(RuntimeError):
        await supervisor.start_task("worker1")
    with pytest.raises(ValueError):
        await supervisor.stop_task("worker7")


async def test_stopping_every_worker_by_hand_ends_the_run_as_stopped(tmp_path: Path) -> None:
    supervisor, launcher, _, _ = make(tmp_path)
    await supervisor.start()
    await start_all(launcher, ["ps0", "worker0", "worker1"])
    await supervisor.stop_task("worker0")
    await supervisor.stop_task("worker1")
    summary = await supervisor.wait()
    assert summary.outcome is RunOutcome.STOPPED
    assert [t.state for t in summary.tasks] == [S.STOPPED] * 3


async def test_relaunch_with_changed_settings_starts_a_new_run(tmp_path: Path) -> None:
    supervisor, launcher, _, recorder = make(tmp_path)
    await supervisor.start()
    await start_all(launcher, ["ps0", "worker0", "worker1"])
    first_run = supervisor.run_id
    new_settings = supervisor.settings.replace(steps=7, mode="sync")
    await supervisor.relaunch(new_settings)
    assert supervisor.run_id != first_run
    assert [e.summary.outcome for e in recorder.of(RunFinished)] == [RunOutcome.STOPPED]
    ps0 = await launcher.started("ps0", launch=2)
    assert ps0.argv[ps0.argv.index("--steps") + 1] == "7"
    assert ps0.argv[ps0.argv.index("--mode") + 1] == "sync"
    assert supervisor.settings.steps == 7
    with pytest.raises(ValueError, match="steps"):
        await supervisor.relaunch(TrainingSettings(steps=0))
    await supervisor.stop_all()


async def test_port_in_use_fails_preflight_before_anything_starts(tmp_path: Path) -> None:
    supervisor, launcher, _, recorder = make(tmp_path, ports=[2222, 2223, 2224])
    launcher.port_problems = [PortProblem("localhost", 2223, "in use", 4242, "python3")]
    with pytest.raises(PreflightError) as caught:
        await supervisor.start()
    assert caught.value.problems == ("localhost:2223 is in use by pid 4242 (python3)",)
    assert launcher.starts == [] and recorder.events == []
    assert not (tmp_path / "runs").exists()


async def test_auto_ports_are_released_right_before_their_task_starts(tmp_path: Path) -> None:
    supervisor, launcher, _, _ = make(tmp_path, ports=[2222, None, None])
    await supervisor.start()
    processes = await start_all(launcher, ["ps0", "worker0", "worker1"])
    await supervisor_went(launcher, "worker1")
    events = [entry for entry in launcher.log if entry[0] in ("send", "release")]
    cluster = json.loads(processes["worker0"].env["TF_CONFIG"])["cluster"]
    p0, p1 = (int(a.rsplit(":", 1)[1]) for a in cluster["worker"])
    assert cluster["ps"] == ["localhost:2222"]
    # With --hold a task binds its port after `go`: the reservation ends right before it.
    assert events == [("send", "ps0 go"), ("release", p0), ("send", "worker0 go"),
                      ("release", p1), ("send", "worker1 go")]
    await supervisor.stop_all()


async def test_output_lines_become_output_and_trainer_events(tmp_path: Path) -> None:
    supervisor, launcher, _, recorder = make(tmp_path, num_workers=1)
    await supervisor.start()
    ps0 = await launcher.started("ps0")
    ps0.say("plain text")
    ps0.say('{"event": "ready", "v": 1}')  # missing fields: stays text
    ps0.ready()
    await recorder.state("ps0", S.RUNNING)
    outputs = [(text[:20], index in o.events) for o in recorder.of(TaskOutput)
               for index, text in enumerate(o.lines)]
    assert outputs == [("plain text", False), ('{"event": "ready", "', False),
                       ('{"event":"loaded","v', True), ('{"event":"ready","v"', True)]
    trainer_events = recorder.of(TrainerEvent)
    assert [type(e.event) for e in trainer_events] == [protocol.Loaded, protocol.Ready]
    await supervisor.stop_all()


async def test_a_read_of_many_lines_is_published_whole_in_line_order(tmp_path: Path) -> None:
    """One read: one TaskOutput per run of plain lines, cut after each event line so that its
    TrainerEvent and a hint follow the lines printed before them, never the lines after."""
    supervisor, launcher, _, recorder = make(tmp_path, num_workers=1)
    await supervisor.start()
    ps0 = await launcher.started("ps0")
    loaded = protocol.Loaded(role="ps", index=0, pid=1, seconds=1.0).to_json()
    plain = [f"line {n}" for n in range(500)]
    ps0.say_lines([*plain, loaded, "bind: Address already in use", "after"])
    await recorder.wait_for(lambda e: isinstance(e, TaskOutput) and "after" in e.lines)
    seen = [e for e in recorder.events if isinstance(e, (TaskOutput, TrainerEvent, TaskHint))]
    assert [type(e) for e in seen] == [TaskOutput, TrainerEvent, TaskOutput, TaskHint, TaskOutput]
    first, _, second, hint, third = seen
    assert first.lines == (*plain, loaded) and first.events == {500} and first.shown() == plain
    assert second.lines == ("bind: Address already in use",) and hint.task == "ps0"
    assert third.lines == ("after",)
    await supervisor.stop_all()


async def test_a_broken_subscriber_does_not_break_the_run(tmp_path: Path) -> None:
    supervisor, launcher, _, _ = make(tmp_path, num_workers=1)

    def broken(event: object) -> None:
        raise RuntimeError("front end bug")

    supervisor.subscribe(broken)
    await supervisor.start()
    processes = await start_all(launcher, ["ps0", "worker0"])
    await finish_cleanly(processes)
    assert (await supervisor.wait()).outcome is RunOutcome.SUCCEEDED


async def test_a_second_start_while_running_is_refused(tmp_path: Path) -> None:
    supervisor, _launcher, _, _ = make(tmp_path)
    await supervisor.start()
    with pytest.raises(RuntimeError):
        await supervisor.start()
    await supervisor.stop_all()


def with_restart(supervisor: Supervisor, job: Job, policy: RestartPolicy) -> None:
    """Give the supervisor's config a restart policy for ``job``."""
    supervisor._config = dataclasses.replace(supervisor.config, restart_overrides={job: policy})


async def test_restart_policy_restarts_a_failed_worker_after_the_backoff(tmp_path: Path) -> None:
    supervisor, launcher, clock, recorder = make(tmp_path)
    with_restart(supervisor, Job.WORKER, RestartPolicy(RestartMode.ON_FAILURE, max_restarts=1, backoff=7.0))
    await supervisor.start()
    processes = await start_all(launcher, ["ps0", "worker0", "worker1"])
    await recorder.state("worker1", S.RUNNING)
    processes["worker1"].exit(3)
    await clock.sleeping(7.0)
    assert supervisor.is_running and processes["worker0"].terminated == 0
    clock.advance(7.0)
    second = await launcher.started("worker1", launch=2)
    second.ready()
    await recorder.state("worker1", S.RUNNING, nth=2)
    notices = [n.text for n in recorder.of(Notice)]
    assert notices == ["exited with code 3; restart 1 of 1 within 600 s in 7 s"]
    # The budget is spent: the next failure fails the run.
    second.exit(4)
    summary = await supervisor.wait()
    assert summary.outcome is RunOutcome.FAILED
    worker1 = {t.name: t for t in summary.tasks}["worker1"]
    assert (worker1.exit_code, worker1.restarts) == (4, 1)


async def test_restart_policy_of_another_job_does_not_apply(tmp_path: Path) -> None:
    supervisor, launcher, _, _ = make(tmp_path)
    with_restart(supervisor, Job.PS, RestartPolicy(RestartMode.ON_FAILURE))
    await supervisor.start()
    processes = await start_all(launcher, ["ps0", "worker0", "worker1"])
    processes["worker1"].exit(3)
    summary = await supervisor.wait()
    assert summary.outcome is RunOutcome.FAILED
    assert launcher.starts.count("worker1") == 1


async def test_subscribers_can_be_queues_and_can_unsubscribe(tmp_path: Path) -> None:
    supervisor, launcher, _, recorder = make(tmp_path, num_workers=1)
    queue: asyncio.Queue[object] = asyncio.Queue()
    unsubscribe = supervisor.subscribe(queue)  # type: ignore[arg-type]
    await supervisor.start()
    assert isinstance(await queue.get(), RunStarted)
    unsubscribe()
    unsubscribe()  # idempotent
    (await launcher.started("ps0")).ready()
    await recorder.state("ps0", S.RUNNING)
    assert queue.empty()
    await supervisor.stop_all()
