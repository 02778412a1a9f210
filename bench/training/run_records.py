"""What one benchmark run of a 1 ps + N worker cluster is (which side launched it, what it
trained) and what it left for the analyses (each worker's ``step`` events, each process's
exit, a controller's CPU time and the events it handled), with the figures read from it:
its measurement window (:mod:`bench.harness.window`), time to first step, staged start, the
controller's CPU over an interval, the end latency. Launching runs is :mod:`bench.training.runs`.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from enum import Enum

from bench.harness import window as windows
from bench.harness.window import Window
from trainer import protocol
from trainer.settings import TrainingSettings


class Side(str, Enum):
    """How the cluster is launched (see :mod:`bench.training.runs`)."""

    BARE = "bare"
    HEADLESS = "headless"
    APP = "app"
    SEED = "seed"

    @property
    def label(self) -> str:
        """How the report names the side."""
        return {Side.BARE: "bare trainer", Side.HEADLESS: "controller --no-ui",
                Side.APP: "Textual app", Side.SEED: "seed-style"}[self]

    @property
    def is_controller(self) -> bool:
        """Our controller supervises the tasks (it has a run directory and a CPU figure)."""
        return self in (Side.HEADLESS, Side.APP)


@dataclass(frozen=True)
class RunConfig:
    """What is trained, on how many tasks, for how many global steps."""

    model: str = "mlp"
    mode: str = "async"
    steps: int = 1000
    workers: int = 2
    log_every: int = 10
    dataset: str = "digits"

    @property
    def label(self) -> str:
        """``mlp async``."""
        return f"{self.model} {self.mode}"

    def settings(self) -> TrainingSettings:
        """The trainer's settings for this run (the trainer's defaults otherwise)."""
        return TrainingSettings().replace(model=self.model, mode=self.mode, steps=self.steps,
                                          log_every=self.log_every, dataset=self.dataset)

    @property
    def examples_per_global_step(self) -> int:
        """A sync global step applies one batch from every worker; an async one, one batch."""
        batch = self.settings().batch_size
        return batch * (self.workers if self.mode == "sync" else 1)


@dataclass
class TaskRecord:
    """One process of the cluster: its step events (in order) and how it ended."""

    name: str
    steps: list[protocol.Step] = field(default_factory=list)
    exited_at: float | None = None
    exit_code: int | None = None
    #: When it emitted ``loaded``, ``ready``, ``initialized`` (its own timestamps).
    milestones: dict[str, float] = field(default_factory=dict)

    @property
    def is_worker(self) -> bool:
        """A worker task (the ps have no step events)."""
        return self.name.startswith("worker")


@dataclass
class RunRecord:
    """Everything one run left for the analyses. Times are wall-clock (``time.time()``),
    the clock the trainer's events carry."""

    side: Side
    config: RunConfig
    rep: int
    launched_at: float
    #: The :data:`TAG_ENV` value of every process of this run.
    tag: str = ""
    tasks: dict[str, TaskRecord] = field(default_factory=dict)
    #: The controller process (headless, app): when it exited and with which code.
    controller_exited_at: float | None = None
    controller_exit_code: int | None = None
    #: The controller's own CPU seconds (user + system, no children), sampled over time.
    cpu_samples: list[tuple[float, float]] = field(default_factory=list)
    #: When the controller received each trainer event (from its run directory).
    event_times: list[float] = field(default_factory=list)
    #: When the controller started its first task process.
    first_task_started_at: float | None = None
    #: Why the run failed; empty when it did what it should.
    failure: str = ""

    @property
    def ok(self) -> bool:
        """The run did what it should (its figures count)."""
        return not self.failure

    @property
    def workers(self) -> list[TaskRecord]:
        """The worker tasks, in order."""
        return [t for t in self.tasks.values() if t.is_worker]


# -- what a run shows -----------------------------------------------------------------------


def warm_start(record: RunRecord) -> tuple[float, int] | None:
    """(time, global step) at which the run's window opens (:func:`bench.harness.window.warm_point`);
    None until every one of the configured workers is warm."""
    if len(record.workers) < record.config.workers:
        return None
    warm = windows.warm_point([task.steps for task in record.workers])
    return None if warm is None else (warm.t, warm.global_step)


def window(record: RunRecord) -> Window | None:
    """The run's steady-state window (:func:`bench.harness.window.measure`), or None if it has
    none worth measuring."""
    if len(record.workers) < record.config.workers:
        return None
    return windows.measure([task.steps for task in record.workers])


def first_steps(record: RunRecord) -> dict[str, float]:
    """Seconds from launch to each worker's first training step."""
    return {t.name: t.steps[0].t - record.launched_at for t in record.workers if t.steps}


def staged_handoffs(record: RunRecord) -> float | None:
    """A controller's staged start beyond the tasks' own start-up: from the moment every
    task had reported ``loaded`` (imports, data and graph done, waiting for ``go``) until
    every task reported ``ready``. None unless every task reported both."""
    tasks = list(record.tasks.values())
    if not tasks or any({"loaded", "ready"} - set(t.milestones) for t in tasks):
        return None
    return max(t.milestones["ready"] for t in tasks) - max(t.milestones["loaded"] for t in tasks)


def controller_cpu(record: RunRecord, start: float, end: float) -> float | None:
    """The controller's CPU seconds between two instants (interpolated between samples)."""
    samples = record.cpu_samples
    if len(samples) < 2 or samples[0][0] > start or samples[-1][0] < end:
        return None
    return _interpolate(samples, end) - _interpolate(samples, start)


def _interpolate(samples: list[tuple[float, float]], at: float) -> float:
    for (t0, v0), (t1, v1) in itertools.pairwise(samples):
        if t0 <= at <= t1:
            return v0 if t1 == t0 else v0 + (v1 - v0) * (at - t0) / (t1 - t0)
    return samples[-1][1]


def end_seconds(record: RunRecord) -> float | None:
    """Seconds from the last global step until every process has exited: each task for a
    bare run, the controller itself (which waits for every task) for a controller run."""
    steps = [s.t for task in record.workers for s in task.steps]
    if not steps:
        return None
    if record.side.is_controller:
        exits = [record.controller_exited_at]
    else:
        exits = [t.exited_at for t in record.tasks.values()]
    if any(e is None for e in exits):
        return None
    return max(e for e in exits if e is not None) - max(steps)
