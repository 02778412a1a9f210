"""The stall watchdog: the rules with scripted tasks on a fake clock, then a real TensorFlow
cluster with a SIGSTOPped worker, whose run directory then fills up (the run stops, exit 1)."""

from __future__ import annotations

import asyncio
import dataclasses
import io
import json
import os
import signal
from pathlib import Path

import pytest

from tests.support import assert_no_trainers_left, fill, small_filesystem
from tests.support.fakes import FakeClock, FakeLauncher, FakeProcess, Recorder, make_config, start_all
from trainer import protocol
from trainer.settings import Mode
from tui.common.exit_codes import ExitCode
from tui.config.cluster import RestartMode, RestartPolicy
from tui.config.restart_policy import StallPolicy
from tui.core.events import (
    ControllerEvent,
    Notice,
    RunFinished,
    RunOutcome,
    TaskHint,
    TaskHintCleared,
    TaskStalled,
    TrainerEvent,
)
from tui.core.options import RunOptions
from tui.core.supervisor import busy, stall
from tui.core.supervisor.lifecycle import Supervisor
from tui.core.supervisor.records import SupervisorOptions
from tui.core.task_state import TaskState
from tui.headless import run_headless


async def seconds_pass(clock: FakeClock, seconds: int, each: FakeProcess | None = None) -> None:
    """Let ``seconds`` pass on the fake clock, one tick at a time; ``each`` steps every tick."""
    for second in range(seconds):
        if each is not None:
            each.step(second + 1)
        await clock.sleeping(1.0)
        clock.advance(1.0)


async def up(tmp_path: Path, options: SupervisorOptions, restart: RestartPolicy | None = None
             ) -> tuple[Supervisor, Recorder, FakeClock, dict[str, FakeProcess], FakeLauncher]:
    launcher, recorder, clock = FakeLauncher(), Recorder(), FakeClock()
    config = dataclasses.replace(make_config(tmp_path), restart=restart or RestartPolicy())
    supervisor = Supervisor(config, runs_root=tmp_path / "runs", launcher=launcher, clock=clock,
                            options=options)
    supervisor.subscribe(recorder)
    await supervisor.start()
    processes = await start_all(launcher, ["ps0", "worker0", "worker1"])
    await recorder.wait_for(lambda e: isinstance(e, Notice) and "tasks up" in e.text)
    return supervisor, recorder, clock, processes, launcher


async def test_a_silent_worker_is_stalled_sooner_while_others_progress_and_a_ps_when_all_wait(
        tmp_path: Path) -> None:
    supervisor, recorder, clock, processes, _ = await up(tmp_path, SupervisorOptions(stall_timeout=8.0))
    # Before its first step a worker may set up quietly (a non-chief waiting for its session
    # while the chief trains): it gets the full timeout, not a quarter.
    await seconds_pass(clock, 4, each=processes["worker0"])
    assert not recorder.of(TaskStalled)
    processes["worker1"].step(1)
    processes["worker1"].say("last words of worker1")
    await seconds_pass(clock, 4, each=processes["worker0"])  # a quarter of 8 s: 2 s
    (first,) = recorder.of(TaskStalled)
    assert (first.task, first.stopped, first.last_line, first.policy) == (
        "worker1", False, "last words of worker1", "warn")
    assert 2 <= first.seconds < 4
    hint = next(h for h in recorder.of(TaskHint) if h.task == "worker1")
    assert hint.hint.startswith("stalled: no progress for")
    assert "last line: last words of worker1" in hint.hint
    await seconds_pass(clock, 9)  # now nobody progresses: the full 8 s for worker0 and the ps
    stalled = {s.task: s for s in recorder.of(TaskStalled)}
    assert sorted(stalled) == ["ps0", "worker0", "worker1"]  # each once
    assert len(recorder.of(TaskStalled)) == 3 and stalled["ps0"].seconds >= 8
    assert any(n.text.startswith("stalled: no worker has progressed behind it") for n in recorder.of(Notice))
    await supervisor.stop_all()


async def test_a_stopped_ps_alone_is_named_and_on_stall_fail_ends_the_run(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(stall, "process_stopped", lambda task: task.name == "ps0")
    supervisor, recorder, clock, processes, _ = await up(
        tmp_path, SupervisorOptions(stall_timeout=8.0, on_stall=StallPolicy.FAIL))
    await seconds_pass(clock, 3)
    (stalled,) = recorder.of(TaskStalled)
    assert (stalled.task, stalled.stopped) == ("ps0", True)
    summary = await supervisor.wait()
    assert processes["ps0"].killed == 1
    assert summary.outcome is RunOutcome.FAILED
    assert "ps0 stalled: no worker has progressed behind it for" in summary.reason
    assert "its process is stopped (SIGSTOP)" in summary.reason


async def test_on_stall_restart_kills_it_and_the_restart_policy_restarts_it(tmp_path: Path) -> None:
    supervisor, recorder, clock, processes, launcher = await up(
        tmp_path, SupervisorOptions(stall_timeout=8.0, on_stall=StallPolicy.RESTART),
        restart=RestartPolicy(policy=RestartMode.ON_FAILURE, max_restarts=1, backoff=0.0))
    processes["worker1"].step(1)
    await seconds_pass(clock, 4, each=processes["worker0"])
    (stalled,) = recorder.of(TaskStalled)
    assert (stalled.task, stalled.policy) == ("worker1", "restart")
    await recorder.state("worker1", TaskState.FAILED)
    assert processes["worker1"].killed == 1
    await clock.sleeping(0.0)  # the restart policy's backoff
    clock.advance(0.0)
    again = await launcher.started("worker1", launch=2)  # the restart policy's restart
    again.ready()
    await recorder.state("worker1", TaskState.RUNNING, nth=2)
    assert not [h for h in recorder.of(TaskHint) if "out of memory" in h.hint]
    await supervisor.stop_all()


async def test_a_worker_left_behind_by_its_peers_is_restarted_under_on_failure_by_default(
        tmp_path: Path) -> None:
    # Seen on the lab: a worker hung for good after its host's cut while the others trained;
    # the default on_stall (warn) only said so, for minutes.
    supervisor, recorder, clock, processes, launcher = await up(
        tmp_path, SupervisorOptions(stall_timeout=8.0),
        restart=RestartPolicy(policy=RestartMode.ON_FAILURE, max_restarts=1, backoff=0.0))
    processes["worker1"].step(1)
    await seconds_pass(clock, 4, each=processes["worker0"])
    (stalled,) = recorder.of(TaskStalled)
    assert (stalled.task, stalled.policy) == ("worker1", "warn")
    assert processes["worker1"].killed == 0  # a quarter of the timeout: only said
    await seconds_pass(clock, 5, each=processes["worker0"])  # the full 8 s while worker0 steps
    await recorder.state("worker1", TaskState.FAILED)
    assert processes["worker1"].killed == 1
    said = "stalled: no progress for 8 s while its peers progress; restarting it"
    assert any(n.task == "worker1" and n.text.startswith(said) for n in recorder.of(Notice))
    await clock.sleeping(0.0)  # the restart policy's backoff
    clock.advance(0.0)
    again = await launcher.started("worker1", launch=2)
    again.ready()
    await recorder.state("worker1", TaskState.RUNNING, nth=2)
    (result,) = [t for t in supervisor.tasks() if t.name == "worker1"]
    assert result.restarts == 1
    assert not recorder.of(TaskHintCleared)
    await supervisor.stop_all()


async def test_without_a_restart_left_a_worker_left_behind_is_only_reported(tmp_path: Path) -> None:
    supervisor, recorder, clock, processes, _ = await up(tmp_path, SupervisorOptions(stall_timeout=8.0))
    processes["worker1"].step(1)
    await seconds_pass(clock, 12, each=processes["worker0"])
    assert [s.task for s in recorder.of(TaskStalled)] == ["worker1"]
    assert processes["worker1"].killed == 0  # restart: never (the default): a warning only
    await supervisor.stop_all()


async def test_a_stall_is_not_taken_back_for_an_absence_it_does_not_wait_for(tmp_path: Path) -> None:
    # An async worker waits for the ps and the chief, not for another worker: a third worker
    # out of reach or restarting excuses nobody (it said "a task it waits for was restarting").
    launcher, recorder, clock = FakeLauncher(), Recorder(), FakeClock()
    config = make_config(tmp_path, num_workers=3)
    supervisor = Supervisor(config, runs_root=tmp_path / "runs", launcher=launcher, clock=clock,
                            options=SupervisorOptions(stall_timeout=8.0))
    supervisor.subscribe(recorder)
    await supervisor.start()
    processes = await start_all(launcher, ["ps0", "worker0", "worker1", "worker2"])
    await recorder.wait_for(lambda e: isinstance(e, Notice) and "tasks up" in e.text)
    processes["worker1"].step(1)
    await seconds_pass(clock, 4, each=processes["worker0"])
    assert [s.task for s in recorder.of(TaskStalled)] == ["worker1"]
    restart = asyncio.ensure_future(supervisor.restart_task("worker2"))
    await launcher.started("worker2", 2)  # it stays starting: the others do not wait for it
    await seconds_pass(clock, 3, each=processes["worker0"])
    assert not recorder.of(TaskHintCleared)
    restart.cancel()
    await supervisor.stop_all()


@pytest.mark.integration
@pytest.mark.timeout(300)
async def test_a_sigstopped_worker_is_stalled_then_a_full_disk_stops_the_run(tmp_path: Path) -> None:
    """Real TensorFlow: worker1 is SIGSTOPped; worker0 keeps training, so worker1 is
    reported within a quarter of stall_timeout, as stopped. It is continued, and the run
    directory's disk (a small tmpfs, checkpoints on it too) is filled: the write failure
    names the file and "No space left on device", the run stops and exits 1, and
    summary.json is never left empty."""
    with small_filesystem(tmp_path / "disk", "16m") as disk:
        runs = disk / "runs"
        config = make_config(tmp_path, mode=Mode.ASYNC, steps=10_000_000, log_every=20, hidden_units=16)
        supervisor = Supervisor(config, runs_root=runs,
                                options=SupervisorOptions(grace=2.0, stall_timeout=8.0))
        stopped: list[int] = []
        stalls: list[TaskStalled] = []

        def act(event: ControllerEvent) -> None:
            if (not stopped and isinstance(event, TrainerEvent) and event.task == "worker1"
                    and isinstance(event.event, protocol.Step)):
                pid = next(t.pid for t in supervisor.tasks() if t.name == "worker1")
                assert pid is not None
                os.kill(pid, signal.SIGSTOP)
                stopped.append(pid)
            elif isinstance(event, TaskStalled) and not stalls:
                stalls.append(event)
                os.kill(stopped[0], signal.SIGCONT)
                fill(disk)

        supervisor.subscribe(act)
        out, err = io.StringIO(), io.StringIO()
        code = await run_headless(RunOptions(config=config, runs_root=runs), supervisor=supervisor,
                                  out=out, err=err, handle_signals=False)
        text = out.getvalue()
        (run_dir,) = runs.iterdir()
        summary = run_dir / "summary.json"
        assert not summary.exists() or json.loads(summary.read_text())["outcome"] == "failed"
        assert_no_trainers_left(runs)
    assert stalls and (stalls[0].task, stalls[0].stopped) == ("worker1", True), text[-3000:]
    assert stalls[0].seconds < 8
    assert "worker1 | warning: stalled: no progress for" in text
    assert "its process is stopped (SIGSTOP)" in text
    assert code is ExitCode.TASK_FAILED, text[-3000:]
    assert f"run directory: cannot write {run_dir}/" in text and "No space left on device" in text


@pytest.mark.integration
@pytest.mark.timeout(300)
async def test_a_sigstopped_worker_is_restarted_by_the_default_policies_and_steps_again(
        tmp_path: Path) -> None:
    """Real TensorFlow: worker1 is SIGSTOPped for good while worker0 trains on. With
    ``restart: on-failure`` and the default ``on_stall`` (warn) it is killed once the full
    stall timeout passed, restarted, and steps again; the restart's incident says why."""
    config = dataclasses.replace(
        make_config(tmp_path, mode=Mode.ASYNC, steps=10_000_000, log_every=20, hidden_units=16),
        restart=RestartPolicy(policy=RestartMode.ON_FAILURE, max_restarts=2, backoff=0.5))
    supervisor = Supervisor(config, runs_root=tmp_path / "runs",
                            options=SupervisorOptions(grace=2.0, stall_timeout=8.0))
    stopped: list[int] = []
    back = asyncio.Event()

    def act(event: ControllerEvent) -> None:
        if not (isinstance(event, TrainerEvent) and event.task == "worker1"
                and isinstance(event.event, protocol.Step)):
            return
        pid = next(t.pid for t in supervisor.tasks() if t.name == "worker1")
        assert pid is not None
        if not stopped:
            os.kill(pid, signal.SIGSTOP)
            stopped.append(pid)
        elif pid != stopped[0]:
            back.set()  # the restarted worker1 steps

    recorder = Recorder()
    supervisor.subscribe(act)
    supervisor.subscribe(recorder)
    await supervisor.start()
    try:
        await asyncio.wait_for(back.wait(), 200)
    finally:
        summary = await supervisor.stop_all()
    assert summary is not None
    assert_no_trainers_left(tmp_path / "runs")
    (worker1,) = [t for t in summary.tasks if t.name == "worker1"]
    assert worker1.restarts == 1
    (incident,) = summary.incidents
    assert incident.task == "worker1"
    assert incident.reason.startswith("was killed by SIGKILL (stalled: no progress for "), incident.reason
    (stalled,) = [s for s in recorder.of(TaskStalled) if s.task == "worker1"]
    assert stalled.stopped and stalled.policy == "warn"


async def test_a_stall_is_taken_back_when_the_task_shows_life_again(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    stopped = {"worker1"}
    monkeypatch.setattr(stall, "process_stopped", lambda task: task.name in stopped)
    supervisor, recorder, clock, processes, _ = await up(tmp_path, SupervisorOptions(stall_timeout=8.0))
    await seconds_pass(clock, 3, each=processes["worker0"])
    (stalled,) = recorder.of(TaskStalled)
    assert stalled.stopped
    hint = next(h for h in recorder.of(TaskHint) if h.task == "worker1")
    assert "kill -CONT" in hint.hint
    stopped.clear()  # kill -CONT: it runs and steps again
    processes["worker1"].step(50)
    await seconds_pass(clock, 2, each=processes["worker0"])
    (cleared,) = recorder.of(TaskHintCleared)
    assert (cleared.task, cleared.reason) == ("worker1", "progressing again")
    # Watched again: a second stall is reported again.
    stopped.add("worker1")
    await seconds_pass(clock, 3, each=processes["worker0"])
    assert [s.task for s in recorder.of(TaskStalled)] == ["worker1", "worker1"]
    await supervisor.stop_all()


async def test_workers_waiting_for_a_restarting_task_are_not_stalled(tmp_path: Path) -> None:
    supervisor, recorder, clock, processes, launcher = await up(
        tmp_path, SupervisorOptions(stall_timeout=8.0))
    processes["worker1"].say("waiting for the chief")
    restart = asyncio.ensure_future(supervisor.restart_task("worker0"))
    chief = await launcher.started("worker0", 2)
    await seconds_pass(clock, 20)  # the chief takes long to come back; nobody is stalled
    assert not recorder.of(TaskStalled)
    chief.ready()
    await restart
    await recorder.state("worker0", TaskState.RUNNING, nth=2)
    await seconds_pass(clock, 1, each=chief)
    processes["worker1"].step(10)
    await seconds_pass(clock, 1, each=chief)
    assert not recorder.of(TaskStalled)
    await supervisor.stop_all()


async def worker0_hinted(tmp_path: Path) -> tuple[Supervisor, Recorder, FakeClock, FakeProcess]:
    """A running cluster whose worker0 has printed TF's UNAVAILABLE, and the hint it drew."""
    supervisor, recorder, clock, processes, _ = await up(tmp_path, SupervisorOptions(stall_timeout=0))
    worker0 = processes["worker0"]
    worker0.say("tensorflow.python.framework.errors_impl.UnavailableError: failed to connect")
    await recorder.wait_for(lambda e: isinstance(e, TaskHint))
    return supervisor, recorder, clock, worker0


async def test_a_failure_hint_is_taken_back_when_the_task_trains_on_past_it(tmp_path: Path) -> None:
    # TF2's coordinator logs UNAVAILABLE when a worker goes, and trains on with the others
    # (and with it again once restarted): the hint stood for the rest of the run. Taken back
    # once it has stepped for a while with no new such line; a line again gives it again.
    supervisor, recorder, clock, worker0 = await worker0_hinted(tmp_path)
    await seconds_pass(clock, 5, each=worker0)
    worker0.say("UnavailableError: worker1 is gone again")  # the cause is still there
    await seconds_pass(clock, 8, each=worker0)
    assert not recorder.of(TaskHintCleared)
    await seconds_pass(clock, 4, each=worker0)
    (cleared,) = recorder.of(TaskHintCleared)
    assert (cleared.task, cleared.reason) == ("worker0", "training on, no such failure for 10 s")
    worker0.say("UnavailableError: and again")
    await recorder.wait_for(lambda e: isinstance(e, TaskHint) and len(recorder.of(TaskHint)) == 2)
    await supervisor.stop_all()


async def test_a_failure_hint_is_taken_back_when_the_task_succeeds(tmp_path: Path) -> None:
    # A TF2 chief whose coordinator logged UNAVAILABLE for a lost worker and finished a few
    # seconds later (before the hint's 10 s had passed) kept "a ps or peer task is gone" on
    # its succeeded row and in the summary.
    supervisor, recorder, clock, worker0 = await worker0_hinted(tmp_path)
    await seconds_pass(clock, 2, each=worker0)
    worker0.exit(0)
    await recorder.state("worker0", TaskState.SUCCEEDED)
    (cleared,) = recorder.of(TaskHintCleared)
    assert (cleared.task, cleared.reason) == ("worker0", "succeeded")
    await supervisor.stop_all()
    (finished,) = recorder.of(RunFinished)
    assert [t.hint for t in finished.summary.tasks if t.name == "worker0"] == [""]


def test_a_stopped_process_is_found_by_its_pid_or_its_group() -> None:
    stat = ("200 (sh) S 1 200 200 0 0\n"
            "201 (python3 (trainer) x) T 200 200 200 0 0\n"  # (a name with spaces and parentheses)
            "300 (python3) t 1 300 300 0 0\n"
            "400 (python3) S 1 400 400 0 0\n")
    assert busy.group_stopped(stat, 200) and busy.group_stopped(stat, 201) and busy.group_stopped(stat, 300)
    assert not busy.group_stopped(stat, 400) and not busy.group_stopped(stat, 500)


@dataclasses.dataclass
class RemoteLauncher(FakeLauncher):
    """Its tasks' hosts answer ``/proc/*/stat`` reads: each process sleeping, or stopped
    (state T) when its pid is in :attr:`stopped`."""

    stopped: set[int] = dataclasses.field(default_factory=set)
    reads: int = 0

    async def run_command(self, host: object, argv: object) -> str:
        self.reads += 1
        pids = [p.pid for launched in self.processes.values() for p in launched]
        return "\n".join(f"{pid} (python3 -m trainer) {'T' if pid in self.stopped else 'S'} 1 {pid} {pid} 0 0"
                         for pid in pids) + "\n"


async def test_a_stopped_remote_sync_worker_is_named_after_a_quarter_of_the_timeout(tmp_path: Path) -> None:
    """Sync, every worker waits behind a stopped one: no peer progresses, so only the process's
    state tells it from the others, read from its host's /proc (on the lab it went unnoticed
    for the full timeout)."""
    launcher, recorder, clock = RemoteLauncher(), Recorder(), FakeClock()
    config = make_config(tmp_path, mode=Mode.SYNC)
    config = dataclasses.replace(config, tasks=tuple(dataclasses.replace(t, host="h2") for t in config.tasks))
    supervisor = Supervisor(config, runs_root=tmp_path / "runs", launcher=launcher, clock=clock,
                            options=SupervisorOptions(stall_timeout=8.0))
    supervisor.subscribe(recorder)
    await supervisor.start()
    processes = await start_all(launcher, ["ps0", "worker0", "worker1"])
    await recorder.wait_for(lambda e: isinstance(e, Notice) and "tasks up" in e.text)
    for step in (1, 2):
        processes["worker0"].step(step)
        processes["worker1"].step(step)
    assert processes["worker1"].pid is not None
    launcher.stopped.add(processes["worker1"].pid)

    async def second() -> None:
        await seconds_pass(clock, 1)
        await asyncio.sleep(0.05)  # (the read of the host's /proc takes turns of the loop)

    await second()
    assert launcher.reads == 0  # nobody quiet for a quarter of the timeout yet: no reads
    for _ in range(7):
        await second()
        if recorder.of(TaskStalled):
            break
    (stalled,) = recorder.of(TaskStalled)
    # Named after a quarter of 8 s, not the full 8 s that every worker waits.
    assert (stalled.task, stalled.stopped) == ("worker1", True) and stalled.seconds < 8, stalled
    hint = next(h for h in recorder.of(TaskHint) if h.task == "worker1")
    assert "its process is stopped (SIGSTOP)" in hint.hint and "kill -CONT" in hint.hint
    launcher.stopped.clear()  # kill -CONT: it steps again, and the others with it
    processes["worker1"].step(3)
    processes["worker0"].step(3)
    await second()
    await second()
    (cleared,) = recorder.of(TaskHintCleared)
    assert cleared.task == "worker1"
    await supervisor.stop_all()


async def test_a_slow_start_is_no_stall_quiet_time_counts_from_the_run_being_up(tmp_path: Path) -> None:
    """The last worker takes 20 s to come up (TensorFlow imported cold on a loaded machine)
    while the others wait: nobody is reported the moment the run is up; a stall after it is
    still one, counted from then."""
    launcher, recorder, clock = FakeLauncher(), Recorder(), FakeClock()
    supervisor = Supervisor(make_config(tmp_path), runs_root=tmp_path / "runs", launcher=launcher,
                            clock=clock, options=SupervisorOptions(stall_timeout=8.0))
    supervisor.subscribe(recorder)
    await supervisor.start()
    await start_all(launcher, ["ps0", "worker0"])
    late = await launcher.started("worker1")
    await seconds_pass(clock, 20)
    late.ready()
    await recorder.wait_for(lambda e: isinstance(e, Notice) and "tasks up" in e.text)
    await seconds_pass(clock, 3)
    assert not recorder.of(TaskStalled)
    await seconds_pass(clock, 8)
    assert {e.task for e in recorder.of(TaskStalled)} >= {"worker0", "worker1"}
    await supervisor.stop_all()
