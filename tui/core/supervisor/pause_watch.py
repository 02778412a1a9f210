"""Moving a run's quiet clocks on by the controller's own pauses (:class:`.pause.PauseGuard`
notices them): called by every watchdog before it judges, and by a ticker of its own."""

from __future__ import annotations

import asyncio

from tui.core.events import Level
from tui.core.supervisor.pause import TICK
from tui.core.supervisor.records import RunRecord


def forgive_pause(run: RunRecord) -> None:
    """If the controller was paused since the last look, move every task's quiet clock on by
    the pause and say so. Called by the ticker and by every watchdog before it judges."""
    gap = run.pause.paused()
    if not gap:
        return
    for task in run.tasks.values():
        task.last_activity += gap
    run.hangs.paused(gap)
    what = (f"short of CPU for {gap:.0f} s (the machine is busy)" if run.pause.starved
            else f"paused for {gap:.0f} s (suspended?)")
    run.notify(Level.INFO, f"the controller was {what}: its tasks' quiet time is not counted")


async def watch_pauses(run: RunRecord) -> None:
    """The guard's ticker (a background task of the run), until the run stops."""
    while not run.stop_requested:
        await asyncio.sleep(TICK)  # real time: the guard measures this process, not the run's clock
        forgive_pause(run)
