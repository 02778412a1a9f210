"""The staged start: every ps, then the chief, then the other workers; each stage starts
once every task of the previous one reported ready. The tasks of a stage are launched
together (every host's at once), not one after another: on a hundred hosts a launch each
of a second or so would add minutes.

With ``hold`` every task is launched at once with the trainer's ``--hold``: it imports
TensorFlow, builds its graph, reports ``loaded`` and waits; its stage's turn sends it ``go``
on stdin, and only then does it start its server. Start order, same; start time, shorter.

A task not ready by the deadline whose processes are still using the CPU (importing, building
its graph on a machine short of CPU) is given the time again, up to :data:`EXTENSIONS` times,
with a notice; one that sits idle fails the start as before.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from tui.config.cluster import Job
from tui.core.clock import Wake, first_completed
from tui.core.events import Level
from tui.core.supervisor.busy import cores_used
from tui.core.supervisor.process import launch
from tui.core.supervisor.records import RunRecord, TaskRecord, Verdict
from tui.core.supervisor.stopping import release_port, stop_one
from tui.core.task_state import TaskState
from tui.launch.base import CommandRunner
from tui.plan.tasks import GO_LINE

#: How many more times a stage's ready time is given to a late task still working. On a 2-core
#: machine at a load average of 30-100 (a lab of 64 hosts, the suite beside other work) a task's
#: TensorFlow import alone took over the 120 s, and 88 workers that would have come up failed
#: the start; a task that hangs still fails, after its sample shows it idle.
EXTENSIONS = 3
#: Seconds over which a late task's CPU is sampled.
LOADING_SAMPLE = 3.0
#: Cores a late task must use to count as still working: a share of a starved machine (2 cores
#: among 60 busy processes is 0.03 each), well above a process blocked on a socket or a lock.
LOADING_CORES = 0.01


async def start_in_order(run: RunRecord) -> str | None:
    """Start stage after stage; return why the start failed, or None (also when a stop was
    requested meanwhile). Once every task is up, a notice says how long it took."""
    began = run.clock.monotonic()
    stages = run.stages()
    if run.holds:
        # Launch every task now so their TensorFlow imports overlap; each waits for
        # `go` before starting its server, so the servers still start in order.
        failure = await _launch_together(run, [task for stage in stages for task in stage])
        if failure or run.stop_requested:
            return failure
    for stage in stages:
        if not run.holds:
            for task in stage:
                release_port(task)
            failure = await _launch_together(run, stage)
            if failure or run.stop_requested:
                return failure
        failure = await bring_up(run, stage)
        if failure or run.stop_requested:
            return failure
    run.notify(Level.INFO, f"all {len(run.tasks)} tasks up in {run.clock.monotonic() - began:.1f} s")
    return None


async def _launch_together(run: RunRecord, tasks: list[TaskRecord]) -> str | None:
    """Launch ``tasks`` at once; why the first of them (in the stage's order) could not
    start, or None. Nothing is launched once a stop was requested."""
    if run.stop_requested:
        return None
    failures = await asyncio.gather(*(launch(run, task) for task in tasks))
    return next((failure for failure in failures if failure), None)


async def bring_up(run: RunRecord, stage: list[TaskRecord]) -> str | None:
    """Wait until every launched task of ``stage`` is ready (with ``--hold``: wait for
    `loaded`, then send `go`); return why not, or None. One deadline for both waits."""
    deadline = run.clock.monotonic() + run.options.ready_timeout
    if run.holds:
        failure = await _await_stage(run, stage, lambda t: t.loaded, deadline)
        if failure or run.stop_requested:
            return failure
        for task in stage:
            await _go(run, task)
    return await _await_stage(run, stage, lambda t: t.settled, deadline)


async def expect_ready(run: RunRecord, task: TaskRecord) -> None:
    """For a task started on its own (by hand or by the restart policy): bring it up, and
    stop it (as failed) if it does not get ready in time."""
    failure = await bring_up(run, [task])
    if failure and task.state.is_active:
        await stop_one(run, task, failure)


async def _await_stage(run: RunRecord, stage: list[TaskRecord],
                       milestone: Callable[[TaskRecord], asyncio.Event], deadline: float) -> str | None:
    async def all_reached() -> None:
        await asyncio.gather(*(milestone(t).wait() for t in stage))

    extensions = 0
    while True:
        remaining = max(0.0, deadline - run.clock.monotonic())
        wake = await first_completed({Wake.DONE: all_reached(),
                                      Wake.STOPPED: run.entered_ending(),
                                      Wake.TIMEOUT: run.clock.sleep(remaining)})
        if wake is not Wake.TIMEOUT or extensions >= EXTENSIONS or run.stop_requested:
            break
        late = [t for t in stage if t.state is TaskState.STARTING and not milestone(t).is_set()]
        if not late or not await _still_working(run, late):
            break
        extensions += 1
        deadline = run.clock.monotonic() + run.options.ready_timeout
    # An exit explains a stop that fail-fast requested, so look at exits first. (A task
    # whose restart is coming is in BACKOFF, not FAILED.)
    for task in stage:
        # (An evaluator's failure is its restart policy's: it never fails the start.)
        if task.state is TaskState.FAILED and task.job is not Job.EVALUATOR:
            return f"{task.name} {task.reason}"
    if wake is Wake.TIMEOUT:
        timeout = run.options.ready_timeout * (extensions + 1)  # (the times given, all told)
        late = [t for t in stage if t.state is TaskState.STARTING]
        for task in late:
            task.judge(Verdict(TaskState.FAILED, f"did not report ready within {timeout:g} s"))
        names = ", ".join(t.name for t in late)
        return f"start failed: {names} did not report ready within {timeout:g} s"
    return None


async def _still_working(run: RunRecord, late: list[TaskRecord]) -> bool:
    """Whether every one of ``late`` used the CPU over :data:`LOADING_SAMPLE` (each said so in
    a notice); False at once where the launcher cannot tell (it runs no commands)."""
    if not isinstance(run.launcher, CommandRunner):
        return False
    used = await asyncio.gather(*(cores_used(run.launcher, t.plan.host, t.pid, run.clock.sleep,
                                             LOADING_SAMPLE) for t in late))
    if any(cores is None or cores < LOADING_CORES for cores in used):
        return False
    for task, cores in zip(late, used, strict=True):
        run.notify(Level.INFO, f"not ready after {run.options.ready_timeout:g} s but still working "
                               f"({cores:.2f} cores): given {run.options.ready_timeout:g} s more", task.name)
    return True


async def _go(run: RunRecord, task: TaskRecord) -> None:
    """Let a held task start its server (its port is released first)."""
    release_port(task)
    if task.process is None or not task.state.is_active:
        return
    try:
        await task.process.send(GO_LINE)
    except OSError:
        pass  # it is exiting; its exit is recorded and judged by the stage's wait
