"""Training progress folded from trainer events: global step, throughput, loss, accuracy,
ETA.

Pure bookkeeping, no I/O, and the only place these rules live (such as "the chief's
``initialized`` step wins"): the supervisor keeps one tracker per run and publishes its
snapshots as :class:`~tui.core.events.ProgressUpdate` events; front ends only render them.
"""

from __future__ import annotations

import dataclasses
import math
from collections import deque
from dataclasses import dataclass

from trainer import protocol
from tui.common.quick import maker

#: How many recent (time, global step) points the ETA is computed from.
ETA_POINTS = 30
#: Reports between two sums of the workers' rates from scratch (see ProgressTracker).
RESUM_EVERY = 1024
#: A worker's rate is its last report's only while its next one is due: once it has not
#: reported a step for this many times its usual gap between reports (and at least
#: :data:`RATE_STALE_MIN` seconds), its rate is unknown. (A ps cut off: the workers stop
#: stepping, and their last rate, 162 ex/s, was shown 20 s into the cut.)
RATE_STALE_GAPS = 4.0
RATE_STALE_MIN = 5.0
#: Weight of the newest gap in a worker's usual gap between step reports (a moving average).
GAP_WEIGHT = 0.3


@dataclass(frozen=True)
class WorkerProgress:
    """The latest ``step`` report of one worker. Under TF2's coordinator the coordinator's
    entry (``coordinates``) holds the whole cluster's rate, and each worker's entry the part
    of it the coordinator saw that worker run (``via`` names the coordinator); only the
    coordinator's counts in the total. ``examples_per_sec`` None: not known now (no step
    reported for a while: see :data:`RATE_STALE_GAPS`)."""

    task: str
    global_step: int
    local_step: int
    examples_per_sec: float | None
    loss: float | None
    coordinates: bool = False
    via: str = ""


#: A worker's progress made at once, on each of its steps (tui.common.quick).
_make_worker = maker(WorkerProgress)


@dataclass(frozen=True)
class ProgressSnapshot:
    """Progress of the whole run at one moment. ``examples_per_sec`` sums the workers still
    running whose rate is known (each reported a step lately); ``loss`` is the most recently
    reported one."""

    global_step: int
    target: int
    examples_per_sec: float
    workers: tuple[WorkerProgress, ...]
    loss: float | None
    #: Held-out accuracy (``eval`` events: the built-in trainer's chief, an evaluator).
    accuracy: float | None
    #: Seconds to the target at the recent global-step rate; None when unknown.
    eta_seconds: float | None = None
    #: The recent global-step rate, the rate to show when nothing says examples per step.
    steps_per_sec: float | None = None
    #: The training accuracy the workers last reported with a step (never an evaluation's).
    train_accuracy: float | None = None
    #: The loss of the latest evaluation (kept apart from the training loss).
    eval_loss: float | None = None
    #: Some worker of the run reported examples/sec: the run's rate is in examples/s even
    #: once none trains (its last worker done, or restarting), never then the global step's.
    counts_examples: bool = False

    @classmethod
    def empty(cls, target: int) -> ProgressSnapshot:
        """Progress before any worker reported."""
        return cls(global_step=0, target=target, examples_per_sec=0.0, workers=(), loss=None,
                   accuracy=None)

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
        self._counts_examples = False
        self._workers: dict[str, WorkerProgress] = {}
        #: The workers' names in the order snapshots list them, made again only when a worker
        #: comes or goes (a snapshot per step must not sort every worker).
        self._order: tuple[str, ...] | None = ()
        #: The workers' examples/sec summed as they report (not over every worker per step),
        #: summed afresh when a worker comes or goes and every RESUM_EVERY reports, so that
        #: float rounding cannot pile up.
        self._rate_total = 0.0
        self._since_resum = 0
        self._loss: float | None = None
        self._accuracy: float | None = None
        self._final_loss: float | None = None
        #: The chief said it is done: the loss shown from then on is the run's final one.
        self._chief_done = False
        self._final_accuracy: float | None = None
        self._history: deque[tuple[float, int]] = deque(maxlen=ETA_POINTS)
        self.placement: protocol.Placement | None = None
        self._train_accuracy: float | None = None
        self._eval_loss: float | None = None
        #: Per coordinator: its workers' functions finished so far, and each one's part of
        #: the latest interval (what its rate is split by).
        self._by_worker: dict[str, tuple[tuple[int, ...], tuple[float, ...]]] = {}
        #: Per worker that reports steps: when its latest came, and its usual gap between them.
        self._stepped_at: dict[str, float] = {}
        self._gaps: dict[str, float] = {}

    def update(self, task: str, event: protocol.Event, t: float) -> bool:
        """Take one event emitted by ``task`` and received at ``t``; return whether the
        progress changed (a new snapshot is due)."""
        if isinstance(event, protocol.Step):
            self._global_step = max(self._global_step, event.global_step)
            if event.target > 0:
                self._target = event.target
            before = self._workers.get(task)
            if before is None:
                self._order = None
            else:
                self._rate_total -= before.examples_per_sec or 0.0
            self._note_step(task, t)
            self._rate_total += event.examples_per_sec
            self._counts_examples = self._counts_examples or event.examples_per_sec > 0
            self._since_resum += 1
            self._workers[task] = _make_worker(task=task, global_step=event.global_step,
                                               local_step=event.local_step,
                                               examples_per_sec=event.examples_per_sec, loss=event.loss,
                                               coordinates=event.coordinator, via="")
            if event.coordinator:
                self._split(task, event)
            if event.loss is not None:
                self._loss = event.loss
            if event.accuracy is not None:
                self._train_accuracy = event.accuracy
            self._history.append((t, self._global_step))
        elif isinstance(event, protocol.Initialized) and event.is_chief:
            # The chief read the step from the ps tasks: after a cluster restart that is the
            # restored checkpoint's step, lower than what the lost cluster had reached.
            # Another worker's view of it is not authoritative.
            self._global_step = event.global_step
            self._history.clear()
        elif isinstance(event, protocol.Eval):
            self._global_step = max(self._global_step, event.global_step)
            if event.accuracy is not None:
                self._accuracy = event.accuracy
            if event.loss is not None:
                self._eval_loss = event.loss
        elif isinstance(event, protocol.Done):
            self._global_step = max(self._global_step, event.global_step)
            # The chief's final numbers are the run's; another worker's fill in only gaps.
            is_chief = event.role == "worker" and event.index == 0
            if event.loss is not None and (is_chief or self._final_loss is None):
                self._final_loss = event.loss
            self._chief_done = self._chief_done or is_chief
            if event.accuracy is not None and (is_chief or self._final_accuracy is None):
                self._final_accuracy = event.accuracy
        elif isinstance(event, protocol.Placement):
            self.placement = event  # the latest: every screen shows it (more variables, later)
            return False
        else:
            return False
        return True

    def _note_step(self, task: str, t: float) -> None:
        """Keep when ``task`` stepped, and its usual gap between steps."""
        last = self._stepped_at.get(task)
        if last is not None and t > last:
            gap = self._gaps.get(task)
            self._gaps[task] = t - last if gap is None else gap + GAP_WEIGHT * (t - last - gap)
        self._stepped_at[task] = t

    def _stale_at(self, task: str) -> float:
        """When ``task``'s rate stops being known unless it reports another step."""
        wait = max(RATE_STALE_MIN, RATE_STALE_GAPS * self._gaps.get(task, 0.0))
        return self._stepped_at.get(task, -math.inf) + wait

    def next_stale_at(self, now: float) -> float | None:
        """The next moment after ``now`` at which a worker's rate goes unknown (a new snapshot
        is due then), or None when none will."""
        times = [at for task in self._workers if task in self._stepped_at
                 if (at := self._stale_at(task)) > now]
        return min(times, default=None)

    def _split(self, coordinator: str, event: protocol.Step) -> None:
        """The coordinator's rate split among the workers by the functions each finished
        since its previous report (the previous split while none moved)."""
        before, parts = self._by_worker.get(coordinator, ((), ()))
        counts = event.by_worker
        if counts:
            moved = [count - (before[i] if i < len(before) else 0) for i, count in enumerate(counts)]
            total = sum(m for m in moved if m > 0)
            if total > 0:
                parts = tuple(max(m, 0) / total for m in moved)
            self._by_worker[coordinator] = (counts, parts)
        for index, part in enumerate(parts):
            name = f"worker{index}"
            if name not in self._workers:
                self._order = None
            self._workers[name] = WorkerProgress(name, event.global_step, event.local_step,
                                                 event.examples_per_sec * part, None, via=coordinator)

    @property
    def global_step(self) -> int:
        """The run's step so far."""
        return self._global_step

    def worker_exited(self, task: str) -> bool:
        """A worker stopped contributing throughput; return whether the progress changed."""
        self._stepped_at.pop(task, None)  # (a restarted worker's first gap is not a gap)
        self._gaps.pop(task, None)
        if self._workers.pop(task, None) is None:
            return False
        if self._by_worker.pop(task, None) is not None:  # a coordinator: its split goes too
            for name in [w.task for w in self._workers.values() if w.via == task]:
                del self._workers[name]
        self._order = None
        return True

    def steps_per_sec(self, now: float | None = None) -> float | None:
        """The global step's rate over the recent step reports (None before two, and once no
        worker trains, or, at ``now``, none has reported a step lately: a stopped run's last
        rate, and an ETA from it, are no longer true)."""
        if len(self._history) < 2 or not self._workers:
            return None
        if now is not None and all(self._stale_at(task) <= now for task in self._stepped_at
                                   if task in self._workers):
            return None
        (t0, s0), (t1, s1) = self._history[0], self._history[-1]
        if t1 <= t0 or s1 <= s0:
            return None
        return (s1 - s0) / (t1 - t0)

    def eta_seconds(self, now: float | None = None) -> float | None:
        """Seconds to the target at the recent global-step rate."""
        rate = self.steps_per_sec(now)
        if rate is None or self._target <= self._global_step:
            return None
        return (self._target - self._global_step) / rate

    def snapshot(self, now: float | None = None) -> ProgressSnapshot:
        """The progress so far; at ``now`` (the clock of :meth:`update`'s times), a worker
        that has not reported a step lately has no rate (None), and none is summed for it."""
        if self._order is None:
            # (len, name) sorts worker2 before worker10.
            self._order = tuple(sorted(self._workers, key=lambda name: (len(name), name)))
            self._since_resum = RESUM_EVERY
        workers = tuple(map(self._workers.__getitem__, self._order))
        if self._since_resum >= RESUM_EVERY:
            # A coordinator's split among its workers (``via``) is in its own rate already.
            self._rate_total = math.fsum(w.examples_per_sec or 0.0 for w in workers if not w.via)
            self._since_resum = 0
        rate_total = self._rate_total
        if now is not None and any(self._stale_at(w.via or w.task) <= now for w in workers):
            workers = tuple(w if self._stale_at(w.via or w.task) > now
                            else dataclasses.replace(w, examples_per_sec=None) for w in workers)
            rate_total = math.fsum(w.examples_per_sec or 0.0 for w in workers if not w.via)
        return ProgressSnapshot(
            global_step=self._global_step,
            target=self._target,
            examples_per_sec=rate_total,
            workers=workers,
            # Once the chief is done, the loss the run ended with (the summary's): another
            # worker's last step, reported after the chief's, left the app's Throughput pane
            # at its loss while headless's summary and the Runs pane said the chief's.
            loss=self.final_loss if self._chief_done else self._loss,
            accuracy=self._accuracy,
            eta_seconds=self.eta_seconds(now),
            steps_per_sec=self.steps_per_sec(now),
            train_accuracy=self._train_accuracy,
            eval_loss=self._eval_loss,
            counts_examples=self._counts_examples,
        )

    @property
    def final_loss(self) -> float | None:
        """The loss the run ended with: the chief's ``done`` report, else the last step's."""
        return self._final_loss if self._final_loss is not None else self._loss

    @property
    def final_accuracy(self) -> float | None:
        """The held-out accuracy the run ended with: the chief's ``done`` report, else the
        last eval (never a training accuracy)."""
        return self._final_accuracy if self._final_accuracy is not None else self._accuracy

    @property
    def final_eval_loss(self) -> float | None:
        """The held-out loss last evaluated (never a training loss)."""
        return self._eval_loss

    @property
    def final_train_accuracy(self) -> float | None:
        """The training accuracy last reported with a step."""
        return self._train_accuracy
