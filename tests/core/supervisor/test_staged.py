"""The staged start (tui/core/supervisor/staged.py): each stage's tasks launched together, one
slow launch holding none of the others, and a stop asked for during a launch stopping what
that launch starts."""

from __future__ import annotations

import asyncio
from pathlib import Path

from tests.core.supervisor.test_lifecycle import make
from tests.support.fakes import start_all
from tui.core.events import RunOutcome
from tui.core.task_state import TaskState as S


async def test_a_stage_is_launched_together_a_slow_launch_holding_no_other(tmp_path: Path) -> None:
    supervisor, launcher, _, recorder = make(tmp_path, num_ps=2, num_workers=4, hold=False)
    slow_ps = launcher.gates[("ps0", 1)] = asyncio.Event()
    slow_worker = launcher.gates[("worker1", 1)] = asyncio.Event()
    await supervisor.start()
    await launcher.logged(("held", "ps0"))
    ps1 = await launcher.started("ps1")  # while ps0's launch is still under way
    assert launcher.starts == ["ps1"]
    slow_ps.set()
    ps0 = await launcher.started("ps0")
    ps0.ready()
    ps1.ready()
    (await launcher.started("worker0")).ready()  # the chief, then every other worker at once
    await launcher.logged(("held", "worker1"))
    await launcher.started("worker2")
    await launcher.started("worker3")
    assert "worker1" not in launcher.starts
    slow_worker.set()
    await start_all(launcher, ["worker1", "worker2", "worker3"])
    await recorder.state("worker1", S.RUNNING)
    await supervisor.stop_all()


async def test_with_hold_every_task_is_launched_at_once(tmp_path: Path) -> None:
    supervisor, launcher, _, _ = make(tmp_path, num_ps=2, num_workers=2, hold=True)
    gate = launcher.gates[("ps0", 1)] = asyncio.Event()
    await supervisor.start()
    for name in ("ps1", "worker0", "worker1"):
        await launcher.started(name)
    assert "ps0" not in launcher.starts
    gate.set()
    await launcher.started("ps0")
    await supervisor.stop_all()


async def test_a_stop_during_its_launch_stops_the_task_it_started(tmp_path: Path) -> None:
    supervisor, launcher, _, recorder = make(tmp_path, hold=True)
    gate = launcher.gates[("worker1", 1)] = asyncio.Event()
    await supervisor.start()
    await launcher.logged(("held", "worker1"))
    stopping = asyncio.ensure_future(supervisor.stop_task("worker1"))
    gate.set()
    worker1 = await launcher.started("worker1")
    await stopping
    assert worker1.exited
    await recorder.state("worker1", S.STOPPED)
    summary = await supervisor.stop_all()
    assert summary is not None and summary.outcome is RunOutcome.STOPPED
