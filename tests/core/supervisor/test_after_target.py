"""A worker the controller ends past the target (tui.core.supervisor.after_target) never tells
the ps it is done: the built-in trainer's ps, which exits only once every worker has, is then
no failure of its own (seen on the lab: a chief hung after a ps host's cut, the run failed on
"ps0 did not exit within 5 s after the last worker finished"). The real hang rule, on real
processes, is tests/program/test_after_the_target.py's."""

from __future__ import annotations

import asyncio
from pathlib import Path

from tests.support.fakes import FakeClock, FakeLauncher, FakeProcess, Recorder, make_config, running
from tui.core.events import Notice, RunOutcome
from tui.core.supervisor.lifecycle import Supervisor
from tui.core.task_state import TaskState

NAMES = ["ps0", "worker0", "worker1"]


async def up(tmp_path: Path) -> tuple[Supervisor, FakeClock, Recorder, dict[str, FakeProcess]]:
    """A run of 100 steps on a fake clock, every task running."""
    launcher, clock, recorder = FakeLauncher(), FakeClock(), Recorder()
    supervisor = Supervisor(make_config(tmp_path, steps=100), runs_root=tmp_path / "runs",
                            launcher=launcher, clock=clock)
    supervisor.subscribe(recorder)
    await supervisor.start()
    return supervisor, clock, recorder, await running(launcher, recorder, NAMES)


async def test_a_ps_left_waiting_for_a_worker_ended_past_the_target_counts_as_succeeded(
        tmp_path: Path) -> None:
    supervisor, clock, _, processes = await up(tmp_path)
    processes["worker1"].step(100, target=100)
    processes["worker1"].done(global_step=100)
    processes["worker1"].exit(0)
    processes["worker0"].step(100, target=100)  # the chief reached the target, then hangs
    for _ in range(60):  # the hang rule's quiet time and CPU sample, then the ps's wait
        clock.advance(1.0)
        for _ in range(5):
            await asyncio.sleep(0)
        if not supervisor.is_running:
            break
    summary = await asyncio.wait_for(supervisor.wait(), 10)
    tasks = {t.name: t for t in summary.tasks}
    assert tasks["worker0"].reason.startswith("ended by the controller: no progress for"), tasks["worker0"]
    assert tasks["ps0"].state is TaskState.SUCCEEDED, tasks["ps0"]
    assert tasks["ps0"].reason == ("ended by the controller: worker0, ended past the target, never said "
                                   "it was done (counted as succeeded)")
    assert summary.outcome is RunOutcome.SUCCEEDED, summary.reason


async def test_a_worker_hung_before_the_target_is_never_counted_as_succeeded(tmp_path: Path) -> None:
    # Seen on the lab: a worker hung for 5 minutes was ended "no progress for 5 s after the
    # target step was reached (counted as succeeded)". Its own last step says otherwise.
    supervisor, clock, recorder, processes = await up(tmp_path)
    processes["worker1"].step(10, target=100)  # then nothing: hung
    for second in range(1, 31):  # worker0 trains on alone for 30 s, to the target
        processes["worker0"].step(10 + 3 * second, target=100)
        clock.advance(1.0)
        for _ in range(5):
            await asyncio.sleep(0)
    processes["worker0"].done(global_step=100)
    processes["worker0"].exit(0)
    for _ in range(30):
        clock.advance(1.0)
        for _ in range(5):
            await asyncio.sleep(0)
        if processes["worker1"].killed:
            break
    assert processes["worker1"].killed == 1
    notices = [n.text for n in recorder.of(Notice) if n.task == "worker1"]
    assert any(n.startswith("stalled: no progress for") and "since before the target step 100 was reached: "
               "not counted as succeeded" in n for n in notices), notices
    summary = await asyncio.wait_for(supervisor.wait(), 10)
    tasks = {t.name: t for t in summary.tasks}
    assert tasks["worker1"].state is TaskState.FAILED, tasks["worker1"]  # restart: never (the default)
    assert "stalled: no progress for" in tasks["worker1"].reason
    assert summary.outcome is RunOutcome.FAILED
