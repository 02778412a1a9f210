"""What a run knows, computed once in the core and only formatted by the front ends: what it
runs and with which of the settings it honours, whether it has a target, and at each moment
the figures worth showing (step, rate and its unit, each task's rate, training vs held-out
metrics). Headless and the app both render :class:`Figures`; neither derives a figure of its
own, so they cannot disagree (tests/test_run_facts.py feeds both the same events)."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from trainer.settings import TrainingSettings
from tui.core.progress import ProgressSnapshot
from tui.program.base import Setting, TaskProgram

#: The settings a run may be driven by, in the order they are shown.
_SHOWN = (Setting.MODE, Setting.PARTITIONS, Setting.PLACEMENT, Setting.FUSE)


class RateUnit(Enum):
    """What a rate counts."""

    EXAMPLES = "ex/s"   # examples per second: the program's batch size (or its lines) says them
    STEPS = "steps/s"   # global steps per second: all that is known without a batch size


@dataclass(frozen=True)
class RunFacts:
    """What a run is, fixed at its start (:class:`~tui.core.events.RunStarted` carries it).
    ``settings``: the driven settings the program honours, as shown (``async``,
    ``partitions 2``); ``target``: the step it trains to, 0 when it never said."""

    description: str
    settings: tuple[str, ...]
    target: int
    #: The driven settings the program honours (its command uses their placeholders).
    honoured: tuple[Setting, ...] = ()
    #: What one step is: a batch (the optimizer's iterations) for every program we read.
    step_unit: str = "batches"

    @classmethod
    def of(cls, program: TaskProgram, settings: TrainingSettings) -> RunFacts:
        """The facts of a run of ``program`` with ``settings``."""
        honoured = tuple(s for s in _SHOWN if program.honours(s))
        return cls(description=program.describe(settings),
                   settings=tuple(setting_text(settings, s) for s in honoured),
                   target=program.progress_target(settings), honoured=honoured)


def setting_text(settings: TrainingSettings, setting: Setting) -> str:
    """One setting as the status bar and the header show it."""
    value = getattr(settings, setting.value)
    if setting is Setting.FUSE:
        return "fused" if value else "unfused"
    text = str(getattr(value, "value", value))
    return f"partitions {text}" if setting is Setting.PARTITIONS else text


@dataclass(frozen=True)
class TaskRate:
    """One task's rate (None: not known now, no step reported lately). ``coordinates``: TF2's
    coordinator, whose rate is the cluster's."""

    task: str
    rate: float | None
    coordinates: bool = False


@dataclass(frozen=True)
class Figures:
    """The figures of a run at one moment, as every front end shows them. ``target`` None:
    no target (no ``/ N`` and no percentage); ``rate`` None: nothing measured yet, or no
    worker's rate known now (none reported a step lately: never the last rate, nor a 0 that
    reads as a stall); ``accuracy``: held-out (evaluations) only."""

    step: int
    target: int | None
    eta_seconds: float | None
    rate: float | None
    unit: RateUnit
    tasks: tuple[TaskRate, ...]
    loss: float | None
    train_accuracy: float | None
    accuracy: float | None
    eval_loss: float | None

    @property
    def percent(self) -> int | None:
        """How much of the target is done, in whole percent rounded down: 100 only once the
        target is reached (1,999 of 2,000 is 99%, never a rounded 100% while the run goes
        on), and no more past it (async workers may each apply a last step past the target:
        2,001 of 2,000 is the true global step, and 100%). None without a target."""
        if self.target is None:
            return None
        return 100 * min(self.step, self.target) // self.target

    @property
    def rate_text(self) -> str:
        """``24,615 ex/s``, ``12.5 steps/s``, or empty while nothing was measured."""
        if self.rate is None:
            return ""
        return f"{self.rate:,.0f} {self.unit.value}" if self.unit is RateUnit.EXAMPLES \
            else f"{self.rate:,.1f} {self.unit.value}"


def counts_examples(snapshot: ProgressSnapshot) -> bool:
    """Whether the run's rates are examples/s (a task said some), else global steps/s: then
    no task has an examples/s of its own to show."""
    # (Once a worker said examples/sec, the unit stays: the run's end, its workers gone, read
    # "267.0 steps/s" and the examples/sec chart became a global steps/sec one.)
    return snapshot.examples_per_sec > 0 or snapshot.counts_examples


def figures(snapshot: ProgressSnapshot) -> Figures:
    """The figures of ``snapshot``: examples/s when any task reported some, else the global
    step's rate; each task's examples/s (a coordinator's is the cluster's, its workers' are
    its parts)."""
    examples = counts_examples(snapshot)
    rate = snapshot.examples_per_sec if examples else snapshot.steps_per_sec
    tasks = tuple(TaskRate(w.task, w.examples_per_sec, w.coordinates) for w in snapshot.workers) \
        if examples else ()
    target = snapshot.target if snapshot.target > 0 else None
    return Figures(step=snapshot.global_step, target=target,
                   eta_seconds=snapshot.eta_seconds if target else None, rate=rate or None,
                   unit=RateUnit.EXAMPLES if examples else RateUnit.STEPS, tasks=tasks,
                   loss=snapshot.loss, train_accuracy=snapshot.train_accuracy,
                   accuracy=snapshot.accuracy, eval_loss=snapshot.eval_loss)
