"""What the dashboard shows, folded from controller events. No Textual here: the widgets read
this state on a timer, so a flood of output lines costs one deque append each and the screen
is redrawn at most a few times a second whatever the rate.

Every buffer is bounded; the complete logs are in the run directory."""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from itertools import islice

from trainer import protocol
from trainer.settings import TrainingSettings
from tui.common.terminal import inert
from tui.config.cluster import Job
from tui.core.anatomy import AnatomyBoard
from tui.core.describe import describe_event
from tui.core.events import (
    ControllerEvent,
    HostsProgress,
    Notice,
    ProgressUpdate,
    RunFinished,
    RunStarted,
    RunSummary,
    TaskHint,
    TaskHintCleared,
    TaskOutput,
    TaskStateChanged,
    TrainerEvent,
)
from tui.core.exits import ExitInfo
from tui.core.host_table import StateChanges
from tui.core.inbox import CoreLost
from tui.core.progress import ProgressSnapshot, WorkerProgress
from tui.core.run_facts import Figures, RateUnit, RunFacts, counts_examples, figures
from tui.core.task_state import TaskState
from tui.core.usage import UsageSample
from tui.launch.base import WARM_REASON

LOG_LINES_PER_TASK = 2_000
MERGED_LOG_LINES = 5_000
HISTORY_POINTS = 120
MAX_LINE_CHARS = 500


@dataclass
class TaskRow:
    """One line of the task table."""

    name: str
    address: str
    job: Job = Job.WORKER
    share: str = ""  # its share of its host, briefly (TaskInfo.share_brief)
    state: TaskState = TaskState.PENDING
    pid: int | None = None
    exit_code: int | None = None
    reason: str = ""
    #: Times started again in this run, as the core counts them (TaskStateChanged.restarts).
    restarts: int = 0
    #: The global step of this worker's latest step report (never its local step: a
    #: restarted worker's local step starts again from the global step).
    global_step: int | None = None
    examples_per_sec: float | None = None
    last_output: float | None = None
    tf_version: str = ""
    hint: str = ""  # the known-failure hint of the current launch (tui.core.hints), if any
    warm: bool = False  # the current launch was forked from a warm pool (TensorFlow already imported)
    #: TF2's coordinator: its rate is the whole cluster's (the workers show their parts).
    coordinates: bool = False

    @property
    def state_text(self) -> str:
        if self.state is TaskState.FAILED and self.exit_code is not None:
            return f"failed ({self.exit_code})"
        return self.state.value

    def output_age(self, now: float) -> str:
        if self.last_output is None:
            return "-"
        age = max(0.0, now - self.last_output)
        return f"{age:.0f}s" if age < 120 else f"{age / 60:.0f}m"


@dataclass
class TaskLog:
    """The tail of one task's output, and how many lines it ever got: each pane showing it
    keeps its own count of what it has shown (:meth:`since`), so two panes may show the
    same log (the split view) without taking lines from each other."""

    lines: deque[str] = field(default_factory=lambda: deque(maxlen=LOG_LINES_PER_TASK))
    #: Lines added so far, those no longer kept included.
    added: int = 0

    def add(self, text: str) -> None:
        self.lines.append(text)
        self.added += 1

    def extend(self, texts: Sequence[str]) -> None:
        """Add several lines (a batch of output: only the last ones stay if they are many)."""
        self.lines.extend(texts)
        self.added += len(texts)

    def since(self, mark: int) -> list[str]:
        """The lines added after the first ``mark`` (as many of them as are still kept)."""
        new = min(self.added - mark, len(self.lines))
        if new <= 0:
            return []
        # From the right end: O(new lines), not O(kept lines), on each refresh.
        return list(islice(reversed(self.lines), new))[::-1]


@dataclass
class Dashboard:
    """The state of the whole screen."""

    settings: TrainingSettings
    clock: Callable[[], float] = time.time
    run_id: str = ""
    run_dir: str = ""
    started: float | None = None
    finished: RunSummary | None = None
    #: Why the last try to start a run was refused (a port in use), until a run starts.
    refused: str = ""
    rows: dict[str, TaskRow] = field(default_factory=dict)
    logs: dict[str, TaskLog] = field(default_factory=dict)
    merged: TaskLog = field(default_factory=lambda: TaskLog(deque(maxlen=MERGED_LOG_LINES)))
    placement: protocol.Placement | None = None
    #: The core's latest progress snapshot (tui.core.progress computes it; this only shows it).
    progress: ProgressSnapshot = field(default_factory=lambda: ProgressSnapshot.empty(0))
    rate_history: deque[float] = field(default_factory=lambda: deque(maxlen=HISTORY_POINTS))
    #: The global step's rate, one point a second: the chart without a batch size.
    step_rate_history: deque[float] = field(default_factory=lambda: deque(maxlen=HISTORY_POINTS))
    worker_history: dict[str, deque[float]] = field(default_factory=dict)
    loss_history: deque[float] = field(default_factory=lambda: deque(maxlen=HISTORY_POINTS))
    notices: deque[Notice] = field(default_factory=lambda: deque(maxlen=100))
    #: The remote hosts as the core last showed them (None: none, or not shown yet).
    hosts: HostsProgress | None = None
    sampled_second: int = 0
    tasks_changed: bool = True
    placement_changed: bool = True
    #: Bumped whenever progress (steps, rates, loss, accuracy) changes, so views that chart
    #: it redraw only then.
    progress_revision: int = 0
    #: The latest CPU and memory per task and host (tui.core.usage), set by the app each refresh.
    usage: UsageSample | None = None
    #: Events folded so far: a test waiting on a slow machine waits while this moves.
    applied: int = 0
    #: Each worker's latest step anatomy and the stragglers (the Throughput pane shows them).
    anatomy: AnatomyBoard = field(default_factory=AnatomyBoard)
    #: What the run is, as the core says it (tui.core.run_facts); None before a run.
    facts: RunFacts | None = None
    #: Each worker's progress entry as last put in its row (:meth:`_rates`) and in its
    #: history (:meth:`_sample`): an entry is a new object when the worker reported, so an
    #: update's other entries (255 of 256, ten times a second) are passed over.
    _rated: dict[str, WorkerProgress] = field(default_factory=dict, repr=False)
    _sampled: dict[str, WorkerProgress] = field(default_factory=dict, repr=False)
    #: The second of each aggregate chart's last point, by the chart's unit.
    _pointed: dict[RateUnit, int] = field(default_factory=dict, repr=False)
    #: Each host's state in the last picture of the hosts (a line for a change of reach).
    _host_changes: StateChanges = field(default_factory=StateChanges, repr=False)

    # -- folding events -------------------------------------------------------------------

    def apply_all(self, events: Sequence[ControllerEvent | CoreLost]) -> None:
        """Fold a frame's events in order, as :meth:`apply` would one by one, but with the
        output lines gathered until an event that adds lines of its own, and made inert
        together (:meth:`_outputs`)."""
        waiting: list[TaskOutput] = []
        for event in events:
            if isinstance(event, TaskOutput):
                self.applied += 1
                row = self.rows.get(event.task)
                if row is not None:
                    row.last_output = event.t
                waiting.append(event)
                continue
            if waiting and not _adds_no_line(event):
                self._outputs(waiting)
                waiting = []
            self.apply(event)
        if waiting:
            self._outputs(waiting)

    def apply(self, event: ControllerEvent | CoreLost) -> None:
        self.applied += 1
        if isinstance(event, TaskOutput):
            self._output(event)
        elif isinstance(event, TrainerEvent):
            self._trainer_event(event.task, event.event, event.t)
        elif isinstance(event, ProgressUpdate):
            self.progress = event.progress
            self.progress_revision += 1
            self._rates(event.progress)
            self._sample(event.t)
        elif isinstance(event, TaskStateChanged):
            self._state(event)
        elif isinstance(event, RunStarted):
            self._run_started(event)
        elif isinstance(event, RunFinished):
            self.finished = event.summary
            self.tasks_changed = True
        elif isinstance(event, Notice):
            self.notices.append(event)
            # In the merged log too: the toasts for them are brief and capped.
            self.merged.add(f"{event.task or 'tfdist':<8}| {event.level.value}: {event.text}")
        elif isinstance(event, TaskHint):
            self._hint(event)
        elif isinstance(event, TaskHintCleared):
            self._hint_cleared(event)
        elif isinstance(event, HostsProgress):
            if self.hosts is None or self.hosts.line != event.line:
                self.merged.add(f"{'tfdist':<8}| {event.line}")
            for line in self._host_changes.reach_lines(event):  # (as headless names them)
                self.merged.add(f"{'tfdist':<8}| {line}")
            self.hosts = event
        elif isinstance(event, CoreLost):
            self._core_lost(event)

    def _core_lost(self, event: CoreLost) -> None:
        """The core is gone and its tasks with it: no row may still say running."""
        for row in self.rows.values():
            if not row.state.is_finished:
                row.state = TaskState.STOPPED
                row.reason = inert(event.text)
                self._add_line(row.name, f"── stopped: {row.reason}")
        self.tasks_changed = True

    def _run_started(self, event: RunStarted) -> None:
        self.settings = event.settings
        self.facts = event.facts
        self.run_id = event.run_id
        self.run_dir = str(event.run_dir)
        self.refused = ""
        self.started = event.t
        self.finished = None
        self.placement = None
        # The step the program trains to as the core knows it: none for a program whose
        # command never says (no "0 / 1,000" before its first step).
        self.progress = ProgressSnapshot.empty(event.facts.target if event.facts is not None
                                               else event.settings.steps)
        self.worker_history.clear()
        self._rated.clear()
        self._sampled.clear()
        self._pointed.clear()
        self.rate_history.clear()
        self.step_rate_history.clear()
        self.loss_history.clear()
        # A new run's steps only: a relaunch (another fuse or partition setting) must not show
        # the last run's typical step, nor keep naming its stragglers.
        self.anatomy = AnatomyBoard()
        self.rows = {}
        for info in event.tasks:
            self.rows[info.name] = TaskRow(info.name, info.address, info.job, info.share_brief)
            self.logs.setdefault(info.name, TaskLog())
        self.tasks_changed = self.placement_changed = True
        self.progress_revision += 1
        self._log_all(f"── run {event.run_id} started ({event.run_dir})")
        for info in event.tasks:
            if info.share:  # its share of its host (tui.plan.allocation)
                self.logs[info.name].add(inert(f"── {info.name} on {info.host}: {info.share}"))

    def _state(self, event: TaskStateChanged) -> None:
        row = self.rows.get(event.task)
        if row is None:
            return
        row.state = event.new
        row.restarts = event.restarts
        if event.new is TaskState.STARTING:
            row.exit_code = None
            row.global_step = row.examples_per_sec = None
            self._rated.pop(event.task, None)  # (the next update puts its rate back)
            row.hint = ""
            row.warm = event.reason == WARM_REASON
        if event.pid is not None:
            row.pid = event.pid
        if event.exit_code is not None:
            row.exit_code = event.exit_code
        row.reason = inert(event.reason)
        if event.new.is_finished:
            row.examples_per_sec = None  # its last rate is no longer true
            ending = ExitInfo(event.exit_code, event.reason).detail()
            self._add_line(event.task, f"── {event.new.value}: {ending}")
        elif event.new is TaskState.UNREACHABLE:  # its host does not answer: not a failure
            self._add_line(event.task, f"── unreachable: {event.reason}")
        elif event.old is TaskState.UNREACHABLE and event.new.is_active:
            self._add_line(event.task, f"── reachable again: {event.new.value}")
        self.tasks_changed = True

    def _hint(self, event: TaskHint) -> None:
        row = self.rows.get(event.task)
        if row is not None:
            row.hint = inert(event.hint)
            self.tasks_changed = True
        self._add_line(event.task, f"── hint: {event.hint}")

    def _hint_cleared(self, event: TaskHintCleared) -> None:
        row = self.rows.get(event.task)
        if row is not None and row.hint:
            row.hint = ""
            self.tasks_changed = True
        self._add_line(event.task, f"── hint taken back: {event.reason}")

    def _output(self, event: TaskOutput) -> None:
        row = self.rows.get(event.task)
        if row is not None:
            row.last_output = event.t
        self._outputs([event])

    def _outputs(self, events: Sequence[TaskOutput]) -> None:
        """Output of one or several tasks, in order: the lines shown made inert in one pass
        over them all (a busy cluster sends a line per task many times a second, and a call
        per line was most of the app's cost)."""
        keep = self.merged.lines.maxlen
        # Event lines are shown in their described form by _trainer_event; noise only in the log.
        # Only what a pane can keep is made inert and stored (a flood's batch can be longer).
        batch = [(event.task, shown[-keep:] if keep else shown)
                 for event in events if (shown := event.shown())]
        if not batch:
            return
        texts = inert("\n".join(line for _, shown in batch for line in shown), newlines=True).split("\n")
        merged: list[str] = []
        start = 0
        for task, shown in batch:
            end = start + len(shown)
            fitted = [_fitted(text) for text in texts[start:end]]
            start = end
            self.logs.setdefault(task, TaskLog()).extend(fitted)
            merged += [f"{task:<8}| {text}" for text in fitted]
        self.merged.extend(merged)

    def _rates(self, progress: ProgressSnapshot) -> None:
        """Each task's rate as the core computed it: a worker under TF2's coordinator has no
        step of its own, only its part of the coordinator's."""
        rated = self._rated
        examples = counts_examples(progress)  # else steps/s: "-", never a 0 that reads as a stall
        for worker in progress.workers:
            if rated.get(worker.task) is worker:
                continue  # (its row shows this entry already)
            row = self.rows.get(worker.task)
            if row is not None:
                row.examples_per_sec = worker.examples_per_sec if examples and not row.state.is_finished \
                    else None
                row.global_step = worker.global_step
                row.coordinates = worker.coordinates
                rated[worker.task] = worker

    def _trainer_event(self, task: str, event: protocol.Event, t: float) -> None:
        row = self.rows.get(task)
        if self.anatomy.fold(task, event):
            self.progress_revision += 1  # (the Throughput pane redraws on this)
        if isinstance(event, protocol.StepAnatomy):
            return  # shown in the Throughput pane, not a log line every few hundred steps
        if isinstance(event, protocol.Step):
            if row is not None:
                row.global_step = event.global_step
                self._rated.pop(task, None)  # (the next update puts its own step back)
            if event.loss is not None:
                self.loss_history.append(event.loss)
            # Not tasks_changed: a table redraw re-renders every row, and steps arrive many
            # times a second; the table's once-a-second refresh shows them.
        elif isinstance(event, protocol.Placement):
            self.placement = event
            self.placement_changed = True
        elif isinstance(event, protocol.Ready) and row is not None:
            row.tf_version = event.tf_version
        if not isinstance(event, protocol.Step) or event.local_step == 1:
            self._add_line(task, describe_event(event))

    def _add_line(self, task: str, text: str) -> None:
        # Task output, event fields, hints and reasons are the tasks' words: Textual's Log
        # would pass their escape sequences to the terminal (an OSC 52 writes the clipboard).
        text = _fitted(inert(text))
        self.logs.setdefault(task, TaskLog()).add(text)
        self.merged.add(f"{task:<8}| {text}")

    def _log_all(self, text: str) -> None:
        text = inert(text)
        for log in self.logs.values():
            log.add(text)
        self.merged.add(text)

    # -- sampling, once a second of event time --------------------------------------------

    def _sample(self, t: float) -> None:
        """One point of the throughput history per second of the events' own time, so the
        charts do not depend on how often the screen is refreshed: the second's latest
        progress (its first could be a worker's first step, with no rate yet, and a run
        shorter than a second would then chart nothing)."""
        second = int(t)
        if second < self.sampled_second:
            return
        new = second > self.sampled_second
        self.sampled_second = second
        workers, steps = self.progress.workers, self.progress.steps_per_sec
        # Workers whose rates are all unknown now (none stepped lately): no point, never a 0
        # that reads as a stall (the per-worker charts skip theirs too). No worker at all: 0.
        known = any(w.examples_per_sec is not None for w in workers)
        if known or not workers:
            self._point(RateUnit.EXAMPLES, self.progress.examples_per_sec, second, known)
        if steps is not None or not workers:
            self._point(RateUnit.STEPS, steps or 0.0, second, bool(workers))
        sampled = self._sampled
        for worker in self.progress.workers:
            if not new and sampled.get(worker.task) is worker:
                continue  # (its history's last point is this entry's rate already)
            history = self.worker_history.setdefault(worker.task, deque(maxlen=HISTORY_POINTS))
            if worker.examples_per_sec is None:
                continue  # not known now (no step lately): no point, never the last rate again
            _put(history, worker.examples_per_sec, new or not history)
            sampled[worker.task] = worker

    def _point(self, unit: RateUnit, value: float, second: int, training: bool) -> None:
        """``value`` as ``second``'s point of an aggregate chart: the second's latest while
        ``training``; once none trains, a second that has a point keeps it. (A run that ended
        within the second of its last step, or whose last steps and end came in one late burst,
        left that second at 0: its rate was never charted.)"""
        history = self.rate_history if unit is RateUnit.EXAMPLES else self.step_rate_history
        if self._pointed.get(unit) != second:
            history.append(value)
            self._pointed[unit] = second
        elif training:
            history[-1] = value

    # -- shown as the core computed it ----------------------------------------------------

    @property
    def figures(self) -> Figures:
        """The run's figures now, as the core computes them for every front end."""
        return figures(self.progress)

    @property
    def global_step(self) -> int:
        return self.progress.global_step

    @property
    def target(self) -> int:
        return self.progress.target

    @property
    def loss(self) -> float | None:
        return self.progress.loss

    @property
    def accuracy(self) -> float | None:
        return self.progress.accuracy

    @property
    def aggregate_rate(self) -> float:
        return self.progress.examples_per_sec

    @property
    def worker_rates(self) -> dict[str, float | None]:
        return {w.task: w.examples_per_sec for w in self.progress.workers}

    def eta_seconds(self) -> float | None:
        """Seconds to the target at the recent global-step rate."""
        return self.progress.eta_seconds

    def elapsed(self, now: float | None = None) -> float:
        if self.started is None:
            return 0.0
        end = self.started + self.finished.wall_time if self.finished else (now or self.clock())
        return max(0.0, end - self.started)

    @property
    def hints(self) -> list[tuple[str, str]]:
        """(task, hint) for every task whose current launch has a known-failure hint."""
        return [(name, row.hint) for name, row in self.rows.items() if row.hint]

    @property
    def active_tasks(self) -> list[str]:
        return [name for name, row in self.rows.items() if row.state.is_active]


def _adds_no_line(event: ControllerEvent | CoreLost) -> bool:
    """The event adds no line to any log (a worker's step after its first, progress)."""
    if isinstance(event, TrainerEvent):
        return isinstance(event.event, protocol.Step) and event.event.local_step != 1
    return isinstance(event, ProgressUpdate)


def _fitted(text: str) -> str:
    """``text`` cut to what a pane shows of a line."""
    return text if len(text) <= MAX_LINE_CHARS else text[:MAX_LINE_CHARS] + "…"


def _put(history: deque[float], value: float, new: bool) -> None:
    """Append ``value`` as a new point, or make it the last point's value."""
    if new or not history:
        history.append(value)
    else:
        history[-1] = value
