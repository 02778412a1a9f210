"""Ending a user's program that hangs after its work is done: once the target step is
reached, a worker (typically a sync chief, tensorflow#13779) whose global step no longer
moves is ended within :data:`~tui.program.ending.HANG_AFTER` seconds of its last step, and
counted as succeeded; a notice and its reason in the summary say so."""

from __future__ import annotations

from collections.abc import Awaitable

from tui.clock import Wake, first_completed
from tui.events import Level, TaskState
from tui.supervision.records import RunRecord, Verdict
from tui.supervision.stopping import stop_one


async def end_hung_workers(run: RunRecord) -> None:
    """Watch the run's :class:`~tui.program.ending.HangWatch` until the run finishes."""
    while True:
        wait = run.hangs.next_check(run.clock.monotonic())
        run.hang_check.clear()
        wakes: dict[Wake, Awaitable[object]] = {Wake.DONE: run.hang_check.wait()}
        if wait is not None:
            wakes[Wake.TIMEOUT] = run.clock.sleep(wait)
        await first_completed(wakes)
        for name in run.hangs.hung(run.clock.monotonic()):
            task = run.task(name)
            run.hangs.exited(name)
            if not task.state.is_active or run.stop_requested:
                continue
            reason = (f"ended by the controller: no progress for {run.hangs.after:g} s after the "
                      f"target step {run.hangs.target} was reached (counted as succeeded)")
            run.notify(Level.WARNING, reason, task.name)
            task.judge(Verdict(TaskState.SUCCEEDED, reason))
            run.spawn(stop_one(run, task, reason))
