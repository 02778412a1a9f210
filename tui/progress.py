"""Training progress folded from trainer events: global step, throughput, loss, accuracy.

Pure bookkeeping, no I/O: the supervisor keeps one per run for the summary, and front ends
read its snapshots for progress lines and charts.
"""

from __future__ import annotations

from dataclasses import dataclass

from trainer import protocol


@dataclass(frozen=True)
class WorkerProgress:
    """The latest ``step`` report of one worker."""

    task: str
    global_step: int
    local_step: int
    examples_per_sec: float
    loss: float | None


@dataclass(frozen=True)
class ProgressSnapshot:
    """Progress of the whole run at one moment. ``examples_per_sec`` sums the workers still
    running; ``loss`` is the most recently reported one."""

    global_step: int
    target: int
    examples_per_sec: float
    workers: tuple[WorkerProgress, ...]
    loss: float | None
    accuracy: float | None

    @property
    def fraction(self) -> float | None:
        """Done fraction in [0, 1], or None when the target is unknown."""
        if self.target <= 0:
            return None
        return min(1.0, self.global_step / self.target)


class ProgressTracker:
    """Folds protocol events into the run's progress."""

    def __init__(self, target: int) -> None:
        self._target = target
        self._global_step = 0
        self._workers: dict[str, WorkerProgress] = {}
        self._loss: float | None = None
        self._accuracy: float | None = None
        self._final_loss: float | None = None
        self._final_accuracy: float | None = None
        self.placement: protocol.Placement | None = None

    def update(self, task: str, event: protocol.Event) -> None:
        """Take one event emitted by ``task``."""
        if isinstance(event, protocol.Step):
            self._global_step = max(self._global_step, event.global_step)
            if event.target > 0:
                self._target = event.target
            self._workers[task] = WorkerProgress(task, event.global_step, event.local_step,
                                                 event.examples_per_sec, event.loss)
            if event.loss is not None:
                self._loss = event.loss
        elif isinstance(event, protocol.Initialized) and event.is_chief:
            # The chief read the step from the ps tasks: after a cluster restart that is the
            # restored checkpoint's step, lower than what the lost cluster had reached.
            self._global_step = event.global_step
        elif isinstance(event, protocol.Eval):
            self._global_step = max(self._global_step, event.global_step)
            self._accuracy = event.accuracy
        elif isinstance(event, protocol.Done):
            self._global_step = max(self._global_step, event.global_step)
            # The chief's final numbers are the run's; another worker's fill in only gaps.
            is_chief = event.role == "worker" and event.index == 0
            if event.loss is not None and (is_chief or self._final_loss is None):
                self._final_loss = event.loss
            if event.accuracy is not None and (is_chief or self._final_accuracy is None):
                self._final_accuracy = event.accuracy
        elif isinstance(event, protocol.Placement) and self.placement is None:
            self.placement = event

    def worker_exited(self, task: str) -> None:
        """A worker stopped contributing throughput."""
        self._workers.pop(task, None)

    def snapshot(self) -> ProgressSnapshot:
        # (len, name) sorts worker2 before worker10.
        workers = tuple(sorted(self._workers.values(), key=lambda w: (len(w.task), w.task)))
        return ProgressSnapshot(
            global_step=self._global_step,
            target=self._target,
            examples_per_sec=sum(w.examples_per_sec for w in workers),
            workers=workers,
            loss=self._loss,
            accuracy=self._accuracy,
        )

    @property
    def final_loss(self) -> float | None:
        """The loss the run ended with: the chief's ``done`` report, else the last step's."""
        return self._final_loss if self._final_loss is not None else self._loss

    @property
    def final_accuracy(self) -> float | None:
        """The accuracy the run ended with: the chief's ``done`` report, else the last eval."""
        return self._final_accuracy if self._final_accuracy is not None else self._accuracy
