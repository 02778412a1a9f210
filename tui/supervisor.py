"""The supervisor: starts a cluster's tasks in order, watches them, stops them, records
everything, and tells its subscribers what happens through :mod:`tui.events`.

One run at a time. A run:

1. *Preflight* (:meth:`Supervisor.start`, :mod:`tui.preflight`): every fixed port is
   checked on its host and ``auto`` ports are reserved. A problem raises
   :class:`PreflightError` before anything starts and before a run directory exists.
2. *Staged start*: every ps, then the chief (worker 0), then the other workers; each stage
   starts once every task of the previous stage reported ``ready``. A task that exits or
   stays silent for ``ready_timeout`` seconds fails the start. With ``hold`` (the default)
   every task is launched at once with the trainer's ``--hold``: it imports TensorFlow and
   builds its graph, reports ``loaded`` and waits; its stage's turn sends it ``go`` on
   stdin, and only then does it start its server. Start order, same; start time, shorter.
3. *Running* until every worker has exited. If all workers succeeded, each ps has
   ``ps_exit_timeout`` seconds to exit by itself (the trainer's ps exit after the workers'
   shutdown handshake); a ps still running then failed ("did not exit") and is stopped.
   With ``fail_fast`` (the default) the first task that fails stops the rest, unless the
   restart policy (hosts.yaml ``restart:``) restarts it: a failed worker is restarted on
   its own and rejoins; a failed ps takes the model's variables with it, so the whole
   cluster is restarted in order and the chief resumes from the latest checkpoint (every
   run checkpoints into its run directory unless ``checkpoint_dir`` says otherwise). Each
   restart is an :class:`~tui.events.Incident` of the summary.
4. *Stopping* (end of run, :meth:`Supervisor.stop_all`, a failure): stdin closed and
   SIGTERM to each task's process group, SIGKILL after ``grace`` seconds.
5. *Finished*: a :class:`RunSummary` goes to subscribers (``RunFinished``), to
   ``summary.json``, and to whoever awaits :meth:`Supervisor.wait`.

All of this happens in one lifecycle task per run, so only one place decides when the run
ends. The supervisor knows nothing about terminals or Textual; time and processes come from
the injected :class:`~tui.clock.Clock` and :class:`~tui.launch.base.Launcher`.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import sys
from collections import deque
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trainer import protocol
from trainer.settings import Mode, TrainingSettings
from tui.clock import Clock, SystemClock, first_completed
from tui.config import ClusterConfig, Job, RestartMode
from tui.describe import describe_event, describe_exit
from tui.events import (
    ControllerEvent,
    Incident,
    IncidentKind,
    Level,
    Notice,
    RunFinished,
    RunOutcome,
    RunStarted,
    RunSummary,
    Stream,
    TaskHint,
    TaskOutput,
    TaskResult,
    TaskState,
    TaskStateChanged,
    TrainerEvent,
)
from tui.hints import UNAVAILABLE, hint_for, hint_for_exit
from tui.launch.base import Launcher, LaunchError, PortReservation, RunningTask
from tui.launch.lines import OutputLine
from tui.launch.local import LocalLauncher
from tui.plan import GO_LINE, TRAINER_ARGV, TaskPlan, plan_run
from tui.preflight import PreflightError, resolve_ports
from tui.progress import ProgressSnapshot, ProgressTracker
from tui.resources import ResourceError, allocate_for
from tui.rundir import RunDirectory, new_run_id

log = logging.getLogger(__name__)

DEFAULT_READY_TIMEOUT = 120.0
DEFAULT_GRACE = 3.0
DEFAULT_PS_EXIT_TIMEOUT = 5.0
#: After a process exits, how long its remaining output may take to arrive. A grandchild
#: that inherited the pipe could hold it open forever; we stop reading then.
DRAIN_TIMEOUT = 2.0
#: How long to wait for a task to die after SIGKILL before reporting it as stuck.
KILL_WAIT = 5.0
TAIL_LINES = 10
#: A worker that fails because a ps is unreachable is usually a casualty of that ps's
#: failure, whose exit the controller may learn of a moment later: when a cluster restart
#: could follow, wait this long for it before judging the worker on its own.
PEER_LOSS_SETTLE = 2.0
TAIL_LINE_CHARS = 2000

Sink = Callable[[ControllerEvent], None]


@dataclass(frozen=True)
class TaskView:
    """A snapshot of one task for front ends."""

    name: str
    job: Job
    index: int
    host: str
    port: int
    state: TaskState
    pid: int | None
    exit_code: int | None
    reason: str
    launches: int
    restarts: int


class _Task:
    """Mutable bookkeeping of one task within a run (the supervisor's private state)."""

    def __init__(self, plan: TaskPlan, reservation: PortReservation | None) -> None:
        self.plan = plan
        self.reservation = reservation
        self.state = TaskState.PENDING
        self.pid: int | None = None
        self.reason = ""
        self.process: RunningTask | None = None
        self.launches = 0
        self.restarts = 0  # automatic restarts by the restart policy
        self.restarting = False
        self.tail: deque[str] = deque(maxlen=TAIL_LINES)
        self.continuing: set[Stream] = set()  # streams in the middle of an over-long line
        self.new_launch()

    @property
    def name(self) -> str:
        return self.plan.name

    @property
    def job(self) -> Job:
        return self.plan.spec.job

    def new_launch(self) -> None:
        """Reset what belongs to one launch of the task."""
        # Set when `loaded` (with --hold) / `ready` arrived or the process exited / when it
        # exited.
        self.loaded = asyncio.Event()
        self.settled = asyncio.Event()
        self.exited = asyncio.Event()
        self.stop_requested = False
        self.stop_reason = ""
        # Set when the controller judged the task failed (not ready in time, did not exit):
        # its exit after our stop then counts as a failure, not a stop.
        self.failure = ""
        self.exit_code: int | None = None
        self.hint = ""  # the first known-failure hint of this launch (tui.hints)
        self.continuing.clear()

    def view(self) -> TaskView:
        spec = self.plan.spec
        return TaskView(self.name, spec.job, spec.index, spec.host, self.plan.port, self.state,
                        self.pid, self.exit_code, self.reason, self.launches, self.restarts)


class _Run:
    """One run's state, owned by its lifecycle task."""

    def __init__(self, run_id: str, directory: RunDirectory, settings: TrainingSettings,
                 tasks: dict[str, _Task], started_mono: float, started_wall: float) -> None:
        self.run_id = run_id
        self.directory = directory
        self.settings = settings
        self.tasks = tasks
        self.progress = ProgressTracker(settings.steps)
        self.started_mono = started_mono
        self.started_wall = started_wall
        self.stop_requested = asyncio.Event()
        self.stop_outcome: RunOutcome | None = None
        self.stop_reason = ""
        self.kill_now = asyncio.Event()
        self.workers_done = asyncio.Event()
        self.finished: asyncio.Future[RunSummary] = asyncio.get_running_loop().create_future()
        self.background: set[asyncio.Task[None]] = set()
        self.write_failed = False
        self.up = False  # the staged start finished: from now on a ps failure is recoverable
        self.recovery = asyncio.Event()  # set while a cluster restart is in progress
        self.incidents: list[Incident] = []
        # task name -> index in `incidents` of the incident that task's `initialized` closes
        self.awaiting_resume: dict[str, int] = {}

    def stages(self) -> list[list[_Task]]:
        ps = [t for t in self.tasks.values() if t.job is Job.PS]
        workers = [t for t in self.tasks.values() if t.job is Job.WORKER]
        chief = [t for t in workers if t.plan.spec.is_chief]
        others = [t for t in workers if not t.plan.spec.is_chief]
        return [stage for stage in (ps, chief, others) if stage]

    def of_job(self, job: Job) -> list[_Task]:
        return [t for t in self.tasks.values() if t.job is job]

    @property
    def recovering(self) -> bool:
        """A cluster restart is in progress."""
        return self.recovery.is_set()

    @property
    def chief(self) -> _Task:
        return next(t for t in self.tasks.values() if t.plan.spec.is_chief)


class Supervisor:
    """Runs one cluster config: see the module docstring for the life of a run.

    Subscribers (:meth:`subscribe`) are called synchronously on the event loop with every
    :data:`~tui.events.ControllerEvent`; pass ``queue.put_nowait`` to get them on an
    asyncio queue, or a function that posts them to a UI thread."""

    def __init__(self, config: ClusterConfig, *, runs_root: Path = Path("runs"),
                 launcher: Launcher | None = None, clock: Clock | None = None,
                 settings: TrainingSettings | None = None,
                 ready_timeout: float = DEFAULT_READY_TIMEOUT, grace: float = DEFAULT_GRACE,
                 ps_exit_timeout: float = DEFAULT_PS_EXIT_TIMEOUT, fail_fast: bool = True,
                 trainer_argv: Sequence[str] = TRAINER_ARGV,
                 local_python: str = sys.executable, hold: bool = True) -> None:
        self._config = config
        self._settings = settings or config.training
        self._runs_root = runs_root
        self._launcher: Launcher = launcher or LocalLauncher()
        self._clock: Clock = clock or SystemClock()
        self._ready_timeout = ready_timeout
        self._grace = grace
        self._ps_exit_timeout = ps_exit_timeout
        self._fail_fast = fail_fast
        self._trainer_argv = tuple(trainer_argv)
        self._local_python = local_python
        self._hold = hold
        self._sinks: list[Sink] = []
        self._run: _Run | None = None

    # -- observing ----------------------------------------------------------------------

    def subscribe(self, sink: Sink | asyncio.Queue[ControllerEvent]) -> Callable[[], None]:
        """Deliver every event from now on to ``sink`` (a callable, or an asyncio queue that
        gets them with ``put_nowait``). Returns a function that unsubscribes."""
        call: Sink = sink.put_nowait if isinstance(sink, asyncio.Queue) else sink
        self._sinks.append(call)

        def unsubscribe() -> None:
            if call in self._sinks:
                self._sinks.remove(call)

        return unsubscribe

    @property
    def config(self) -> ClusterConfig:
        return self._config

    @property
    def settings(self) -> TrainingSettings:
        """The training settings of the current (or next) run."""
        return self._settings

    @property
    def run_id(self) -> str | None:
        return self._run.run_id if self._run else None

    @property
    def run_dir(self) -> Path | None:
        return self._run.directory.path if self._run else None

    @property
    def is_running(self) -> bool:
        """A run was started and has not finished."""
        return self._run is not None and not self._run.finished.done()

    def tasks(self) -> tuple[TaskView, ...]:
        """The current (or last) run's tasks, in config order."""
        return tuple(t.view() for t in self._run.tasks.values()) if self._run else ()

    def progress(self) -> ProgressSnapshot | None:
        return self._run.progress.snapshot() if self._run else None

    # -- whole runs ---------------------------------------------------------------------

    async def start(self) -> None:
        """Preflight, create the run directory, and begin the staged start in the
        background. Returns once the run has begun; :meth:`wait` for its end.
        Raises :class:`PreflightError` (nothing started) or RuntimeError (a run is active)."""
        if self.is_running:
            raise RuntimeError("a run is already in progress")
        # Every host at once: preparing a remote host imports TensorFlow there (seconds).
        report = await self._launcher.connect_all(self._config.host_of(t) for t in self._config.tasks)
        if report.failures:
            raise PreflightError([str(f) for f in report.failures])
        try:
            allocation = await allocate_for(self._config, {h.name: h.resources for h in report.hosts})
        except ResourceError as exc:
            raise PreflightError([str(exc)]) from None
        ports, reservations = await resolve_ports(self._config, self._launcher)
        started_wall = self._clock.time()
        run_id = new_run_id(started_wall)
        plans = plan_run(self._config, self._settings, ports, run_id,
                         trainer_argv=self._trainer_argv, local_python=self._local_python,
                         hold=self._hold, run_dir=self._runs_root / run_id, allocation=allocation)
        try:
            directory = RunDirectory.create(self._runs_root, run_id)
            directory.write_config(self._config, self._settings, plans)
            for plan in plans:
                directory.write_task(plan)
        except OSError as exc:
            for reservation in reservations.values():
                reservation.release()
            raise PreflightError([f"run directory under {self._runs_root}: {exc}"]) from exc
        tasks = {plan.name: _Task(plan, reservations.get(plan.name)) for plan in plans}
        run = _Run(run_id, directory, self._settings, tasks, self._clock.monotonic(), started_wall)
        self._run = run
        self._publish(run, RunStarted(run_id=run_id, run_dir=directory.path,
                                      tasks=tuple(p.info for p in plans), settings=self._settings,
                                      t=started_wall))
        for text in (*report.warnings, *allocation.notes):
            self._notify(run, Level.WARNING, text)
        if unreachable_local := _local_tasks_remote_peers_cannot_reach(self._config):
            self._notify(run, Level.WARNING,
                         f"{', '.join(unreachable_local)} run on localhost, but remote tasks cannot "
                         "reach this machine as localhost: set its address as hosts: localhost: "
                         "address: ... in hosts.yaml")
        for host in report.hosts:
            self._notify(run, Level.INFO, f"host {host.name}: Python {host.python_version}, "
                         f"TensorFlow {host.tf_version}, trainer "
                         f"{'uploaded to' if host.uploaded else 'found in'} {host.trainer_path}")
        self._spawn(run, directory.flush_periodically(self._clock))
        self._spawn(run, self._lifecycle(run))

    async def wait(self) -> RunSummary:
        """Wait for the current run to finish; return its summary."""
        run = self._require_run()
        return await asyncio.shield(run.finished)

    async def run(self) -> RunSummary:
        """:meth:`start`, then :meth:`wait`."""
        await self.start()
        return await self.wait()

    async def stop_all(self, outcome: RunOutcome = RunOutcome.STOPPED,
                       reason: str = "stopped on request") -> RunSummary | None:
        """Stop every task (SIGTERM, SIGKILL after the grace period) and end the run with
        ``outcome``; returns the summary (None if no run was ever started)."""
        run = self._run
        if run is None:
            return None
        self._request_stop(run, outcome, reason)
        return await asyncio.shield(run.finished)

    def kill_all(self) -> None:
        """Skip the rest of the grace period of a stop in progress: SIGKILL now."""
        if self._run is not None:
            self._run.kill_now.set()

    async def relaunch(self, settings: TrainingSettings) -> None:
        """Stop the current run (if any) and start a new one with ``settings``.
        Raises ValueError for invalid settings, PreflightError like :meth:`start`."""
        problems = settings.problems(len(self._config.worker_tasks))
        if problems:
            raise ValueError("; ".join(f"{name}: {message}" for name, message in problems))
        if self.is_running:
            await self.stop_all(RunOutcome.STOPPED, "relaunched with new settings")
        self._settings = settings
        await self.start()

    async def close(self) -> None:
        """Stop any run and release the launcher."""
        if self.is_running:
            await self.stop_all(RunOutcome.STOPPED, "controller closing")
        await self._launcher.close()

    # -- single tasks -------------------------------------------------------------------

    async def stop_task(self, name: str) -> None:
        """Stop one task (SIGTERM, SIGKILL after the grace period); it ends STOPPED. If it
        was the last running worker, the run ends."""
        run = self._require_run()
        task = self._task(run, name)
        task.stop_reason = "stopped on request"
        if self._stalls_sync_rounds(run, task):
            self._notify(run, Level.WARNING, "sync mode: every round needs a gradient from each "
                         "worker, so training pauses until this worker is started again", task.name)
        await self._stop_one(run, task)

    def _stalls_sync_rounds(self, run: _Run, task: _Task) -> bool:
        """Whether stopping ``task`` (a running worker) leaves sync rounds short of gradients."""
        workers = run.of_job(Job.WORKER)
        running = sum(1 for t in workers if t.state.is_active and t is not task)
        return (task.job is Job.WORKER and task.state.is_active and run.settings.mode is Mode.SYNC
                and running > 0 and running < run.settings.effective_replicas(len(workers)))

    async def start_task(self, name: str) -> None:
        """Start one task that is not running, regardless of the start order (a person
        decides). Raises RuntimeError when the run is over or ending."""
        run = self._require_run()
        task = self._task(run, name)
        if run.finished.done() or run.stop_requested.is_set() or run.workers_done.is_set():
            raise RuntimeError("the run is over; relaunch the cluster instead")
        if task.state.is_active:
            return
        failure = await self._launch(run, task)
        if failure is None:
            self._spawn(run, self._expect_ready(run, task))

    async def restart_task(self, name: str) -> None:
        """Stop one task and start it again with the same command line."""
        run = self._require_run()
        task = self._task(run, name)
        task.restarting = True  # its exit must not end the run or trigger fail-fast
        try:
            task.stop_reason = "restarting"
            await self._stop_one(run, task)
            await self.start_task(name)
        finally:
            task.restarting = False
            self._check_workers_done(run)

    # -- the lifecycle ------------------------------------------------------------------

    async def _lifecycle(self, run: _Run) -> None:
        try:
            try:
                failure = await self._start_in_order(run)
                if failure:
                    self._request_stop(run, RunOutcome.FAILED, failure)
                if not run.stop_requested.is_set():
                    await first_completed(run.workers_done.wait(), run.stop_requested.wait())
                if not run.stop_requested.is_set():
                    await self._let_ps_exit(run)
            except Exception as exc:  # a controller bug must still end in every task stopped
                log.exception("run %s: lifecycle failed", run.run_id)
                self._request_stop(run, RunOutcome.FAILED, f"controller error: {exc!r}")
            because = run.stop_reason or "the run ended"
            for task in run.tasks.values():
                task.stop_reason = task.stop_reason or f"because {because}"
            await self._stop_tasks(run, list(run.tasks.values()))
            self._finish(run)
        except asyncio.CancelledError:
            # The event loop is being torn down under us (the front end crashed): there is
            # no time for a graceful stop and the exit watchers are gone, so SIGKILL every
            # task now and give up on the summary.
            await self._kill_everything(run)
            if not run.finished.done():
                run.finished.cancel()
            run.directory.close()
            raise

    async def _kill_everything(self, run: _Run) -> None:
        for task in run.tasks.values():
            if task.process is not None and task.state.is_active:
                try:
                    await task.process.kill()
                except Exception:
                    log.exception("%s: SIGKILL failed", task.name)

    async def _start_in_order(self, run: _Run) -> str | None:
        """Start stage after stage; return why the start failed, or None. Once every task
        is up, the run is :attr:`_Run.up` and a notice says how long it took."""
        began = self._clock.monotonic()
        stages = run.stages()
        if self._hold:
            # Launch every task now so their TensorFlow imports overlap; each waits for
            # `go` before starting its server, so the servers still start in order.
            for task in (task for stage in stages for task in stage):
                if run.stop_requested.is_set():
                    return None
                failure = await self._launch(run, task)
                if failure:
                    return failure
        for stage in stages:
            if not self._hold:
                for task in stage:
                    if run.stop_requested.is_set():
                        return None
                    self._release_port(task)
                    failure = await self._launch(run, task)
                    if failure:
                        return failure
            failure = await self._bring_up(run, stage)
            if failure or run.stop_requested.is_set():
                return failure
        run.up = True
        self._notify(run, Level.INFO, f"all {len(run.tasks)} tasks up in "
                     f"{self._clock.monotonic() - began:.1f} s")
        return None

    async def _bring_up(self, run: _Run, stage: list[_Task]) -> str | None:
        """Wait until every launched task of ``stage`` is ready (with ``--hold``: wait for
        `loaded`, then send `go`); return why not, or None. One deadline for both waits."""
        deadline = self._clock.monotonic() + self._ready_timeout
        if self._hold:
            failure = await self._await_stage(run, stage, lambda t: t.loaded, deadline)
            if failure or run.stop_requested.is_set():
                return failure
            for task in stage:
                await self._go(run, task)
        return await self._await_stage(run, stage, lambda t: t.settled, deadline)

    async def _await_stage(self, run: _Run, stage: list[_Task],
                           milestone: Callable[[_Task], asyncio.Event], deadline: float) -> str | None:
        async def all_reached() -> None:
            await asyncio.gather(*(milestone(t).wait() for t in stage))

        remaining = max(0.0, deadline - self._clock.monotonic())
        winner = await first_completed(all_reached(), run.stop_requested.wait(),
                                       self._clock.sleep(remaining))
        # An exit explains a stop that fail-fast requested, so look at exits first.
        for task in stage:
            if task.state is TaskState.FAILED and not task.restarting:
                return f"{task.name} {task.reason}"
        if winner == 2:
            late = [t for t in stage if t.state is TaskState.STARTING]
            for task in late:
                task.failure = f"did not report ready within {self._ready_timeout:g} s"
            names = ", ".join(t.name for t in late)
            return f"start failed: {names} did not report ready within {self._ready_timeout:g} s"
        return None

    async def _go(self, run: _Run, task: _Task) -> None:
        """Let a held task start its server (its port is released first)."""
        self._release_port(task)
        if task.process is None or not task.state.is_active:
            return
        try:
            await task.process.send(GO_LINE)
        except OSError:
            pass  # it is exiting; its exit is recorded and judged by the stage's wait

    def _release_port(self, task: _Task) -> None:
        if task.reservation is not None:
            # Release the held port at the last moment, just before the task binds it.
            # Residual race: between this release and the trainer's bind, another process
            # on the host could take the port; the trainer then fails to bind and the
            # start fails clearly (it cannot be closed without passing the socket itself).
            task.reservation.release()
            task.reservation = None

    async def _let_ps_exit(self, run: _Run) -> None:
        """Every worker has exited: give each ps its chance to exit by itself."""
        waiting = [t for t in run.of_job(Job.PS) if t.state.is_active]
        workers_ok = all(t.state is TaskState.SUCCEEDED for t in run.of_job(Job.WORKER))
        if not waiting or not workers_ok:
            return  # a ps exits by itself only after every worker's clean shutdown

        async def all_exited() -> None:
            await asyncio.gather(*(t.exited.wait() for t in waiting))

        await first_completed(all_exited(), run.stop_requested.wait(),
                              self._clock.sleep(self._ps_exit_timeout))
        for task in waiting:
            if task.state.is_active and not run.stop_requested.is_set():
                task.failure = (f"did not exit within {self._ps_exit_timeout:g} s after the "
                                f"last worker finished")

    def _request_stop(self, run: _Run, outcome: RunOutcome, reason: str) -> None:
        """Ask the lifecycle to end the run. The first request's outcome and reason win."""
        if run.stop_requested.is_set():
            return
        run.stop_outcome = outcome
        run.stop_reason = reason
        run.stop_requested.set()

    def _finish(self, run: _Run) -> None:
        summary = self._summarize(run)
        self._publish(run, RunFinished(summary=summary, t=self._clock.time()))
        for task in list(run.background):
            if task is not asyncio.current_task():
                task.cancel()
        try:
            run.directory.write_summary(summary)
            run.directory.close()
        except OSError as exc:
            self._notify(run, Level.ERROR, f"run directory: cannot write the summary: {exc}")
        run.finished.set_result(summary)

    def _summarize(self, run: _Run) -> RunSummary:
        tasks = list(run.tasks.values())
        failed = [t for t in tasks if t.state is TaskState.FAILED]
        outcome: RunOutcome
        if run.stop_outcome in (RunOutcome.INTERRUPTED, RunOutcome.TIMEOUT):
            outcome, reason = run.stop_outcome, run.stop_reason
        elif failed:
            outcome = RunOutcome.FAILED
            reason = (run.stop_reason if run.stop_outcome is RunOutcome.FAILED
                      else f"{failed[0].name} {failed[0].reason}")
        elif all(t.state is TaskState.SUCCEEDED for t in tasks):
            outcome, reason = RunOutcome.SUCCEEDED, ""
        else:
            outcome, reason = RunOutcome.STOPPED, run.stop_reason or "stopped"
        snapshot = run.progress.snapshot()
        return RunSummary(
            run_id=run.run_id,
            run_dir=run.directory.path,
            outcome=outcome,
            reason=reason,
            started_at=run.started_wall,
            wall_time=self._clock.monotonic() - run.started_mono,
            global_step=snapshot.global_step,
            target=snapshot.target,
            final_loss=run.progress.final_loss,
            final_accuracy=run.progress.final_accuracy,
            tasks=tuple(TaskResult(name=t.name, state=t.state, exit_code=t.exit_code, reason=t.reason,
                                   restarts=t.restarts, last_lines=tuple(t.tail), hint=t.hint)
                   for t in tasks),
            incidents=tuple(run.incidents),
        )

    # -- one task's process -------------------------------------------------------------

    async def _launch(self, run: _Run, task: _Task) -> str | None:
        """Start the task's process; return why it could not start, or None."""
        task.new_launch()
        plan = task.plan
        try:
            process = await self._launcher.start(plan.spec, plan.host, plan.argv, plan.env, plan.cwd)
        except (LaunchError, OSError) as exc:
            task.exit_code = None
            self._set_state(run, task, TaskState.FAILED, reason=f"could not start: {exc}")
            task.exited.set()
            task.settled.set()
            task.loaded.set()
            return f"{task.name} could not start: {exc}"
        task.process = process
        task.pid = process.pid
        task.launches += 1
        self._set_state(run, task, TaskState.STARTING)
        self._spawn(run, self._watch(run, task, process))
        return None

    async def _expect_ready(self, run: _Run, task: _Task) -> None:
        """For a task started on its own (by hand or by the restart policy): bring it up,
        and stop it (as failed) if it does not get ready in time."""
        failure = await self._bring_up(run, [task])
        if failure and task.state.is_active:
            await self._stop_one(run, task)

    async def _watch(self, run: _Run, task: _Task, process: RunningTask) -> None:
        """Pump the task's output until it exits, then record the exit."""
        pump = asyncio.create_task(self._pump(run, task, process))
        try:
            code = await process.wait()
        except LaunchError as exc:  # the connection to its host was lost: no exit code
            task.failure = task.failure or str(exc)
            self._notify(run, Level.ERROR, str(exc), task.name)
            code = -1
        except Exception as exc:  # a bug in a launcher: keep the traceback in the log
            log.exception("%s: waiting for the process failed", task.name)
            self._notify(run, Level.ERROR, f"lost track of the process: {exc}", task.name)
            code = -1
        if not pump.done():
            await first_completed(pump, self._clock.sleep(DRAIN_TIMEOUT))
        self._on_exit(run, task, code)

    async def _pump(self, run: _Run, task: _Task, process: RunningTask) -> None:
        try:
            async for line in process.output():
                self._on_line(run, task, line)
        except Exception as exc:
            log.exception("%s: reading output failed", task.name)
            self._notify(run, Level.WARNING, f"stopped reading output: {exc}", task.name)

    def _on_line(self, run: _Run, task: _Task, line: OutputLine) -> None:
        now = self._clock.time()
        event: protocol.Event | None = None
        # Events come on stdout as whole lines; a piece of an over-long line never counts.
        if line.stream is Stream.STDOUT and not line.partial and line.stream not in task.continuing:
            event = protocol.parse_event(line.text)
        if line.partial:
            task.continuing.add(line.stream)
        else:
            task.continuing.discard(line.stream)
        self._publish(run, TaskOutput(task=task.name, stream=line.stream, text=line.text,
                                      is_event=event is not None, partial=line.partial, t=now))
        text = describe_event(event) if event is not None else line.text
        if len(text) > TAIL_LINE_CHARS:
            text = text[:TAIL_LINE_CHARS] + f"... ({len(text) - TAIL_LINE_CHARS} more characters)"
        task.tail.append(text)
        if not task.hint:
            self._offer_hint(run, task, hint_for(line.text))
        if event is None:
            return
        run.progress.update(task.name, event)
        self._publish(run, TrainerEvent(task=task.name, event=event, t=now))
        if isinstance(event, protocol.Initialized) and task.name in run.awaiting_resume:
            index = run.awaiting_resume.pop(task.name)
            run.incidents[index] = dataclasses.replace(run.incidents[index],
                                                       resumed_step=event.global_step)
        if isinstance(event, protocol.Loaded):
            task.loaded.set()
        elif isinstance(event, protocol.Ready) and task.state is TaskState.STARTING:
            self._set_state(run, task, TaskState.RUNNING)
            task.settled.set()

    def _on_exit(self, run: _Run, task: _Task, code: int) -> None:
        task.exit_code = code
        was_running = task.state is TaskState.RUNNING
        if task.failure:
            state, reason = TaskState.FAILED, task.failure
        elif task.stop_requested:
            state, reason = TaskState.STOPPED, task.stop_reason
        elif code == 0:
            state, reason = TaskState.SUCCEEDED, ""
        else:
            before = " before reporting ready" if task.state is TaskState.STARTING else ""
            state, reason = TaskState.FAILED, describe_exit(code) + before
            if not task.hint:  # it died by itself: the exit code alone may tell why
                self._offer_hint(run, task, hint_for_exit(code))
        self._set_state(run, task, state, reason=reason)
        task.exited.set()
        task.settled.set()
        task.loaded.set()
        if task.job is Job.WORKER:
            run.progress.worker_exited(task.name)
        if state is TaskState.FAILED and not task.restarting and not run.recovering:
            # (During a cluster restart every failure is a casualty of the one being
            # recovered from.)
            self._judge_failure(run, task, was_running, reason)
        self._check_workers_done(run)

    def _judge_failure(self, run: _Run, task: _Task, was_running: bool, reason: str) -> None:
        """A task failed by itself: restart it, restart the cluster, or fail the run."""
        if task.job is Job.PS:
            if was_running and run.up and not run.workers_done.is_set() and self._may_restart(run, task):
                self._begin_cluster_restart(run, task)
            elif self._fail_fast:
                self._request_stop(run, RunOutcome.FAILED, f"{task.name} {reason}")
        elif was_running and task.hint == UNAVAILABLE and self._cluster_restart_possible(run):
            task.restarting = True  # keeps the run open while we wait
            self._spawn(run, self._judge_after_settle(run, task, reason))
        else:
            self._judge_worker(run, task, was_running, reason)

    def _judge_worker(self, run: _Run, task: _Task, was_running: bool, reason: str) -> None:
        if was_running and self._may_restart(run, task):
            # Mark it now, not in the coroutine: the run must not end (and a start in
            # progress must not fail) while the restart is pending.
            task.restarts += 1
            task.restarting = True
            self._record_incident(run, task, IncidentKind.TASK_RESTART, resumes=task)
            self._spawn(run, self._restart_after_backoff(run, task))
        elif self._fail_fast:
            self._request_stop(run, RunOutcome.FAILED, f"{task.name} {reason}")

    async def _judge_after_settle(self, run: _Run, task: _Task, reason: str) -> None:
        """A worker lost its connection to a ps: if a ps failure (and so a cluster restart)
        follows within :data:`PEER_LOSS_SETTLE`, the worker was its casualty; otherwise it
        is judged like any failed worker."""
        try:
            await first_completed(run.recovery.wait(), run.stop_requested.wait(),
                                  self._clock.sleep(PEER_LOSS_SETTLE))
        finally:
            task.restarting = False
        if not run.recovering and not run.stop_requested.is_set() and not task.state.is_active:
            self._judge_worker(run, task, True, reason)
        self._check_workers_done(run)

    def _cluster_restart_possible(self, run: _Run) -> bool:
        """Whether a ps failing now would be answered with a cluster restart."""
        return run.up and any(self._may_restart(run, ps) for ps in run.of_job(Job.PS))

    def _record_incident(self, run: _Run, task: _Task, kind: IncidentKind, resumes: _Task) -> None:
        """Note a restart for the summary; ``resumes``'s next `initialized` says where
        training went on."""
        run.incidents.append(Incident(kind=kind, task=task.name, reason=task.reason,
                                      global_step=run.progress.snapshot().global_step,
                                      t=self._clock.time()))
        run.awaiting_resume[resumes.name] = len(run.incidents) - 1

    def _begin_cluster_restart(self, run: _Run, cause: _Task) -> None:
        """A ps failed mid-run. The model's variables on it are gone and every worker's
        session with it, so restarting the ps alone cannot help: restart every task, in
        order, and let the chief restore the latest checkpoint."""
        cause.restarts += 1
        run.recovery.set()
        self._record_incident(run, cause, IncidentKind.CLUSTER_RESTART, resumes=run.chief)
        policy = self._config.restart_policy(cause.job)
        self._notify(run, Level.WARNING,
                     f"{cause.reason}; restarting the whole cluster (restart {cause.restarts} of "
                     f"{policy.max_restarts} in {policy.backoff:g} s), training resumes from the "
                     f"latest checkpoint", cause.name)
        self._spawn(run, self._restart_cluster(run, cause))

    async def _restart_cluster(self, run: _Run, cause: _Task) -> None:
        policy = self._config.restart_policy(cause.job)
        try:
            survivors = [t for t in run.tasks.values() if t.state.is_active]
            for task in survivors:
                task.stop_reason = f"cluster restart after {cause.name} failed"
            await self._stop_tasks(run, survivors)
            winner = await first_completed(self._clock.sleep(policy.backoff), run.stop_requested.wait())
            if winner != 0 or run.stop_requested.is_set():
                return
            failure = await self._start_in_order(run)
            if failure:
                self._request_stop(run, RunOutcome.FAILED, f"cluster restart failed: {failure}")
        finally:
            run.recovery.clear()
            self._check_workers_done(run)

    def _offer_hint(self, run: _Run, task: _Task, hint: str | None) -> None:
        """Keep the first hint of a launch and tell the front ends, once per launch."""
        if hint and not task.hint:
            task.hint = hint
            self._publish(run, TaskHint(task=task.name, hint=hint, t=self._clock.time()))

    def _may_restart(self, run: _Run, task: _Task) -> bool:
        """Whether the restart policy restarts this task, which failed after it was running.
        (A task that fails before reporting ready fails the start instead, and failures the
        controller itself declared, such as "did not exit", are not retried.)"""
        policy = self._config.restart_policy(task.job)
        return (policy.policy is RestartMode.ON_FAILURE and task.restarts < policy.max_restarts
                and not run.stop_requested.is_set() and not task.failure)

    async def _restart_after_backoff(self, run: _Run, task: _Task) -> None:
        policy = self._config.restart_policy(task.job)
        self._notify(run, Level.WARNING, f"{task.reason}; restart {task.restarts} of "
                     f"{policy.max_restarts} in {policy.backoff:g} s", task.name)
        try:
            winner = await first_completed(self._clock.sleep(policy.backoff), run.stop_requested.wait())
            # A cluster restart in the meantime has started it again already.
            if winner == 0 and not run.stop_requested.is_set() and not run.recovering \
                    and not task.state.is_active:
                failure = await self._launch(run, task)
                if failure is None:
                    self._spawn(run, self._expect_ready(run, task))
                elif self._fail_fast:
                    self._request_stop(run, RunOutcome.FAILED, failure)
        finally:
            task.restarting = False
            self._check_workers_done(run)

    def _check_workers_done(self, run: _Run) -> None:
        workers = run.of_job(Job.WORKER)
        if not run.recovering and all(t.state.is_finished and not t.restarting for t in workers):
            run.workers_done.set()

    async def _stop_tasks(self, run: _Run, tasks: list[_Task]) -> None:
        await asyncio.gather(*(self._stop_one(run, t) for t in tasks))

    async def _stop_one(self, run: _Run, task: _Task) -> None:
        """SIGTERM (and stdin EOF), then SIGKILL after the grace period; wait for the exit."""
        self._release_port(task)
        process, exited = task.process, task.exited
        if process is None or not task.state.is_active:
            return
        task.stop_requested = True
        try:
            await process.terminate()
        except Exception as exc:
            self._notify(run, Level.WARNING, f"could not send SIGTERM: {exc}", task.name)
        await first_completed(exited.wait(), self._clock.sleep(self._grace), run.kill_now.wait())
        if exited.is_set():
            return
        try:
            await process.kill()
        except Exception as exc:
            self._notify(run, Level.ERROR, f"could not send SIGKILL: {exc}", task.name)
        await first_completed(exited.wait(), self._clock.sleep(KILL_WAIT))
        if not exited.is_set():
            self._notify(run, Level.ERROR, f"still running {KILL_WAIT:g} s after SIGKILL "
                         f"(pid {task.pid}); giving up on it", task.name)

    # -- plumbing -----------------------------------------------------------------------

    def _set_state(self, run: _Run, task: _Task, new: TaskState, reason: str = "") -> None:
        old = task.state
        task.state = new
        task.reason = reason
        self._publish(run, TaskStateChanged(
            task=task.name, old=old, new=new, pid=task.pid,
            exit_code=task.exit_code if new.is_finished else None, reason=reason,
            t=self._clock.time()))

    def _notify(self, run: _Run, level: Level, text: str, task: str | None = None) -> None:
        self._publish(run, Notice(level=level, text=text, task=task, t=self._clock.time()))

    def _publish(self, run: _Run, event: ControllerEvent) -> None:
        try:
            run.directory.record(event)
        except OSError as exc:
            if not run.write_failed:  # say it once, then keep the run going without the files
                run.write_failed = True
                self._notify(run, Level.ERROR, f"run directory: write failed: {exc}")
        for sink in list(self._sinks):
            try:
                sink(event)
            except Exception:  # one broken front end must not take the run down
                log.exception("event subscriber %r failed", sink)

    def _spawn(self, run: _Run, coroutine: Coroutine[Any, Any, None]) -> None:
        task = asyncio.create_task(coroutine)
        run.background.add(task)
        task.add_done_callback(run.background.discard)

    def _require_run(self) -> _Run:
        if self._run is None:
            raise RuntimeError("no run has been started")
        return self._run

    @staticmethod
    def _task(run: _Run, name: str) -> _Task:
        try:
            return run.tasks[name]
        except KeyError:
            raise ValueError(f"no task named {name!r}") from None


def _local_tasks_remote_peers_cannot_reach(config: ClusterConfig) -> list[str]:
    """Local tasks whose TF_CONFIG address is loopback in a cluster that has remote tasks."""
    if all(config.host_of(t).is_local for t in config.tasks):
        return []
    return [t.name for t in config.tasks if config.host_of(t).is_local
            and config.host_of(t).address in ("localhost", "127.0.0.1", "::1")]
