"""The stall watchdog: a running task that makes no progress is reported, not waited on
forever.

A task that is hung (a GPU driver hang, a swap storm, a debugger, SIGSTOP) does not exit, so
nothing else notices it: a sync run freezes, and every worker behind a hung ps waits. Every
output line of a task is a sign of life (:attr:`TaskRecord.last_activity`; a worker prints a
step event every ``log_every`` steps), and so is a worker's CPU use past the target step
(:mod:`tui.core.supervisor.after_target`: an export after training that prints nothing). The
watchdog looks once a tick at the running tasks of a run that is up:

- a worker is stalled when it has said nothing for ``stall_timeout`` seconds, or for a
  quarter of that while another worker is progressing (it is not the cluster that waits);
- a ps says nothing while it serves, so it is stalled when no worker has progressed for
  ``stall_timeout`` seconds (every worker is stalled behind it);
- a task whose process is stopped (state T: SIGSTOP, a debugger) is named as such, judged
  after a quarter of the time, and it alone is reported: the others wait behind it. A remote
  task's state is read from ``/proc`` on its host (over its SSH connection) once it has been
  quiet for that quarter: in sync mode every worker waits behind a stopped one, so no peer
  progresses and only its state tells it from the others (it went unnoticed for the full
  timeout on the lab).

A stall is reported once per launch (again only after it was taken back): a
:class:`~tui.core.events.TaskStalled` event, a hint naming the task and its last line, and a
warning. ``on_stall`` then decides: ``warn`` (only that), ``restart`` (kill it: the restart
policy treats it like any failure) or ``fail`` (the controller declares it failed, which
ends the run). A worker still silent after the full ``stall_timeout`` while its peers
progress (or reached the target) no longer trains: under ``restart: on-failure`` it is killed
and restarted whatever ``on_stall`` says, and its exit's reason says why. A reported task that
shows life again (SIGCONT, progress) gets a :class:`~tui.core.events.TaskHintCleared`. While a
task the workers wait for (:func:`waited_for`) is being started, stopped, restarted or is out
of reach, idle time counts from its return.
"""

from __future__ import annotations

import asyncio
import contextlib

import psutil

from trainer.settings import Mode
from tui.config.cluster import Job
from tui.config.restart_policy import StallPolicy, may_restart
from tui.core.events import Level, TaskHint, TaskHintCleared, TaskStalled
from tui.core.supervisor.busy import group_stopped, stat_argv
from tui.core.supervisor.pause_watch import forgive_pause
from tui.core.supervisor.records import RunRecord, TaskRecord, Verdict
from tui.core.task_state import RunPhase, TaskState
from tui.launch.base import CommandRunner, LaunchError

#: The longest line of a task quoted in a stall's hint.
LAST_LINE_CHARS = 200


#: How long the read of a remote host's ``/proc`` may take within a tick (a host cut off
#: answers nothing; its tasks are then unreachable, judged elsewhere).
REMOTE_LOOK_SECS = 2.0


def process_stopped(task: TaskRecord) -> bool:
    """Whether the task's process is stopped (state T): read now for a local one; a remote
    one's as :func:`look_remote` last found it."""
    if task.pid is None:
        return False
    if not task.plan.host.is_local:
        return task.remote_stopped
    try:
        return psutil.Process(task.pid).status() in (psutil.STATUS_STOPPED, psutil.STATUS_TRACING_STOP)
    except psutil.Error:
        return False


async def watch_stalls(run: RunRecord) -> None:
    """Check the run's tasks every tick until the run ends (a background task of the run)."""
    timeout = run.options.stall_timeout
    if timeout <= 0:
        return
    tick = min(1.0, timeout / 8)
    while not run.stop_requested:
        await run.clock.sleep(tick)
        forgive_pause(run)  # first: a suspended controller must not blame its tasks
        if run.phase is RunPhase.UP:
            await look_remote(run, _idles(run, run.clock.monotonic()))
        else:
            # Not up (still starting, recovering): nobody is judged, and nobody's quiet time
            # counts from before the run is up. (A TF2 coordinator running for 80 s while its
            # workers still imported TensorFlow on a loaded machine was reported, with every
            # worker, as quiet for 82 s the moment the last worker came up.)
            run.settled_at = run.clock.monotonic()
        check_stalls(run)


async def look_remote(run: RunRecord, idles: dict[str, float]) -> None:
    """Read whether each remote running task quiet for a quarter of the stall timeout (or
    reported) is stopped: one read of ``/proc`` per host, only while one of its tasks is that
    quiet. Nothing is learnt from a host that does not answer in time."""
    quick = run.options.stall_timeout / 4
    asked: dict[str, list[TaskRecord]] = {}
    for task in run.tasks.values():
        if task.plan.host.is_local:
            continue
        if task.pid is not None and task.name in idles and (task.stall_reported or idles[task.name] >= quick):
            asked.setdefault(task.plan.host.name, []).append(task)
        else:
            task.remote_stopped = False
    launcher = run.launcher
    if not asked or not isinstance(launcher, CommandRunner):
        return

    async def look(tasks: list[TaskRecord]) -> None:
        try:
            # Only these tasks' groups, filtered on the host, as the usage sampler reads them.
            groups = [task.pid for task in tasks if task.pid is not None]
            lines = await asyncio.wait_for(launcher.run_command(tasks[0].plan.host, stat_argv(groups)),
                                           REMOTE_LOOK_SECS)
        except (OSError, LaunchError, asyncio.TimeoutError):
            return
        for task in tasks:
            task.remote_stopped = task.pid is not None and group_stopped(lines, task.pid)

    await asyncio.gather(*(look(tasks) for tasks in asked.values()))


def _idles(run: RunRecord, now: float) -> dict[str, float]:
    """How long each running task has been quiet, as the stall rules count it: a worker since
    its last sign of life, a ps (it says nothing while it serves) since the last worker's;
    neither from before a task the workers wait for was last back."""
    if any(t.state in _UNSETTLED for t in waited_for(run)):
        # A task the workers wait for is being restarted (by hand or by policy) or is out of
        # reach: that wait is not a stall. Idle time counts from when it is back. (Any other
        # task's absence excuses nobody: a hung worker must not be forgiven by every blip.)
        run.settled_at = now
    running = [t for t in run.tasks.values() if t.state is TaskState.RUNNING]
    workers = [t for t in running if run.run_end.trains(t.job)]

    def active(task: TaskRecord) -> float:
        return max(task.last_activity, run.settled_at)

    last_worker = max((active(w) for w in workers), default=now)
    return {t.name: now - active(t) if run.run_end.trains(t.job) else now - last_worker for t in running}


def check_stalls(run: RunRecord) -> None:
    """Report every running task that is stalled now, and take back a report whose task
    shows life again (see the module docstring)."""
    if run.phase is not RunPhase.UP:
        return  # starting, recovering or ending: other deadlines watch those
    timeout = run.options.stall_timeout
    quick = timeout / 4
    now = run.clock.monotonic()
    idles = _idles(run, now)
    running = [t for t in run.tasks.values() if t.state is TaskState.RUNNING]
    # The tasks that train (with a chief job: the coordinator, whose workers only serve).
    workers = [t for t in running if run.run_end.trains(t.job)]
    # One pass over the workers, not one per worker: how many progressed lately.
    fresh = {w.name for w in workers if idles[w.name] < quick}
    # Whether a process is stopped (a read of /proc per task) matters only to a task quiet
    # for a quarter of the timeout or already reported: not asked every tick of a busy run.
    stopped = ({t.name for t in running if process_stopped(t)}
               if any(t.stall_reported or idles[t.name] >= quick for t in running) else set())

    for task in running:
        idle = idles[task.name]
        if run.run_end.trains(task.job):
            # A worker that has not stepped yet may be waiting quietly for its session (a
            # non-chief, while the chief initialises on a busy machine): the full timeout.
            others_progress = task.stepped and len(fresh) - (task.name in fresh) > 0
            # Once taken back, only the full timeout: a worker that prints in bursts must
            # not be reported and taken back again every quarter of it.
            limit = quick if task.name in stopped or (others_progress and not task.stall_taken_back) \
                else timeout
        else:
            limit = quick if task.name in stopped else timeout
        # A training task the others leave behind (they progress, or reached the target)
        # for the full timeout no longer trains: under ``on-failure`` it is restarted even
        # when ``on_stall`` only warns (seen: a worker hung for good after its host's cut).
        behind = (run.run_end.trains(task.job) and idle >= timeout and task.stepped
                  and (others_progress or run.hangs.reached) and not task.stall_escalated)
        if task.stall_reported:
            if idle < quick and task.name not in stopped:
                _clear(run, task, "progressing again" if run.settled_at < now - idle
                       else "a task it waits for was restarting or out of reach")
            elif behind:
                _escalate(run, task, idle)
            continue
        if stopped and task.name not in stopped:
            continue
        if idle >= limit:
            _report(run, task, idle, task.name in stopped)
            if behind:
                _escalate(run, task, idle)


#: States of a task being (re)started or stopped, or out of reach (the others may wait for it).
_UNSETTLED = frozenset({TaskState.STARTING, TaskState.STOPPING, TaskState.BACKOFF, TaskState.UNREACHABLE})


def waited_for(run: RunRecord) -> list[TaskRecord]:
    """The tasks whose absence holds the training workers up: every ps (each holds variables
    of every step), the chief (the others' sessions need it), and in sync mode every worker
    (each round needs a gradient from each)."""
    sync = run.settings.mode is Mode.SYNC
    chief = run.chief  # (once: finding it goes through every task, which made a look quadratic)
    return [t for t in run.tasks.values()
            if t.job is Job.PS or t is chief or (sync and run.run_end.trains(t.job))]


def _escalate(run: RunRecord, task: TaskRecord, idle: float) -> None:
    """Restart a training task its peers left behind, when its restart policy allows one
    (``on_stall: warn`` only said so; the other policies already acted)."""
    if run.options.on_stall is not StallPolicy.WARN or task.declared_failed:
        return
    if not may_restart(run.config, task.job, task.recent_restarts(run), declared_by_controller=False):
        return
    task.stall_escalated = True
    peers = "the target was reached" if run.hangs.reached else "its peers progress"
    text = f"stalled: no progress for {idle:.0f} s while {peers}"
    run.publish(TaskHint(task=task.name, hint=f"{text}; restarting it (restart: on-failure)",
                         t=run.clock.time()))
    run.notify(Level.WARNING, f"{text}; restarting it (restart: on-failure)", task.name)
    kill_for(run, task, text)


def _clear(run: RunRecord, task: TaskRecord, why: str) -> None:
    """A reported task shows life again: take the hint down (only a warning was given; the
    other policies already killed it), and watch it again."""
    if run.options.on_stall is not StallPolicy.WARN:
        return
    task.stall_reported = False
    task.stall_taken_back = True
    run.publish(TaskHintCleared(task=task.name, reason=why, t=run.clock.time()))
    run.notify(Level.INFO, f"no longer stalled: {why}", task.name)


def _report(run: RunRecord, task: TaskRecord, idle: float, stopped: bool) -> None:
    task.stall_reported = True
    last = task.tail[-1] if task.tail else ""
    if len(last) > LAST_LINE_CHARS:
        last = last[:LAST_LINE_CHARS] + "..."
    what = "no worker has progressed behind it" if task.job is Job.PS else "no progress"
    state = "; its process is stopped (SIGSTOP)" if stopped else ""
    said = f"; its last line: {last}" if last else "; it printed nothing"
    text = f"stalled: {what} for {idle:.0f} s{state}{said}"
    policy = run.options.on_stall
    run.publish(TaskStalled(task=task.name, seconds=round(idle, 1), stopped=stopped, last_line=last,
                            policy=policy.value, t=run.clock.time()))
    warn = ("kill -CONT it, or restart it (r)" if stopped
            else "restart it (r) if it does not recover; on_stall: restart does so by itself")
    action = {StallPolicy.WARN: warn,
              StallPolicy.RESTART: "restarting it as the restart policy says",
              StallPolicy.FAIL: "the run fails (on_stall: fail)"}[policy]
    run.publish(TaskHint(task=task.name, hint=f"{text}; {action}", t=run.clock.time()))
    run.notify(Level.WARNING, text, task.name)
    if policy is StallPolicy.FAIL:
        task.judge(Verdict(TaskState.FAILED, text))  # declared failed: the run fails
    if policy is not StallPolicy.WARN:
        kill_for(run, task, text)


def kill_for(run: RunRecord, task: TaskRecord, text: str) -> None:
    """Kill a stalled task; ``text`` names why in its exit's reason (and its hint: the
    SIGKILL must not be blamed on memory, tui.core.hints)."""
    task.hint = text
    task.killed_for = text
    run.spawn(_kill(task))


async def _kill(task: TaskRecord) -> None:
    """SIGKILL: it ends a stopped process too; its exit is then judged as usual."""
    if task.process is not None:
        with contextlib.suppress(Exception):
            await task.process.kill()
