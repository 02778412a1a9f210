"""Stopping tasks: stdin EOF and SIGTERM to the process group, SIGKILL after the grace
period (at once when the run's ``kill_now`` is set), and a last resort when the event loop is
torn down under the run."""

from __future__ import annotations

import asyncio
import contextlib
import logging

from trainer import protocol
from tui.core.clock import Wake, first_completed
from tui.core.events import Level
from tui.core.supervisor.records import RunRecord, TaskRecord, Verdict
from tui.core.task_state import TaskState
from tui.program.base import PsEnding
from tui.program.end_rules import RunEnd

log = logging.getLogger(__name__)

#: How long to wait for a task to die after SIGKILL before reporting it as stuck.
KILL_WAIT = 5.0


def release_port(task: TaskRecord) -> None:
    """Release the port held for the task, at the last moment before it binds it.

    Residual race: between this release and the trainer's bind, another process on the
    host could take the port; the trainer then fails to bind and the start fails clearly
    (it cannot be closed without passing the socket itself)."""
    if task.reservation is not None:
        task.reservation.release()
        task.reservation = None


async def stop_tasks(run: RunRecord, tasks: list[TaskRecord], reason: str) -> None:
    await asyncio.gather(*(stop_one(run, t, reason) for t in tasks))


async def stop_one(run: RunRecord, task: TaskRecord, reason: str, *,
                   then_restart: bool = False) -> None:
    """SIGTERM (and stdin EOF), then SIGKILL after the grace period; wait for the exit.
    The exit is recorded as STOPPED with ``reason`` unless the controller already judged the
    launch failed; ``then_restart``: it goes to BACKOFF after, for a by-hand restart."""
    release_port(task)
    if not task.launched.is_set():  # its launch is in flight: stop what it starts
        await task.launched.wait()
    process, exited = task.process, task.exited
    if process is None or not task.state.is_active:
        return
    task.judge(Verdict(TaskState.STOPPED, reason, then_restart))
    if task.state is not TaskState.STOPPING:
        assert task.verdict is not None
        run.set_state(task, TaskState.STOPPING, task.verdict.reason)
    if task.tf_server:  # the trainer or the shim reads its stdin: say it is on purpose
        with contextlib.suppress(Exception):
            await process.send(protocol.STOP_LINE)
    try:
        await process.terminate()
    except Exception as exc:
        run.notify(Level.WARNING, f"could not send SIGTERM: {exc}", task.name)
    await first_completed({Wake.DONE: exited.wait(), Wake.TIMEOUT: run.clock.sleep(run.options.grace),
                           Wake.STOPPED: run.kill_now.wait()})
    if exited.is_set():
        return
    try:
        await process.kill()
    except Exception as exc:
        run.notify(Level.ERROR, f"could not send SIGKILL: {exc}", task.name)
    await first_completed({Wake.DONE: exited.wait(), Wake.TIMEOUT: run.clock.sleep(KILL_WAIT)})
    if not exited.is_set():
        run.notify(Level.ERROR, f"still running {KILL_WAIT:g} s after SIGKILL "
                   f"(pid {task.pid}); giving up on it", task.name)


async def kill_everything(run: RunRecord) -> None:
    """SIGKILL every task that may still run, without waiting (no time left for grace)."""
    for task in run.tasks.values():
        if task.process is not None and task.state.is_active:
            try:
                await task.process.kill()
            except Exception:
                log.exception("%s: SIGKILL failed", task.name)


def call_off_restarts(run: RunRecord) -> None:
    """Training is over: a serving task waiting in its restart backoff (a worker SIGKILLed
    while the chief went on to finish) is not started again. It is STOPPED, with why, and
    fails nothing: by the roles' rules the run's outcome is its training's."""
    waiting = [t for t in run.servers() if t.state is TaskState.BACKOFF]
    for task in waiting:
        task.restart_called_off = True
        reason = run.run_end.called_off_reason(run.chief.name, task.last_exit[1])
        run.set_state(task, TaskState.STOPPED, reason)
    if waiting:
        run.notify(Level.INFO, f"training is over: {', '.join(t.name for t in waiting)} not restarted")


async def let_ps_exit(run: RunRecord) -> None:
    """Training is over (every task that trains exited, :attr:`RunRecord.run_end`): end each
    serving task as the rule says (:meth:`~tui.program.end_rules.RunEnd.ending_of`). The
    trainer's ps exit by themselves after the workers' shutdown handshake: one still running
    after ``ps_exit_timeout`` is judged failed ("did not exit"). A ps under the shim is sent
    ``end`` and has as long to exit; any other program's ps, every evaluator, and (with a
    chief job) every worker are simply ended at once. Ended ones count as succeeded; the
    lifecycle stops whatever is still running."""
    workers_ok = all(t.state is TaskState.SUCCEEDED for t in run.workers())
    if not workers_ok:
        return  # a ps exits by itself only after every worker's clean shutdown
    call_off_restarts(run)
    waiting = [t for t in run.servers() if t.state.is_active]
    if not waiting:
        return
    rule, ending = run.run_end, run.program.ps_ending
    ended_reason = rule.ended_reason(run.chief.name)
    # Serving a chief, only a task whose TensorFlow server the shim saw start is in a join()
    # that `end` makes return; any other is ended at once rather than after a wait.
    ended = [t for t in waiting if rule.ending_of(t.job, ending) is PsEnding.STOP
             or (rule is RunEnd.CHIEF and not t.tf_server)]
    for task in ended:
        task.judge(Verdict(TaskState.SUCCEEDED, ended_reason))  # the lifecycle stops it
    if notice := rule.ended_notice(run.chief.name, [(t.name, t.job) for t in ended]):
        run.notify(Level.INFO, notice)
    waiting = [t for t in waiting if t.verdict is None]
    if not waiting:
        return
    if ending is PsEnding.END_LINE:
        for task in waiting:
            if task.process is not None:
                try:
                    await task.process.send(protocol.END_LINE)
                except OSError:
                    pass  # it is exiting already

    async def all_exited() -> None:
        await asyncio.gather(*(t.exited.wait() for t in waiting))

    timeout = run.options.ps_exit_timeout
    await first_completed({Wake.DONE: all_exited(), Wake.STOPPED: run.entered_ending(),
                           Wake.TIMEOUT: run.clock.sleep(timeout)})
    for task in waiting:
        if task.state.is_active and not run.stop_requested:
            if ending is PsEnding.END_LINE:  # told, but the program's join() did not return
                task.judge(Verdict(TaskState.SUCCEEDED, ended_reason))
            elif cut_short := [t.name for t in run.workers() if t.ended_after_target]:
                # It waits for a "done" that worker never sent (seen on the lab: a chief hung
                # after a ps host's cut, ended past the target): no failure of its own.
                task.judge(Verdict(TaskState.SUCCEEDED,
                                   f"ended by the controller: {', '.join(cut_short)}, ended past the "
                                   "target, never said it was done (counted as succeeded)"))
            else:
                task.judge(Verdict(TaskState.FAILED,
                                   f"did not exit within {timeout:g} s after the last worker finished"))
