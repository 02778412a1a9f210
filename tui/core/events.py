"""The controller's own events: what the supervisor tells its front ends.

The supervisor publishes these to every subscriber (the run directory, the headless
printer, the Textual app). They are frozen dataclasses so a front end may keep them, pass
them between threads, or compare them in tests. :mod:`tui.core.event_records`
writes them as the one format shared by ``events.jsonl`` and ``--json``.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import Any, Union

from trainer import protocol
from trainer.settings import TrainingSettings
from tui.core.host_state import HostReach, HostState
from tui.core.progress import ProgressSnapshot
from tui.core.run_facts import RunFacts
from tui.core.task_state import TaskState
from tui.launch.host_steps import HostPool
from tui.launch.lines import Stream
from tui.plan.tasks import TaskInfo


class Level(Enum):
    INFO = "info"
    WARNING = "warning"
    ERROR = "error"


class RunOutcome(Enum):
    """How a run ended. Front ends map it to what they show; headless maps it to exit codes."""

    SUCCEEDED = "succeeded"      # every worker and ps exited 0 by itself
    FAILED = "failed"            # a task failed (see its TaskResult)
    STOPPED = "stopped"          # stopped on request (stop all, relaunch, tasks stopped by hand)
    TIMEOUT = "timeout"          # stopped because a time limit passed
    INTERRUPTED = "interrupted"  # stopped because of Ctrl-C / SIGTERM


@dataclass(frozen=True, kw_only=True)
class TaskStateChanged:
    """A task moved from ``old`` to ``new``. ``exit_code`` is set once it exited (negative:
    killed by that signal); ``reason`` says why for failures and stops; ``restarts``: how
    many times the task was started again in this run (by its restart policy, a cluster
    restart or by hand), the one count every front end shows."""

    task: str
    old: TaskState
    new: TaskState
    pid: int | None = None
    exit_code: int | None = None
    reason: str = ""
    restarts: int = 0
    t: float = field(default_factory=time.time)


@dataclass(frozen=True, kw_only=True)
class TaskOutput:
    """Lines a task printed on one stream, in order (decoded with replacement characters,
    without newlines): the lines one read of its pipe completed, up to and including the
    next protocol event line, so that a flood costs every subscriber one event per read, not
    one per line, and each event's :class:`TrainerEvent` follows the lines before it.

    ``events``: indices of the lines that were protocol events (also published as
    :class:`TrainerEvent`); ``noise``: indices of log noise (:mod:`tui.program.noise`: kept in
    the task's log, left out of the live view); ``continued``: the first line continues a
    piece of an over-long line; ``partial``: the last line is such a piece, continued in the
    next TaskOutput of the same stream."""

    task: str
    stream: Stream
    lines: tuple[str, ...]
    events: frozenset[int] = frozenset()
    noise: frozenset[int] = frozenset()
    continued: bool = False
    partial: bool = False
    t: float = field(default_factory=time.time)

    @classmethod
    def line(cls, task: str, text: str, stream: Stream = Stream.STDOUT, *, is_event: bool = False,
             t: float | None = None) -> TaskOutput:
        """One line of output (tests, replays)."""
        return cls(task=task, stream=stream, lines=(text,),
                   events=frozenset({0}) if is_event else frozenset(), t=time.time() if t is None else t)

    def shown(self) -> Sequence[str]:
        """The lines a live view shows: neither protocol events (shown in their described
        form) nor noise."""
        if not self.events and not self.noise:
            return self.lines
        hidden = self.events | self.noise
        return [line for index, line in enumerate(self.lines) if index not in hidden]

    def records(self) -> Iterator[dict[str, Any]]:
        """One ``task_output`` record a line, for ``--json`` (its format is a line each)."""
        last = len(self.lines) - 1
        for index, text in enumerate(self.lines):
            yield {"type": "task_output", "task": self.task, "stream": self.stream.value, "text": text,
                   "is_event": index in self.events, "partial": self.partial and index == last,
                   "continued": self.continued and index == 0, "t": self.t,
                   "noise": index in self.noise}


@dataclass(frozen=True, kw_only=True)
class TrainerEvent:
    """A protocol event a task emitted."""

    task: str
    event: protocol.Event
    t: float = field(default_factory=time.time)


@dataclass(frozen=True, kw_only=True)
class ProgressUpdate:
    """The run's progress changed (a step, an eval, the chief's restored step, a worker's
    exit): the snapshot to show. Derived from trainer events, so not kept in events.jsonl."""

    progress: ProgressSnapshot
    t: float = field(default_factory=time.time)


@dataclass(frozen=True, kw_only=True)
class Notice:
    """Something the controller wants a person to know. ``about``: what it is about while it
    holds (``host h2``): a later notice about the same says it is over or replaces it, so a
    front end that shows a notice for a while takes the earlier one down then."""

    level: Level
    text: str
    task: str | None = None
    about: str = ""
    t: float = field(default_factory=time.time)


@dataclass(frozen=True, kw_only=True)
class TaskStalled:
    """A running task made no progress for ``seconds`` (the stall watchdog,
    :mod:`tui.core.supervisor.stall`): ``stopped`` when its process is stopped (SIGSTOP),
    ``last_line`` what it last said, ``policy`` what ``on_stall`` does about it."""

    task: str
    seconds: float
    stopped: bool
    last_line: str
    policy: str
    t: float = field(default_factory=time.time)


@dataclass(frozen=True, kw_only=True)
class TaskHint:
    """A task's output (or its exit code) matched a known failure: ``hint`` says in one line
    what probably went wrong and what to do (:mod:`tui.core.hints`). Once per launch."""

    task: str
    hint: str
    t: float = field(default_factory=time.time)


@dataclass(frozen=True, kw_only=True)
class TaskHintCleared:
    """What a :class:`TaskHint` warned about went away (a stalled task progresses again):
    front ends take the hint down; ``reason`` says why."""

    task: str
    reason: str
    t: float = field(default_factory=time.time)


@dataclass(frozen=True, kw_only=True)
class TaskResult:
    """How one task ended, for the summary. ``last_lines`` are its last lines of output;
    ``restarts`` counts automatic restarts by the restart policy; ``hint`` is the first
    known-failure hint (:mod:`tui.core.hints`) of its last launch, or empty."""

    name: str
    state: TaskState
    exit_code: int | None
    reason: str = ""
    restarts: int = 0
    last_lines: tuple[str, ...] = ()
    hint: str = ""


class IncidentKind(Enum):
    """What the controller did about a task that failed mid-run."""

    TASK_RESTART = "task_restart"        # the task alone was started again (a worker)
    CLUSTER_RESTART = "cluster_restart"  # every task was restarted (a ps: it held the model)


@dataclass(frozen=True, kw_only=True)
class Incident:
    """A failure the run recovered from (or tried to). ``global_step`` is the run's step
    when ``task`` failed; ``resumed_step`` is where training went on after the restart
    (the chief's restored step for a cluster restart, the step a worker rejoined at),
    None until then or if it never did."""

    kind: IncidentKind
    task: str
    reason: str
    global_step: int
    resumed_step: int | None = None
    t: float = field(default_factory=time.time)
    #: The task was started again (a restart called off, or cut short by the run's end,
    #: never was: no claim about a rejoin is made then).
    restarted: bool = True

    @property
    def steps_lost(self) -> int | None:
        """Global steps trained before the failure and trained again after it (a cluster
        restart resumes from the last checkpoint)."""
        if self.kind is not IncidentKind.CLUSTER_RESTART or self.resumed_step is None:
            return None
        return max(0, self.global_step - self.resumed_step)

    def describe(self) -> str:
        """One line for people: what failed, what was done, where training resumed. "Did
        not rejoin" only of a task that was restarted and not seen working after it."""
        head = f"{self.task} {self.reason} at step {self.global_step}"
        if self.kind is IncidentKind.CLUSTER_RESTART:
            if self.resumed_step is None:
                return f"{head}: cluster restarted, training did not resume"
            return (f"{head}: cluster restarted, resumed from step {self.resumed_step} "
                    f"({self.steps_lost} steps lost)")
        if not self.restarted:
            return f"{head}: not restarted (the run's training was over first)"
        if self.resumed_step is None:
            return f"{head}: restarted, did not rejoin"
        return f"{head}: restarted, rejoined at step {self.resumed_step}"


@dataclass(frozen=True, kw_only=True)
class RunSummary:
    """The end of a run: what the headless summary prints and ``summary.json`` holds."""

    run_id: str
    run_dir: Path
    outcome: RunOutcome
    reason: str
    started_at: float
    wall_time: float
    global_step: int
    target: int
    final_loss: float | None
    #: Held-out accuracy (evaluations), never a training accuracy.
    final_accuracy: float | None
    tasks: tuple[TaskResult, ...]
    incidents: tuple[Incident, ...] = ()
    #: The training accuracy the workers last reported (Keras' bars, ``tfdist_report``).
    final_train_accuracy: float | None = None
    #: Held-out loss (the last evaluation's: an evaluator, ``Model.evaluate``), never the
    #: training loss of :attr:`final_loss`.
    final_eval_loss: float | None = None

    @property
    def failed_tasks(self) -> tuple[TaskResult, ...]:
        return tuple(t for t in self.tasks if t.state is TaskState.FAILED)


@dataclass(frozen=True, kw_only=True)
class RunStarted:
    """A run began: its id, directory, tasks and training settings."""

    run_id: str
    run_dir: Path
    tasks: tuple[TaskInfo, ...]
    settings: TrainingSettings
    t: float = field(default_factory=time.time)
    #: What the run does, one line (:meth:`~tui.program.base.TaskProgram.describe`).
    description: str = ""
    #: What the run is, as every front end shows it (None: a test's or an old record's).
    facts: RunFacts | None = None


@dataclass(frozen=True)
class HostRow:
    """One remote host as the controller knows it: its address, its state, the tasks it runs,
    what it last did (a step, or why it failed or went out of reach), where its tasks start
    from (None: not known before it is ready) and when the controller last heard from it
    (wall time; None: never yet)."""

    name: str
    address: str
    state: HostState
    detail: str = ""
    tasks: tuple[str, ...] = ()
    pool: HostPool | None = None
    heard: float | None = None


#: Failed hosts named in a progress line; the rest are counted.
NAMED_FAILURES = 3


@dataclass(frozen=True, kw_only=True)
class HostsProgress:
    """Where every remote host's preparation is (sent as steps happen, a few times a second
    at most): ``line`` is what both front ends show."""

    hosts: tuple[HostRow, ...]
    t: float = field(default_factory=time.time)

    def count(self, state: HostState) -> int:
        return sum(1 for h in self.hosts if h.state is state)

    @property
    def line(self) -> str:
        """``hosts: 17/64 ready, 3 connecting, 1 failed (h12: authentication refused: ...)``."""
        parts = [f"{self.count(HostState.READY)}/{len(self.hosts)} ready"]
        parts += [f"{n} {state.value}" for state in (HostState.CONNECTING, HostState.PREPARING,
                                                     HostState.WAITING, HostState.UNREACHABLE,
                                                     HostState.LOST)
                  if (n := self.count(state))]
        failed = [h for h in self.hosts if h.state is HostState.FAILED]
        if failed:
            named = "; ".join(f"{h.name}: {h.detail}" if h.detail else h.name
                              for h in failed[:NAMED_FAILURES])
            more = f"; {len(failed) - NAMED_FAILURES} more" if len(failed) > NAMED_FAILURES else ""
            parts.append(f"{len(failed)} failed ({named}{more})")
        return "hosts: " + ", ".join(parts)


@dataclass(frozen=True, kw_only=True)
class RunFinished:
    """A run ended; every task of it has exited."""

    summary: RunSummary
    t: float = field(default_factory=time.time)


ControllerEvent = Union[RunStarted, TaskStateChanged, TaskOutput, TrainerEvent, ProgressUpdate,
                        Notice, TaskStalled, TaskHint, TaskHintCleared, RunFinished, HostsProgress,
                        HostReach]
