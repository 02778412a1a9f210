"""The supervisor: starts a cluster's tasks in order, watches them, stops them, records
everything, and tells its subscribers what happens through :mod:`tui.core.events`.

One run at a time. A run:

1. *Preflight* (:meth:`Supervisor.start`, :mod:`tui.plan.preflight`): every fixed port is
   checked on its host and ``auto`` ports are reserved. A problem raises
   :class:`PreflightError` before anything starts and before a run directory exists.
2. *Staged start*: every ps, then the chief (the ``chief`` task, else worker 0), then the
   others; each stage starts once every task of the previous stage is ready (its ``ready``
   event; for a user's program also TensorFlow's "Started server" line or its port). A task
   that exits or stays silent for ``ready_timeout`` seconds fails the start. With ``hold``
   (the built-in trainer's default) every task is launched at once with ``--hold``: it
   imports TensorFlow and builds its graph, reports ``loaded`` and waits; its stage's turn
   sends it ``go`` on stdin, and only then does it start its server. What a task runs and
   what its output means come from the run's :class:`~tui.program.base.TaskProgram`.
3. *Running* until training is over, as :class:`~tui.program.end_rules.RunEnd` says: every
   worker has exited, or, in a cluster with a ``chief`` job (TF2's coordinator), the chief
   has; a user's worker that makes no progress after the target step is ended and counted
   as succeeded (:mod:`tui.core.supervisor.after_target`). If they all succeeded, the tasks still
   serving end as the rule says: the trainer's ps have ``ps_exit_timeout`` seconds to exit
   by themselves (a ps still running then failed, "did not exit", and is stopped); a ps
   under the shim is sent ``end``; any other program's ps, every evaluator, and every task
   serving a chief are stopped at once and counted as succeeded.
   With ``fail_fast`` (the default) the first task that fails stops the rest, unless the
   restart policy (hosts.yaml ``restart:``) restarts it: a failed worker is restarted on
   its own and rejoins; a failed ps takes the model's variables with it, so the whole
   cluster is restarted in order and the chief resumes from the latest checkpoint (every
   run checkpoints into its run directory unless ``checkpoint_dir`` says otherwise). Each
   restart is an :class:`~tui.core.events.Incident` of the summary.
4. *Stopping* (end of run, :meth:`Supervisor.stop_all`, a failure): stdin closed and
   SIGTERM to each task's process group, SIGKILL after ``grace`` seconds.
5. *Finished*: a :class:`RunSummary` goes to subscribers (``RunFinished``), to
   ``summary.json``, and to whoever awaits :meth:`Supervisor.wait`.

All of this happens in one lifecycle task per run, so only one place decides when the run
ends. The parts live in :mod:`tui.core.supervisor` (one job each), the task and run state
machines in :mod:`tui.core.task_state`, and the restart policy in :mod:`tui.config.restart_policy`.
The supervisor knows nothing about terminals or Textual; time and processes come from
the injected :class:`~tui.core.clock.Clock` and :class:`~tui.launch.base.Launcher`.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import logging
from collections.abc import AsyncIterator, Callable
from pathlib import Path

from trainer.settings import Mode, TrainingSettings
from tui.config.cluster import LOOPBACK, ClusterConfig, Job
from tui.config.restart_policy import PEER_LOSS_SETTLE
from tui.core.clock import Clock, SystemClock, Wake, first_completed
from tui.core.events import ControllerEvent, Level, Notice, RunFinished, RunOutcome, RunStarted, RunSummary
from tui.core.progress import ProgressSnapshot
from tui.core.run_facts import RunFacts
from tui.core.rundir import RunDirectory, WriteFailure, new_run_id
from tui.core.supervisor import recovery
from tui.core.supervisor.after_target import end_hung_workers
from tui.core.supervisor.host_failure import leave_out
from tui.core.supervisor.pause_watch import watch_pauses
from tui.core.supervisor.process import launch
from tui.core.supervisor.records import RunRecord, Sink, SupervisorOptions, TaskRecord, TaskView
from tui.core.supervisor.staged import expect_ready, start_in_order
from tui.core.supervisor.stall import watch_stalls
from tui.core.supervisor.stopping import kill_everything, let_ps_exit, stop_one, stop_tasks
from tui.core.supervisor.summary import summarize
from tui.core.supervisor.unreachable import watch_links
from tui.core.task_state import RunPhase
from tui.launch.base import ConnectReport, Launcher, PoolStarter, TaskPrestarter
from tui.launch.local.launcher import LocalLauncher
from tui.plan.allocation import ResourceError, allocate_for
from tui.plan.preflight import PreflightError, resolve_ports
from tui.plan.tasks import plan_run, program_for
from tui.program.base import TaskProgram

__all__ = ["PEER_LOSS_SETTLE", "PreflightError", "Supervisor", "SupervisorOptions", "TaskView"]

log = logging.getLogger(__name__)


class Supervisor:
    """Runs one cluster config: see the module docstring for the life of a run.

    Subscribers (:meth:`subscribe`) are called synchronously on the event loop with every
    :data:`~tui.core.events.ControllerEvent`; pass ``queue.put_nowait`` to get them on an
    asyncio queue, or a function that posts them to a UI thread."""

    def __init__(self, config: ClusterConfig, *, runs_root: Path = Path("runs"),
                 launcher: Launcher | None = None, clock: Clock | None = None,
                 settings: TrainingSettings | None = None,
                 options: SupervisorOptions | None = None) -> None:
        self._config = config
        self._settings = settings or config.training
        self._runs_root = runs_root
        self._launcher: Launcher = launcher or LocalLauncher()
        self._clock: Clock = clock or SystemClock()
        self._options = options or SupervisorOptions()
        self._prestarted: TrainingSettings | None = None  # what Supervisor.prestart planned for
        self._prepared: ConnectReport | None = None  # hosts prepared ahead of the next start
        self._program = self._options.program or program_for(
            config, trainer_argv=self._options.trainer_argv, hold=self._options.hold)
        self._sinks: list[Sink] = []
        self._run: RunRecord | None = None
        #: Set once the start (or relaunch) under way has made its run, or given up: a stop
        #: asked for meanwhile waits for it (None: no start under way).
        self._starting: asyncio.Event | None = None
        #: A stop asked for while a start was under way: the run it makes is stopped at once.
        self._stop_next: tuple[RunOutcome, str] | None = None

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
    def options(self) -> SupervisorOptions:
        return self._options

    @property
    def program(self) -> TaskProgram:
        """What the tasks run (for a front end: which toggles mean something)."""
        return self._program

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

    @property
    def is_starting(self) -> bool:
        """A start or relaunch is under way (its run may not exist yet)."""
        return self._starting is not None

    def tasks(self) -> tuple[TaskView, ...]:
        """The current (or last) run's tasks, in config order."""
        return tuple(t.view() for t in self._run.tasks.values()) if self._run else ()

    def progress(self) -> ProgressSnapshot | None:
        return self._run.progress.snapshot(self._run.clock.time()) if self._run else None

    def notify(self, level: Level, text: str, task: str | None = None) -> None:
        """Tell the subscribers something (a :class:`~tui.core.events.Notice`), also between runs;
        during a run it is recorded in the run directory too."""
        if self._run is not None and not self._run.finished.done():
            self._run.notify(level, text, task)
            return
        self.announce(Notice(level=level, text=text, task=task, t=self._clock.time()))

    def report(self, event: ControllerEvent) -> None:
        """Publish ``event`` from a watcher beside the supervisor (the slow-link watch): during
        a run it is recorded in the run directory too, as the supervisor's own events are."""
        if self._run is not None and not self._run.finished.done():
            self._run.publish(event)
            return
        self.announce(event)

    def announce(self, event: ControllerEvent) -> None:
        """Send ``event`` to the subscribers as it is (what happens before a run exists, such
        as the hosts being prepared: no run directory records it)."""
        for sink in list(self._sinks):
            try:
                sink(event)
            except Exception:  # one broken front end must not take the others down
                log.exception("event subscriber %r failed", sink)

    # -- whole runs ---------------------------------------------------------------------

    def prestart(self) -> None:
        """Start, without waiting, the warm pools this machine's tasks of the next run will
        fork from, so that their TensorFlow import overlaps the controller's own start and
        the preflight (a front end calls this as soon as it has a supervisor; a pool that
        exists already is kept). Plans the run with provisional ports: what a pool must
        agree on with its tasks (the interpreter, the import-time environment) does not
        depend on them."""
        if not isinstance(self._launcher, TaskPrestarter) or self._prestarted == self._settings:
            return  # (a front end and the start both ask: one plan per settings is enough)
        self._prestarted = self._settings
        ports = {spec.name: spec.port or 0 for spec in self._config.tasks}
        plans = plan_run(self._config, self._settings, ports, "prestart", program=self._program,
                         local_python=self._options.local_python)
        for plan in plans:
            if plan.host.is_local:
                self._launcher.prestart(plan.host, plan.argv, plan.env)

    async def prepare_hosts(self) -> ConnectReport:
        """Prepare every host of the next run (what :meth:`start` does first), kept for it:
        a front end may do it beside other start-up work (the leftover search)."""
        # Every host at once: preparing a remote host imports TensorFlow there (seconds), in
        # the warm pool its tasks will start from when the launcher can start it meanwhile.
        if isinstance(self._launcher, PoolStarter):
            self._launcher.expect_pools(self._program.warm_mode, self._program.checks_tensorflow)
        self._prepared = await self._launcher.connect_all(self._config.host_of(t) for t in self._config.tasks)
        return self._prepared

    async def start(self) -> None:
        """Preflight, create the run directory, and begin the staged start in the
        background. Returns once the run has begun; :meth:`wait` for its end. A stop asked
        for meanwhile (:meth:`stop_all`, :meth:`close`) ends that run before any task starts.
        Raises :class:`PreflightError` (nothing started) or RuntimeError (a run is active)."""
        async with self._start_window():
            await self._start()

    @contextlib.asynccontextmanager
    async def _start_window(self, *, replacing: bool = False) -> AsyncIterator[None]:
        """While a start is under way, until its run exists (for a relaunch, ``replacing``,
        from before the current run is stopped): a stop asked for in that time waits for the
        run and stops it before any task starts. (A SIGTERM during a relaunch returned at
        once, and the new run then started its tasks after the controller had closed.)"""
        if (self.is_running and not replacing) or self._starting is not None:
            raise RuntimeError("a run is already in progress")
        self._starting = made = asyncio.Event()
        try:
            yield
        finally:
            self._starting, self._stop_next = None, None
            made.set()

    async def _start(self) -> None:
        self.prestart()
        report, self._prepared = self._prepared or await self.prepare_hosts(), None
        left_out = leave_out(self._config, self._settings, report.failures) if report.failures else None
        without = left_out.tasks if left_out is not None else frozenset()
        try:
            allocation = await allocate_for(self._config, {h.name: h.resources for h in report.hosts})
        except ResourceError as exc:
            raise PreflightError([str(exc)]) from None
        kept = dataclasses.replace(self._config, tasks=tuple(t for t in self._config.tasks
                                                             if t.name not in without))
        ports, reservations = await resolve_ports(kept, self._launcher)
        ports.update({t.name: t.port for t in self._config.tasks if t.name in without and t.port})
        started_wall = self._clock.time()
        run_id = new_run_id(started_wall)
        options = self._options
        plans = plan_run(self._config, self._settings, ports, run_id, program=self._program,
                         local_python=options.local_python, run_dir=self._runs_root / run_id,
                         allocation=allocation, placement=report.placement, without=without)
        try:
            directory = RunDirectory.create(self._runs_root, run_id)
            directory.write_config(self._config, self._settings, plans)
            for plan in plans:
                directory.write_task(plan)
        except OSError as exc:
            for reservation in reservations.values():
                reservation.release()
            raise PreflightError([f"run directory under {self._runs_root}: {exc}"]) from exc
        settings, program = self._settings, self._program
        tasks = {plan.name: TaskRecord(plan, reservations.get(plan.name),
                                       functools.partial(program.reader, plan.spec, settings))
                 for plan in plans}
        run = RunRecord(run_id, directory, self._settings, tasks, config=self._config,
                        options=options, launcher=self._launcher, clock=self._clock,
                        sinks=self._sinks, started_wall=started_wall, program=program)
        run.on_failure = functools.partial(recovery.on_failure, run)
        self._run = run
        if self._stop_next is not None:  # before the lifecycle begins: no task is launched
            run.request_stop(*self._stop_next)
        run.publish(RunStarted(run_id=run_id, run_dir=directory.path,
                               tasks=tuple(p.info for p in plans), settings=self._settings,
                               t=started_wall, description=program.describe(self._settings),
                               facts=RunFacts.of(program, self._settings)))
        for text in (*report.warnings, *allocation.notes, *([left_out.notice] if left_out else [])):
            run.notify(Level.WARNING, text)
        if unreachable_local := _local_tasks_remote_peers_cannot_reach(self._config):
            run.notify(Level.WARNING,
                       f"{', '.join(unreachable_local)} run on localhost, but remote tasks cannot "
                       "reach this machine as localhost: set its address as hosts: localhost: "
                       "address: ... in hosts.yaml")
        for host in report.hosts:
            tf = f"TensorFlow {host.tf_version}, " if host.tf_version else ""  # (not looked for)
            run.notify(Level.INFO, f"host {host.name}: Python {host.python_version}, {tf}trainer "
                       f"{'uploaded to' if host.uploaded else 'found in'} {host.trainer_path}")
        directory.on_failure = functools.partial(_record_lost, run)
        run.spawn(directory.flush_periodically(self._clock))
        run.spawn(watch_stalls(run))
        run.spawn(watch_pauses(run))
        watch_links(run)
        run.spawn(self._lifecycle(run))

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
        if (starting := self._starting) is not None:
            self._stop_next = self._stop_next or (outcome, reason)
            await starting.wait()
        return await self._stop_run(outcome, reason)

    async def _stop_run(self, outcome: RunOutcome, reason: str) -> RunSummary | None:
        run = self._run
        if run is None:
            return None
        run.request_stop(outcome, reason)
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
        async with self._start_window(replacing=True):
            if self.is_running:
                await self._stop_run(RunOutcome.STOPPED, "relaunched with new settings")
            if self._stop_next is not None:
                return  # stopped while the last run was ending: no new one
            self._settings = settings
            await self._start()

    async def close(self) -> None:
        """Stop any run (one being started too) and release the launcher."""
        if self.is_running or self.is_starting:
            await self.stop_all(RunOutcome.STOPPED, "controller closing")
        await self._launcher.close()

    # -- single tasks -------------------------------------------------------------------

    async def stop_task(self, name: str) -> None:
        """Stop one task (SIGTERM, SIGKILL after the grace period); it ends STOPPED. If it
        was the last running worker, the run ends."""
        run = self._require_run()
        task = run.task(name)
        if self._stalls_sync_rounds(run, task):
            run.notify(Level.WARNING, "sync mode: every round needs a gradient from each "
                       "worker, so training pauses until this worker is started again", task.name)
        await stop_one(run, task, "stopped on request")

    def _stalls_sync_rounds(self, run: RunRecord, task: TaskRecord) -> bool:
        """Whether stopping ``task`` (a running worker) leaves sync rounds short of gradients."""
        workers = run.of_job(Job.WORKER)
        running = sum(1 for t in workers if t.state.is_active and t is not task)
        return (task.job is Job.WORKER and task.state.is_active and run.settings.mode is Mode.SYNC
                and running > 0 and running < run.settings.effective_replicas(len(workers)))

    async def start_task(self, name: str) -> None:
        """Start one task that is not running, regardless of the start order (a person
        decides). Raises RuntimeError when the run is over or ending."""
        run = self._require_run()
        task = run.task(name)
        if run.finished.done() or run.stop_requested or run.phase is RunPhase.WORKERS_DONE:
            raise RuntimeError("the run is over; relaunch the cluster instead")
        if task.state.is_active:
            return
        failure = await launch(run, task)
        if failure is None:
            run.spawn(expect_ready(run, task))

    async def restart_task(self, name: str) -> None:
        """Stop one task and start it again with the same command line."""
        run = self._require_run()
        task = run.task(name)
        try:
            # Its exit puts it in BACKOFF: it must not end the run or trigger fail-fast.
            await stop_one(run, task, "restarting", then_restart=True)
            await self.start_task(name)
        finally:
            task.abandon_restart(run)  # the run ended meanwhile
            run.check_workers_done()

    # -- the lifecycle ------------------------------------------------------------------

    async def _lifecycle(self, run: RunRecord) -> None:
        try:
            try:
                run.spawn(end_hung_workers(run))
                failure = await start_in_order(run)
                if failure:
                    run.request_stop(RunOutcome.FAILED, failure)
                elif run.phase is RunPhase.STARTING:
                    run.enter(RunPhase.UP)
                if not run.stop_requested:
                    await first_completed({Wake.DONE: run.entered[RunPhase.WORKERS_DONE].wait(),
                                           Wake.STOPPED: run.entered_ending()})
                if not run.stop_requested:
                    await let_ps_exit(run)
            except Exception as exc:  # a controller bug must still end in every task stopped
                log.exception("run %s: lifecycle failed", run.run_id)
                run.request_stop(RunOutcome.FAILED, f"controller error: {exc!r}")
            because = run.stop_reason or "the run ended"
            if not run.stop_requested:
                run.enter(RunPhase.ENDING)
            await stop_tasks(run, list(run.tasks.values()), f"because {because}")
            for task in run.tasks.values():
                task.abandon_restart(run)  # a restart that was coming will not come now
            self._finish(run)
        except asyncio.CancelledError:
            # The event loop is being torn down under us (the front end crashed): there is
            # no time for a graceful stop and the exit watchers are gone, so SIGKILL every
            # task now and give up on the summary.
            await kill_everything(run)
            if not run.finished.done():
                run.finished.cancel()
            run.directory.close()
            raise

    def _finish(self, run: RunRecord) -> None:
        run.enter(RunPhase.FINISHED)
        run.directory.flush()  # last look: a run whose directory went away did not succeed
        summary = summarize(run)
        lost = run.directory.failure
        if lost is not None and summary.outcome in (RunOutcome.SUCCEEDED, RunOutcome.STOPPED):
            summary = dataclasses.replace(summary, outcome=RunOutcome.FAILED, reason=f"run directory: {lost}")
        run.publish(RunFinished(summary=summary, t=self._clock.time()))
        for task in list(run.background):
            if task is not asyncio.current_task():
                task.cancel()
        run.directory.write_summary(summary)  # a failure is reported by _record_lost
        run.directory.close()
        run.finished.set_result(summary)

    def _require_run(self) -> RunRecord:
        if self._run is None:
            raise RuntimeError("no run has been started")
        return self._run


def _record_lost(run: RunRecord, failure: WriteFailure) -> None:
    """The run directory cannot be written (a full disk): say so, and stop the run. A run
    whose record is lost must not end as if it succeeded; training is not worth more than
    knowing what it did."""
    run.notify(Level.ERROR, f"run directory: {failure}")
    run.request_stop(RunOutcome.FAILED, f"run directory: {failure}")


def _local_tasks_remote_peers_cannot_reach(config: ClusterConfig) -> list[str]:
    """Local tasks whose TF_CONFIG address is loopback in a cluster that has remote tasks."""
    if all(config.host_of(t).is_local for t in config.tasks):
        return []
    return [t.name for t in config.tasks if config.host_of(t).is_local
            and config.host_of(t).address in LOOPBACK]
