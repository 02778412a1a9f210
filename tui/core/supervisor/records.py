"""What the supervisor knows about a run and its tasks, and how it tells subscribers.

:class:`RunRecord` is one run's state, owned by its lifecycle; :class:`TaskRecord` one task's.
Task states and run phases change only through :meth:`RunRecord.set_state` and
:meth:`RunRecord.enter`, which check them against :mod:`tui.core.task_state`.
"""

from __future__ import annotations

import asyncio
import logging
import sys
from collections import deque
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import dataclass
from typing import Any

from trainer.settings import TrainingSettings
from tui.config.cluster import ClusterConfig, Job
from tui.config.restart_policy import DEFAULT_STALL_TIMEOUT, StallPolicy, restarts_within
from tui.core.clock import Clock, SystemClock
from tui.core.events import (
    ControllerEvent,
    Incident,
    Level,
    Notice,
    ProgressUpdate,
    RunFinished,
    RunOutcome,
    RunSummary,
    TaskStateChanged,
)
from tui.core.progress import ProgressTracker
from tui.core.rundir import RunDirectory
from tui.core.supervisor.pause import PauseGuard
from tui.core.task_state import RunPhase, TaskState, check_run_transition, check_task_transition
from tui.launch.base import HostLink, Launcher, PortReservation, RunningTask
from tui.plan.tasks import TaskPlan
from tui.program.base import EventReader, OutputReader, TaskProgram
from tui.program.end_rules import HangWatch, RunEnd
from tui.program.trainer import TRAINER_ARGV

log = logging.getLogger(__name__)

TAIL_LINES = 10
#: Seconds between two progress snapshots published: a snapshot lists every worker, and one
#: per step event made the progress of 256 tasks stepping five times a second cost more
#: than recording their steps. Every change is still published within this time, and the
#: last one before the run's end (:meth:`RunRecord.publish`).
PROGRESS_EVERY = 0.05

Sink = Callable[[ControllerEvent], None]


@dataclass(frozen=True)
class SupervisorOptions:
    """How the supervisor runs tasks (the same for every run of one supervisor).

    ``ready_timeout``: seconds a stage's tasks have to report ready. ``grace``: seconds
    between SIGTERM and SIGKILL. ``ps_exit_timeout``: seconds each ps has to exit by itself
    after every worker succeeded. ``fail_fast``: the first task that fails (and is not
    restarted) stops the run. ``hold``: launch every task at once with ``--hold`` and release
    each stage with ``go``. ``trainer_argv`` / ``local_python``: what a task runs.
    ``program``: what the tasks run (default: the config's ``program:``, else the built-in
    trainer with ``hold`` and ``trainer_argv``; see :func:`tui.plan.tasks.program_for`).
    ``stall_timeout``: seconds without progress before a running task is reported stalled
    (0: never); ``on_stall``: what then (:mod:`tui.core.supervisor.stall`)."""

    ready_timeout: float = 120.0
    grace: float = 3.0
    ps_exit_timeout: float = 5.0
    fail_fast: bool = True
    hold: bool = True
    trainer_argv: Sequence[str] = TRAINER_ARGV
    local_python: str = sys.executable
    program: TaskProgram | None = None
    stall_timeout: float = DEFAULT_STALL_TIMEOUT
    on_stall: StallPolicy = StallPolicy.WARN


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


@dataclass(frozen=True)
class Verdict:
    """How the controller will record a launch's exit, decided before the exit came: STOPPED
    (it is being stopped) or FAILED (the controller judged it failed: not ready in time, did
    not exit, its host was lost). ``then_restart``: a by-hand restart starts it again."""

    state: TaskState
    reason: str
    then_restart: bool = False


class TaskRecord:
    """Mutable bookkeeping of one task within a run."""

    def __init__(self, plan: TaskPlan, reservation: PortReservation | None,
                 reader: Callable[[], OutputReader] = EventReader) -> None:
        self.plan = plan
        #: Its name (an attribute, not the plan's property: every output line asks it often).
        self.name = plan.name
        self.reservation = reservation
        self._new_reader = reader
        self.state = TaskState.PENDING
        self.pid: int | None = None
        self.reason = ""
        self.process: RunningTask | None = None
        self.launches = 0
        self.restarts = 0  # automatic restarts by the restart policy
        self.restart_times: list[float] = []  # when each was decided (the run's clock)
        self.tail: deque[str] = deque(maxlen=TAIL_LINES)
        #: Monotonic time of the task's last sign of life (launch, output, CPU use past the
        #: target step): a stall watchdog compares it with the clock.
        self.last_activity = 0.0
        #: The state and reason of its last exit: where an abandoned restart goes back to.
        self.last_exit: tuple[TaskState, str] = (TaskState.PENDING, "")
        #: Where it was when its host stopped answering (tui.core.supervisor.unreachable).
        self.before_unreachable: TaskState | None = None
        #: Ended by the controller past the target (tui.core.supervisor.after_target), so it
        #: never told the ps it was done: they wait for its token in vain.
        self.ended_after_target = False
        #: Its restart was called off because training was over while it waited in its
        #: backoff (:func:`tui.core.supervisor.stopping.call_off_restarts`): STOPPED, and no
        #: failure of the run's.
        self.restart_called_off = False
        #: Failed while a TF2 coordinator ran on with other workers: the run did not end for it.
        self.left_to_coordinator = False
        #: Set once its launch in flight (if any) has its process or failed: a stop asked
        #: for meanwhile waits for it (a stage's tasks are launched together).
        self.launched = asyncio.Event()
        self.launched.set()
        self.new_launch()

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
        self.verdict: Verdict | None = None
        self.exit_code: int | None = None
        self.hint = ""  # the first known-failure hint of this launch (tui.core.hints)
        #: When its output last showed the failure of ``hint`` (the run's clock); None: a
        #: hint of the watchdog's or of its exit, not of a line.
        self.hint_seen: float | None = None
        self.reader = self._new_reader()  # what this launch's output means (tui.program)
        self.stall_reported = False  # the stall watchdog reports a launch once
        self.stepped = False  # it reported a step this launch (before that it may set up quietly)
        #: The global step it last reported itself this launch (a step or its ``done``).
        self.last_step: int | None = None
        #: Its TensorFlow server said it started (a ``ready`` event with TensorFlow's version,
        #: from the shim or the trainer): ``end`` makes that server's ``join()`` return.
        self.tf_server = False
        self.up_at: float | None = None  # when it became ready this launch (the run's clock)
        self.withheld_hint = ""  # a hint held back while peers were starting; given if it fails
        self.connection_lost = False  # its connection went before its exit came
        self.launched_at = 0.0  # when this launch began (the run's clock)

        self.stall_taken_back = False  # ... again only after it was taken back (on the full timeout)
        self.stall_escalated = False  # restarted as left behind by its peers (tui.core.supervisor.stall)
        self.remote_stopped = False  # a remote process found stopped, as last looked (the same)
        #: Why the controller killed this launch (a stall), which its exit's reason names.
        self.killed_for = ""
        self.launch_lines = 0  # output lines of this launch (the tail holds the last ones)

    def launch_tail(self) -> list[str]:
        """The tail's lines that this launch printed (not a previous launch's)."""
        lines = list(self.tail)
        return lines[len(lines) - min(self.launch_lines, len(lines)):]

    def count_restart(self, now: float) -> int:
        """One more automatic restart at ``now``; returns the total."""
        self.restarts += 1
        self.restart_times.append(now)
        return self.restarts

    def recent_restarts(self, run: RunRecord) -> int:
        """Its automatic restarts that count against its policy's budget now (its window's)."""
        window = run.config.restart_policy(self.job).window
        return restarts_within(self.restart_times, run.clock.monotonic(), window)

    def judge(self, verdict: Verdict) -> None:
        """Record the controller's verdict on this launch: a failure overrides a stop, and
        otherwise the first verdict stands."""
        if self.verdict is None or (verdict.state is TaskState.FAILED
                                    and self.verdict.state is not TaskState.FAILED):
            self.verdict = verdict

    def abandon_restart(self, run: RunRecord) -> None:
        """A restart that was coming (BACKOFF) will not happen: back to how it last ended."""
        if self.state is TaskState.BACKOFF:
            state, reason = self.last_exit
            run.set_state(self, state, reason)

    @property
    def settled_state(self) -> TaskState:
        """Its state, or where it was before its host stopped answering."""
        if self.state is TaskState.UNREACHABLE and self.before_unreachable is not None:
            return self.before_unreachable
        return self.state

    @property
    def declared_failed(self) -> bool:
        """The controller itself judged this launch failed (such failures are not retried)."""
        return self.verdict is not None and self.verdict.state is TaskState.FAILED

    def view(self) -> TaskView:
        spec = self.plan.spec
        return TaskView(self.name, spec.job, spec.index, spec.host, self.plan.port, self.state,
                        self.pid, self.exit_code, self.reason, self.launches, self.restarts)


class RunRecord:
    """One run's state, owned by its lifecycle task, and the run's outlets: every event goes
    through :meth:`publish` (run directory, then subscribers)."""

    def __init__(self, run_id: str, directory: RunDirectory, settings: TrainingSettings,
                 tasks: dict[str, TaskRecord], *, config: ClusterConfig,
                 options: SupervisorOptions, launcher: Launcher, clock: Clock,
                 sinks: list[Sink], started_wall: float, program: TaskProgram) -> None:
        self.run_id = run_id
        self.directory = directory
        self.settings = settings
        self.tasks = tasks
        self.config = config
        self.options = options
        self.program = program
        #: When training is over: every worker, or the chief job's task (tui.program.end_rules).
        self.run_end = RunEnd.of(t.job for t in tasks.values())
        # The run's tasks are fixed: which of them train is worked out once, not on every
        # step event (a list over every task per event was most of a busy run's cost).
        self._trainers = tuple(t for t in tasks.values() if self.run_end.trains(t.job))
        self._trainer_names = frozenset(t.name for t in self._trainers)
        #: Workers stuck after the target step (a user's sync chief): tui.core.supervisor.after_target.
        # A worker quiet for a quarter of the stall timeout before the target was reached was
        # not still working then (the watchdog's own rule): no after-target rule ends it.
        self.hangs = HangWatch(self.program.target(settings),
                               stale_after=options.stall_timeout / 4 if options.stall_timeout > 0
                               else DEFAULT_STALL_TIMEOUT / 4)
        self.hang_check = asyncio.Event()  # a step came in: look at the hang watch again
        #: Notices the controller's own suspensions (tui.core.supervisor.pause).
        self.pause = PauseGuard(enabled=isinstance(clock, SystemClock))
        self.launcher = launcher
        self.clock = clock
        self._sinks = sinks
        self.progress = ProgressTracker(self.program.progress_target(settings))
        self.started_mono = clock.monotonic()
        #: The last moment a task of the run was starting, stopping or in backoff: the tasks
        #: that wait for it are not stalled meanwhile (tui.core.supervisor.stall).
        self.settled_at = self.started_mono
        self.started_wall = started_wall
        self.phase = RunPhase.STARTING
        #: Launches in flight (a launcher's start can take a warm pool's import): set when
        #: each ends, its task then starting or failed (tui.core.supervisor.process.launch).
        self.launching: set[asyncio.Event] = set()
        # Set on entering the phase (RECOVERING's is cleared on leaving it): what waits
        # race against.
        self.entered = {phase: asyncio.Event() for phase in RunPhase}
        self.stop_outcome: RunOutcome | None = None
        self.stop_reason = ""
        self.kill_now = asyncio.Event()
        self.finished: asyncio.Future[RunSummary] = asyncio.get_running_loop().create_future()
        self.background: set[asyncio.Task[None]] = set()
        self.incidents: list[Incident] = []
        # task name -> index in `incidents` of the incident that task's `initialized` closes
        self.awaiting_resume: dict[str, int] = {}
        #: A restarted TF2 worker reports nothing itself: the coordinator's count of the
        #: functions it finished (``by_worker``) when it was started again; more later means
        #: it rejoined.
        self.resume_baseline: dict[str, int] = {}
        #: The functions each worker finished, as the coordinator last reported them.
        self.worker_functions: tuple[int, ...] = ()
        #: Called when a task failed by itself (task, was it running, reason): the restart
        #: policy's entry point, set by the supervisor.
        self.on_failure: Callable[[TaskRecord, bool, str], None] = lambda task, running, why: None
        #: Hosts that do not answer (tui.core.supervisor.unreachable): their links, since when
        #: each silent one is silent (the run's clock), its reconnection under way, and when
        #: each was last reconnected.
        self.links: dict[str, HostLink] = {}
        self.unreachable: dict[str, float] = {}
        self.reconnecting: dict[str, asyncio.Task[bool]] = {}
        self.reconnected_at: dict[str, float] = {}
        self._host_back = asyncio.Event()  # set (and replaced) when a host answers again
        #: When the last progress snapshot was published (the loop's clock), and the one
        #: due if changes came since (:meth:`publish_progress`).
        self._progress_at = -PROGRESS_EVERY
        self._progress_due: asyncio.TimerHandle | None = None
        #: The snapshot due when a worker's rate goes unknown (no step reported lately: see
        #: tui.core.progress.RATE_STALE_GAPS), with no new step to publish one.
        self._stale_due: asyncio.TimerHandle | None = None
        self._finished_published = False

    # -- phases ---------------------------------------------------------------------------

    def enter(self, phase: RunPhase) -> None:
        """Move the run to ``phase`` (checked against :data:`tui.core.task_state.RUN_TRANSITIONS`)."""
        check_run_transition(self.phase, phase)
        if self.phase is RunPhase.RECOVERING:
            self.entered[RunPhase.RECOVERING].clear()
        self.phase = phase
        self.entered[phase].set()

    async def entered_ending(self) -> None:
        """Return once a stop was requested (the run entered ENDING)."""
        await self.entered[RunPhase.ENDING].wait()

    def host_answers(self, host: str) -> float | None:
        """``host`` answers again: it is no longer unreachable; since when it was (None: it
        was not). Wakes whatever waits for a host (:meth:`a_host_answers`)."""
        since = self.unreachable.pop(host, None)
        event, self._host_back = self._host_back, asyncio.Event()
        event.set()
        return since

    async def a_host_answers(self) -> None:
        """Return once a host that did not answer answers again."""
        await self._host_back.wait()

    @property
    def stop_requested(self) -> bool:
        """The run is ending: no restarts, no new stages."""
        return self.phase in (RunPhase.ENDING, RunPhase.FINISHED)

    @property
    def recovering(self) -> bool:
        """A cluster restart is in progress."""
        return self.phase is RunPhase.RECOVERING

    def request_stop(self, outcome: RunOutcome, reason: str) -> None:
        """Ask the lifecycle to end the run. The first request's outcome and reason win."""
        if self.stop_requested:
            return
        self.stop_outcome = outcome
        self.stop_reason = reason
        self.enter(RunPhase.ENDING)

    # -- tasks ----------------------------------------------------------------------------

    def stages(self) -> list[list[TaskRecord]]:
        """The start order: every ps, the chief, the other workers, then the evaluators
        (ready once running: nothing waits for them)."""
        ps = self.of_job(Job.PS)
        others = [t for t in self.tasks.values()
                  if t.job not in (Job.PS, Job.EVALUATOR) and t is not self.chief]
        return [stage for stage in (ps, [self.chief], others, self.of_job(Job.EVALUATOR)) if stage]

    def of_job(self, job: Job) -> list[TaskRecord]:
        return [t for t in self.tasks.values() if t.job is job]

    def workers(self) -> list[TaskRecord]:
        """The tasks that train, as :attr:`run_end` says (every worker; with a chief job, the
        chief alone): the run's training is over when they are."""
        return list(self._trainers)

    def trains(self, task: TaskRecord) -> bool:
        """``task`` is one of :meth:`workers` (in constant time: asked on every step)."""
        return task.name in self._trainer_names

    def servers(self) -> list[TaskRecord]:
        """The tasks that serve the ones that train (ps, evaluators; with a chief job, the
        workers too): they are ended once training is over."""
        return [t for t in self.tasks.values() if not self.run_end.trains(t.job)]

    @property
    def holds(self) -> bool:
        """Tasks are launched held and released with ``go`` (the built-in trainer)."""
        return self.program.holds

    @property
    def chief(self) -> TaskRecord:
        """The chief job's task, else worker 0."""
        return self.tasks[self.config.chief.name]

    def task(self, name: str) -> TaskRecord:
        try:
            return self.tasks[name]
        except KeyError:
            raise ValueError(f"no task named {name!r}") from None

    async def launches_ended(self) -> None:
        """Return once no launch is in flight: every task is then either started (and can be
        stopped) or not, and no start already under way can come after a decision."""
        while self.launching:
            await asyncio.gather(*(event.wait() for event in list(self.launching)))

    def set_state(self, task: TaskRecord, new: TaskState, reason: str = "") -> None:
        """Move ``task`` to ``new`` (checked against :data:`tui.core.task_state.TASK_TRANSITIONS`)
        and tell the subscribers."""
        old = task.state
        check_task_transition(task.name, old, new)
        task.state = new
        task.reason = reason
        self.publish(TaskStateChanged(
            task=task.name, old=old, new=new, pid=task.pid,
            exit_code=task.exit_code if new.is_finished else None, reason=reason,
            restarts=max(0, task.launches - 1), t=self.clock.time()))

    def check_workers_done(self) -> None:
        """Enter WORKERS_DONE once every task that trains has finished (none is restarting)."""
        if self.phase in (RunPhase.STARTING, RunPhase.UP) and \
                all(t.state.is_finished for t in self.workers()):
            self.enter(RunPhase.WORKERS_DONE)

    # -- outlets --------------------------------------------------------------------------

    def notify(self, level: Level, text: str, task: str | None = None, about: str = "") -> None:
        """Publish a :class:`~tui.core.events.Notice` (``about``: see there)."""
        self.publish(Notice(level=level, text=text, task=task, about=about, t=self.clock.time()))

    def publish_progress(self) -> None:
        """Tell the front ends the run's progress changed: at once when no snapshot went out
        in the last :data:`PROGRESS_EVERY` seconds, else once that time is up (one snapshot
        then tells every change that came meanwhile)."""
        if self._progress_due is not None:
            return
        loop = asyncio.get_running_loop()
        wait = self._progress_at + PROGRESS_EVERY - loop.time()
        if wait > 0:
            self._progress_due = loop.call_later(wait, self._publish_progress_now)
        else:
            self._publish_progress_now()

    def flush_progress(self) -> None:
        """Publish now the snapshot that waits for its time, if one does: before something
        leaves the progress (a worker's exit takes its rate, and a coordinator's split), so
        that what it last showed is not skipped."""
        if self._progress_due is not None:
            self._publish_progress_now()

    def _publish_progress_now(self) -> None:
        if self._progress_due is not None:
            self._progress_due.cancel()
            self._progress_due = None
        loop = asyncio.get_running_loop()
        self._progress_at = loop.time()
        now = self.clock.time()
        self.publish(ProgressUpdate(progress=self.progress.snapshot(now), t=now))
        if self._stale_due is not None:
            self._stale_due.cancel()
            self._stale_due = None
        stale_at = self.progress.next_stale_at(now)
        if stale_at is not None and not self._finished_published:
            self._stale_due = loop.call_later(stale_at - now, self.publish_progress)

    def publish(self, event: ControllerEvent) -> None:
        if isinstance(event, RunFinished):
            if self._progress_due is not None:
                self._publish_progress_now()  # the run's last progress comes before its end
            self._finished_published = True
            if self._stale_due is not None:
                self._stale_due.cancel()
        if not isinstance(event, ProgressUpdate):  # derived from events kept there
            self.directory.record(event)  # never raises: see RunDirectory.on_failure
        for sink in list(self._sinks):
            try:
                sink(event)
            except Exception:  # one broken front end must not take the run down
                log.exception("event subscriber %r failed", sink)

    def spawn(self, coroutine: Coroutine[Any, Any, None]) -> None:
        """Run ``coroutine`` in the background; it is cancelled when the run finishes."""
        task = asyncio.create_task(coroutine)
        self.background.add(task)
        task.add_done_callback(self.background.discard)

