"""The run's outlets (tui.core.supervisor.records): progress snapshots are throttled, yet
every change is told and the last one comes before the run's end."""

from __future__ import annotations

from pathlib import Path

from tests.support.fakes import (
    FakeClock,
    FakeLauncher,
    FakeProcess,
    Recorder,
    finish_cleanly,
    make_config,
    start_all,
)
from trainer import protocol
from tui.core.events import ProgressUpdate, RunFinished, TrainerEvent
from tui.core.supervisor.lifecycle import Supervisor
from tui.core.task_state import TaskState


async def _running(tmp_path: Path) -> tuple[Supervisor, Recorder, dict[str, FakeProcess]]:
    """A run of the fake cluster with every task up, and what it publishes."""
    launcher, recorder = FakeLauncher(), Recorder()
    supervisor = Supervisor(make_config(tmp_path), runs_root=tmp_path / "runs", launcher=launcher,
                            clock=FakeClock())
    supervisor.subscribe(recorder)
    await supervisor.start()
    return supervisor, recorder, await start_all(launcher, ["ps0", "worker0", "worker1"])


async def test_a_burst_of_steps_makes_one_snapshot_now_and_one_with_the_last_step_soon(
        tmp_path: Path) -> None:
    supervisor, recorder, processes = await _running(tmp_path)
    for step in range(1, 51):
        processes["worker0" if step % 2 else "worker1"].step(step, target=1000)
    await recorder.wait_for(lambda e: isinstance(e, TrainerEvent) and isinstance(e.event, protocol.Step)
                            and e.event.global_step == 50)
    # The first step is told at once; the other 49 wait for the throttle, then one snapshot
    # tells them all (a snapshot per step listed every worker 50 times).
    last = await recorder.wait_for(lambda e: isinstance(e, ProgressUpdate) and e.progress.global_step == 50)
    updates = recorder.of(ProgressUpdate)
    assert updates[0].progress.global_step == 1 and updates[-1] is last
    assert len(updates) <= 3, [u.progress.global_step for u in updates]
    assert {w.task for w in last.progress.workers} == {"worker0", "worker1"}
    await finish_cleanly(processes)
    await supervisor.wait()
    # The final steps' snapshot precedes the run's end, whatever the throttle was waiting for.
    end = next(i for i, e in enumerate(recorder.events) if isinstance(e, RunFinished))
    before = [e for e in recorder.events[:end] if isinstance(e, ProgressUpdate)]
    assert before[-1].progress.global_step == 100
    assert not [e for e in recorder.events[end:] if isinstance(e, ProgressUpdate)]


async def test_a_worker_that_exits_while_a_snapshot_waits_is_shown_at_its_last_step_first(
        tmp_path: Path) -> None:
    supervisor, recorder, processes = await _running(tmp_path)
    processes["worker0"].step(1, target=1000)
    await recorder.wait_for(lambda e: isinstance(e, ProgressUpdate) and e.progress.global_step == 1)
    processes["worker1"].step(7, target=1000)  # waits for the throttle...
    processes["worker1"].exit(1)  # ...and its worker leaves before that
    await recorder.state("worker1", TaskState.FAILED)
    shown = [{w.task: w.global_step for w in u.progress.workers} for u in recorder.of(ProgressUpdate)]
    assert {"worker0": 1, "worker1": 7} in shown, shown
    await supervisor.stop_all()
