"""The run's outlets (tui.core.supervisor.records): progress snapshots are throttled, yet
every change is told and the last one comes before the run's end."""

from __future__ import annotations

import asyncio
import io
import os
import re
import signal
import time
from pathlib import Path

import pytest

from tests.support import assert_no_trainers_left
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
from trainer.settings import Mode
from tui.app.state import Dashboard
from tui.core.events import ControllerEvent, ProgressUpdate, RunFinished, TrainerEvent
from tui.core.options import RunOptions
from tui.core.progress import RATE_STALE_MIN
from tui.core.supervisor.lifecycle import Supervisor
from tui.core.supervisor.records import SupervisorOptions
from tui.core.task_state import TaskState
from tui.headless import run_headless


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


@pytest.mark.integration
@pytest.mark.timeout(300)
@pytest.mark.parametrize(("stopped_task", "silenced", "headless"), [
    ("worker1", ("worker1",), r"ex/s \[worker0 [\d.]+, worker1 -\]"),
    # Every worker waits for the ps: no step at all to prompt a snapshot (the timer's).
    ("ps0", ("worker0", "worker1"), r"step \d+/10000000 \(\d+%\)  loss"),
])
async def test_a_sigstopped_tasks_workers_rates_go_unknown_on_both_screens_and_come_back(
        tmp_path: Path, stopped_task: str, silenced: tuple[str, ...], headless: str) -> None:
    """Real TensorFlow: a task is SIGSTOPped, and the workers it holds up report no step.
    Once their rates are no longer known a snapshot says so, with or without another
    worker's step to prompt it: no ex/s for them (headless: '-' or no rate at all; the app's
    table: '-'), none summed. Continued, they step again and their rates are back. (On the
    lab, a ps cut off left the workers' last 162 ex/s on screen 20 s into the cut.)"""
    config = make_config(tmp_path, mode=Mode.ASYNC, steps=10_000_000, log_every=20, hidden_units=16)
    runs = tmp_path / "runs"
    supervisor = Supervisor(config, runs_root=runs, options=SupervisorOptions(grace=2.0, stall_timeout=0))
    dashboard = Dashboard(config.training)
    stopped: list[float] = []
    unknown: list[ProgressUpdate] = []
    unknown_after: list[float] = []
    back: list[ProgressUpdate] = []
    stopping: list[asyncio.Future[object]] = []

    def rates(update: ProgressUpdate) -> dict[str, float | None]:
        return {w.task: w.examples_per_sec for w in update.progress.workers}

    def pid_of(name: str) -> int:
        pid = next(t.pid for t in supervisor.tasks() if t.name == name)
        assert pid is not None
        return pid

    def act(event: ControllerEvent) -> None:
        dashboard.apply(event)
        if not stopped and isinstance(event, ProgressUpdate) \
                and all(rates(event).get(name) for name in ("worker0", "worker1")):  # both stepped
            os.kill(pid_of(stopped_task), signal.SIGSTOP)
            stopped.append(time.monotonic())
        elif stopped and not unknown and isinstance(event, ProgressUpdate) \
                and all(rates(event).get(name, 0.0) is None for name in silenced):
            unknown.append(event)
            unknown_after.append(time.monotonic() - stopped[0])
            # The app's table, folded from the same events: '-' for them, and no total.
            for name in ("worker0", "worker1"):
                assert (dashboard.rows[name].examples_per_sec is None) is (name in silenced)
            # (Continued once headless's progress line has had time to say it.)
            asyncio.get_running_loop().call_later(2.0, os.kill, pid_of(stopped_task), signal.SIGCONT)
        elif unknown and not back and isinstance(event, ProgressUpdate) \
                and all(rates(event).get(name) for name in silenced):
            back.append(event)
            stopping.append(asyncio.ensure_future(supervisor.stop_all()))

    supervisor.subscribe(act)
    # (Should they never be seen, the run is stopped and the asserts say what was.)
    asyncio.get_running_loop().call_later(
        120.0, lambda: stopping.append(asyncio.ensure_future(supervisor.stop_all())))
    out, err = io.StringIO(), io.StringIO()
    await run_headless(RunOptions(config=config, runs_root=runs), supervisor=supervisor, out=out, err=err,
                       handle_signals=False, progress_interval=0.5)
    text = out.getvalue()
    assert unknown and back, text[-3000:]
    snap = unknown[0].progress
    assert snap.examples_per_sec == pytest.approx(sum(r or 0.0 for r in rates(unknown[0]).values()))
    if stopped_task == "ps0":
        assert snap.examples_per_sec == 0 and snap.steps_per_sec is None and snap.eta_seconds is None
    # Within its window after the last step (before the SIGSTOP), not 20 s on.
    assert unknown_after[0] <= RATE_STALE_MIN + 3, unknown_after
    assert re.search(headless, text), text[-3000:]
    assert_no_trainers_left(runs)
