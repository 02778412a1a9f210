"""Ending a user's program that hangs after its work is done: once the target step is
reached, a worker (typically a sync chief, tensorflow#13779) whose global step no longer
moves is ended :data:`~tui.program.end_rules.HANG_AFTER` seconds after its last step and counted
as succeeded; a notice and its reason in the summary say so. A worker whose processes used
the CPU over the last :data:`~tui.program.end_rules.CPU_SAMPLE` of those seconds (a final save,
an export, an evaluation: :mod:`tui.core.supervisor.busy`) is left to finish, and said so once.

A worker that had stopped stepping well before the target was reached (:meth:`HangWatch.stale
<tui.program.end_rules.HangWatch.stale>`) was hung, not done: it is never counted as succeeded.
It is killed as a stalled task, and the restart policy judges its exit (restarted, it finds the
target reached and exits 0 by itself; without a restart left it stays failed)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable

from tui.core.clock import Wake, first_completed
from tui.core.events import Level
from tui.core.supervisor.busy import BUSY_CORES, cores_used
from tui.core.supervisor.pause_watch import forgive_pause
from tui.core.supervisor.records import RunRecord, Verdict
from tui.core.supervisor.stall import kill_for
from tui.core.supervisor.stopping import stop_one
from tui.core.task_state import TaskState
from tui.program.end_rules import CPU_SAMPLE, HANG_AFTER


async def end_hung_workers(run: RunRecord) -> None:
    """Watch the run's :class:`~tui.program.end_rules.HangWatch` until the run finishes."""
    while True:
        wait = run.hangs.next_check(run.clock.monotonic())
        run.hang_check.clear()
        wakes: dict[Wake, Awaitable[object]] = {Wake.DONE: run.hang_check.wait()}
        if wait is not None:
            wakes[Wake.TIMEOUT] = run.clock.sleep(wait)
        await first_completed(wakes)
        forgive_pause(run)  # a suspended controller's pause is not its workers' silence
        candidates = run.hangs.hung(run.clock.monotonic())
        await asyncio.gather(*(_judge(run, name) for name in candidates))


async def _judge(run: RunRecord, name: str) -> None:
    """``name`` has been quiet past the target: sample its CPU over the rest of
    :data:`HANG_AFTER`, then end it if it is idle and still quiet."""
    task = run.task(name)
    if not task.state.is_active or run.stop_requested:
        run.hangs.exited(name)
        return
    cores = await cores_used(run.launcher, task.plan.host, task.pid, run.clock.sleep, CPU_SAMPLE)
    if name not in run.hangs.hung(run.clock.monotonic() - CPU_SAMPLE):
        return  # it moved or exited while its CPU was sampled
    if cores is not None and cores >= BUSY_CORES and task.state.is_active:
        task.last_activity = run.clock.monotonic()  # so the stall watchdog leaves it be too
        if run.hangs.working(name, run.clock.monotonic()):
            run.notify(Level.INFO, f"{run.hangs.why}; still working "
                                   f"({cores:.1f} cores): left to finish", task.name)
        return
    if run.hangs.stale(name) and task.state.is_active and not run.stop_requested:
        _restart_stale(run, name)  # idle, and since before the target: hung, not done
        return
    run.hangs.exited(name)
    if not task.state.is_active or run.stop_requested:
        return
    idle = "" if cores is None else f", {cores:.2f} cores used"
    reason = (f"ended by the controller: no progress for {HANG_AFTER:g} s after "
              f"{run.hangs.why}{idle} (counted as succeeded)")
    run.notify(Level.WARNING, reason, task.name)
    task.ended_after_target = True
    task.judge(Verdict(TaskState.SUCCEEDED, reason))
    run.spawn(stop_one(run, task, reason))


def _restart_stale(run: RunRecord, name: str) -> None:
    """End a worker that was hung before the target was reached, as the stall watchdog ends
    one: its SIGKILL exit is judged by the restart policy, never counted as succeeded."""
    task = run.task(name)
    quiet = run.hangs.quiet_for(name, run.clock.monotonic())
    run.hangs.exited(name)
    text = f"stalled: no progress for {quiet:.0f} s, since before {run.hangs.why}"
    run.notify(Level.WARNING, f"{text}: not counted as succeeded; killed for the restart policy "
                              "to judge", task.name)
    kill_for(run, task, text)
