"""A ps whose link carries far less than the placement needs: a slow or capped link.

Each step of the built-in trainer reads every variable from its ps and sends a gradient of
the same size back, so a ps holding ``B`` bytes moves ``B x 2 x steps/s``
(:mod:`tui.core.traffic`). A link capped or congested below that holds every step back:
nothing fails and nothing stalls, the run only slows down, and the ps's traffic falls with
its step rate. So the need is measured against the step rate this run kept before (the
median of its earlier calm windows), not against the current one, which the slow link
itself set.

Over the last :data:`WINDOW` seconds of traffic samples, a ps that carried under
1/:data:`SLOW_FACTOR` of what its placed bytes need at that rate, in each half of them, gets a
hint naming both figures, while every task runs and every worker steps (a stall, a SIGSTOP, a
cut host or a restart stops a worker outright, and other notices tell of those) and the ps's
counters were read in each half of the window (its host may not answer a sample); the hint is
taken back once the ps carries at least 1/:data:`CLEAR_FACTOR` of the need again. Only where
the placement predicts the traffic (the built-in trainer): a user's program's bytes per step
are not known.
"""

from __future__ import annotations

import statistics
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

from trainer import protocol
from tui.common.units import format_rate
from tui.core.events import (
    ControllerEvent,
    Level,
    Notice,
    ProgressUpdate,
    RunFinished,
    RunStarted,
    TaskHint,
    TaskHintCleared,
    TaskStalled,
    TaskStateChanged,
    TrainerEvent,
)
from tui.core.task_state import TaskState
from tui.core.traffic import TrafficUpdate, predicts_traffic

#: Seconds of samples one judgement looks at: a checkpoint or a busy moment is shorter.
WINDOW = 10.0
#: A ps is slow when it carries under 1/SLOW_FACTOR of its need. The step rate of a calm run
#: on this 2-core machine swung 2.5x between 10 s windows (150-380 steps/s); a 2 Mbit/s cap of
#: the ps's link cut it 20x (to ~10 steps/s, 0.47 MB/s both ways).
SLOW_FACTOR = 5.0
#: A slow ps is well again once it carries 1/CLEAR_FACTOR of its need (not at once above
#: 1/SLOW_FACTOR: a hint must not flicker at the edge).
CLEAR_FACTOR = 2.0
#: Calm windows a run must have kept before its rate is the reference, and how many recent
#: ones the reference is the median of (a long run's rate may drift).
REFERENCE_WINDOWS = 2
KEPT_WINDOWS = 30


@dataclass(frozen=True)
class SlowLink:
    """One ps's link, judged slow: what it carried and what the placement needs of it."""

    task: str
    carried_per_sec: float
    needed_per_sec: float
    #: The run's earlier step rate the need is figured at.
    steps_per_sec: float
    #: How long the figures were measured over.
    seconds: float

    def text(self) -> str:
        """The hint, with both figures."""
        return (f"{self.task}'s link carried {format_rate(self.carried_per_sec)} over the last "
                f"{self.seconds:.0f} s; the placement at this "
                f"run's earlier {self.steps_per_sec:.0f} steps/s needs ~{format_rate(self.needed_per_sec)}: "
                f"a slow or capped link? check the link between {self.task}'s host and the workers "
                f"(tc qdisc show, iperf3)")


@dataclass(frozen=True)
class _Point:
    """A traffic sample with what the workers had done by then."""

    t: float
    global_step: int
    ps_totals: tuple[int, ...]
    local_steps: tuple[tuple[str, int], ...]


class SlowLinkWatch:
    """Judges each ps's link from the traffic monitor's samples and the supervisor's events,
    and publishes a :class:`~tui.core.events.TaskHint` and a notice when one turns slow, a
    :class:`~tui.core.events.TaskHintCleared` and a notice when it carries enough again.
    Subscribe :meth:`handle` to the supervisor and :meth:`sample` to the traffic monitor;
    ``publish`` sends an event to the run (both front ends, the run directory)."""

    def __init__(self, publish: Callable[[ControllerEvent], None], window: float = WINDOW) -> None:
        self._publish = publish
        self._window = window
        self._reset()

    def _reset(self) -> None:
        self._states: dict[str, TaskState] = {}
        self._placement: protocol.Placement | None = None
        self._target = 0
        self._steps: dict[str, int] = {}
        self._points: deque[_Point] = deque()
        self._calm_rates: deque[float] = deque(maxlen=KEPT_WINDOWS)
        self._calm_at: float | None = None
        self._over = False
        #: Each ps judged slow now, as its hint said.
        self.slow: dict[str, SlowLink] = {}

    def handle(self, event: ControllerEvent) -> None:
        """The supervisor's sink."""
        if isinstance(event, RunStarted):
            self._reset()
            self._states = {info.name: TaskState.PENDING for info in event.tasks}
        elif isinstance(event, TaskStateChanged):
            self._states[event.task] = event.new
            self._points.clear()  # a window spans no start, stop or restart
        elif isinstance(event, TaskStalled):
            self._points.clear()
        elif isinstance(event, ProgressUpdate):
            self._target = event.progress.target
            for worker in event.progress.workers:
                self._steps[worker.task] = worker.local_step
        elif isinstance(event, TrainerEvent) and isinstance(event.event, protocol.Placement):
            if self._placement is None:
                self._placement = event.event
        elif isinstance(event, RunFinished):
            self._over = True

    def sample(self, update: TrafficUpdate) -> None:
        """The traffic monitor's listener: judge the window that ends with this sample."""
        sample = update.sample
        if self._over or update.final or sample is None:
            return
        point = _Point(sample.t, sample.global_step, tuple(ps.total for ps in sample.ps),
                       tuple(sorted(self._steps.items())))
        self._points.append(point)
        while len(self._points) > 2 and self._points[1].t <= point.t - self._window:
            self._points.popleft()
        start = self._points[0]
        span = point.t - start.t
        if span < 0.8 * self._window or not self._calm(start, point):
            return
        assert self._placement is not None  # _calm checked it
        rate = (point.global_step - start.global_step) / span
        carried = [(end - begin) / span for begin, end in zip(start.ps_totals, point.ps_totals, strict=True)]
        names = [ps.task for ps in sample.ps]
        middle = self._middle(start, point)
        if len(self._calm_rates) >= REFERENCE_WINDOWS:
            reference = statistics.median(self._calm_rates)
            for index, (name, placed) in enumerate(zip(names, self._placement.ps_bytes, strict=False)):
                # Bytes counted in each half: a half without any is a host whose counters were
                # not read then (a slow link still carries some), not a link to blame.
                if start.ps_totals[index] < middle.ps_totals[index] < point.ps_totals[index]:
                    need = placed * 2 * reference
                    first, last = ((b.ps_totals[index] - a.ps_totals[index]) / (b.t - a.t)
                                   for a, b in ((start, middle), (middle, point)))
                    self._judge(SlowLink(name, carried[index], need, reference, span),
                                SlowLink(name, last, need, reference, point.t - middle.t), max(first, last))
        if not self.slow and (self._calm_at is None or point.t - self._calm_at >= self._window):
            self._calm_rates.append(rate)
            self._calm_at = point.t

    def _calm(self, start: _Point, end: _Point) -> bool:
        """Whether the window tells of the links alone: the placement predicts the traffic,
        the target is ahead, every task runs and every worker stepped in each half of it."""
        if not predicts_traffic(self._placement) or not 0 < end.global_step < self._target:
            return False
        if not self._states or any(state is not TaskState.RUNNING for state in self._states.values()):
            return False
        # In each half: a worker stopped for the window's last seconds stepped in it too.
        middle = self._middle(start, end)
        return all(_stepped(a, b) for a, b in ((start, middle), (middle, end)))

    def _middle(self, start: _Point, end: _Point) -> _Point:
        return min(self._points, key=lambda p: abs(p.t - (start.t + end.t) / 2))

    def _judge(self, link: SlowLink, latest: SlowLink, busier_half: float) -> None:
        """Raise or take back the hint of ``link`` (the whole window; ``latest``: its second
        half). Raised only when both halves carried too little (``busier_half``: the more of
        the two), a dip of a few seconds being no slow link, with the second half's figure:
        the window's first seconds may come from before the link slowed down."""
        if link.needed_per_sec <= 0:
            return
        about = f"link {link.task}"
        if link.task not in self.slow and busier_half < link.needed_per_sec / SLOW_FACTOR:
            self.slow[link.task] = latest
            self._publish(TaskHint(task=link.task, hint=latest.text()))
            self._publish(Notice(level=Level.WARNING, text=latest.text(), task=link.task, about=about))
        elif link.task in self.slow and link.carried_per_sec >= link.needed_per_sec / CLEAR_FACTOR:
            del self.slow[link.task]
            again = (f"its link carried {format_rate(link.carried_per_sec)} over the last "
                     f"{link.seconds:.0f} s (the placement needs ~{format_rate(link.needed_per_sec)})")
            self._publish(TaskHintCleared(task=link.task, reason=again))
            self._publish(Notice(level=Level.INFO, text=f"{link.task}'s link is no longer slow: {again}",
                                 task=link.task, about=about))


def _stepped(start: _Point, end: _Point) -> bool:
    """Every worker known at ``end`` made a step since ``start``."""
    before = dict(start.local_steps)
    return bool(end.local_steps) and all(step > before.get(task, step) for task, step in end.local_steps)
