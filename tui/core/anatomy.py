"""Why a step takes what it takes, for both front ends: each worker's latest sampled step
anatomy (:class:`trainer.protocol.StepAnatomy`, from TensorFlow's step statistics), and the
workers whose step time stays well above their peers' (stragglers), each named with its
anatomy beside a typical worker's. The app's Throughput pane and headless (``--anatomy``)
fold the same trainer events into an :class:`AnatomyBoard` and show its lines as they are.

A straggler: over its last :data:`WINDOW` step reports (each the mean step time since the
one before), the median step time of a worker is above :data:`SLOW_FACTOR` times the median
of the other workers' medians; it keeps the name until that falls under :data:`KEEP_FACTOR`
times. Each needs :data:`WINDOW` reports first, so a worker is not named for its first slow
steps, nor with no peer to compare with. A TF2 coordinator's workers report no steps: each
of its samples gives every worker's mean time of a function, and those are judged alike."""

from __future__ import annotations

import statistics
from bisect import bisect_left, insort
from collections import deque
from dataclasses import dataclass, field

from trainer import protocol
from tui.core.describe import coordinator_text, part_name

#: Step reports per worker that a straggler is judged over (a report a second at most).
WINDOW = 8
#: How much slower than its peers' typical step a worker's typical step must be.
SLOW_FACTOR = 1.5
#: A named straggler keeps its name until its typical step is back under this factor of its
#: peers': one threshold both ways named and cleared a worker hovering around it at every
#: other judgement (seen: a worker 1.5-1.6x its peer's step, named and cleared ten times in
#: 90 s).
KEEP_FACTOR = 1.25
#: Sampled steps per worker that the run's typical step is the median of.
TYPICAL_SAMPLES = 16
#: Below this share of a step, compute is not what a step is waiting on, and the run's
#: summary says where the step went instead.
COMPUTE_BOUND = 0.5


@dataclass(frozen=True)
class TypicalStep:
    """The run's typical sampled step over every worker: the median step time, and each part's
    mean share (largest first; means, so that the shares add up to the step as each sample's
    do), over ``samples`` sampled steps of ``workers`` workers."""

    samples: int
    workers: int
    seconds: float
    shares: tuple[tuple[str, float], ...]
    #: The median of the workers' recent step reports (untraced steps: a traced step is
    #: longer by its tracing); None when no worker reported a step time.
    untraced_seconds: float | None = None
    #: The workers named stragglers now: a slower host of theirs is the cause the line must
    #: not deny.
    stragglers: tuple[str, ...] = ()

    @property
    def compute(self) -> float:
        return dict(self.shares).get("compute", 0.0)


@dataclass(frozen=True)
class Straggler:
    """A worker named as slow: its typical step time, a typical peer's, and the peer."""

    task: str
    step_seconds: float
    typical_seconds: float
    typical_task: str
    #: What the times are of: a worker's step, or a TF2 coordinator's function on a worker.
    unit: str = "a step"


@dataclass
class AnatomyBoard:
    """Each worker's latest anatomy and recent step times; what both screens show."""

    latest: dict[str, protocol.StepAnatomy] = field(default_factory=dict)
    #: Each worker's recent samples, each with how many step reports of its worker had come
    #: before it (which tells whether it falls in the window of the reports' median).
    recent: dict[str, deque[tuple[int, protocol.StepAnatomy]]] = field(default_factory=dict)
    step_times: dict[str, deque[float]] = field(default_factory=dict)
    reports: dict[str, int] = field(default_factory=dict)  # step reports per worker, ever
    stragglers: tuple[Straggler, ...] = ()
    _named: frozenset[str] = frozenset()  # the stragglers :meth:`news` has said
    _typical: dict[str, float] = field(default_factory=dict)  # each full window's median
    #: ``_typical``'s entries as (seconds, when first seen, task), sorted: a worker is judged
    #: against its peers' median and nearest peer found in it by bisection, not in a pass
    #: over every worker (240 workers' reports, each judged so, held the app for seconds).
    _ranked: list[tuple[float, int, str]] = field(default_factory=list)
    _seen: dict[str, int] = field(default_factory=dict)  # each task's place in ``_typical``

    def fold(self, task: str, event: protocol.Event) -> bool:
        """Take one trainer event; whether what the board shows changed."""
        if isinstance(event, protocol.StepAnatomy):
            self.latest[task] = event
            if not event.coordinator:
                self.recent.setdefault(task, deque(maxlen=TYPICAL_SAMPLES)).append(
                    (self.reports.get(task, 0), event))
            else:  # each worker's mean function time: the only time of a worker it knows
                for index, seconds in enumerate(event.by_worker):
                    if seconds:
                        self._took(f"worker{index}", seconds, "a function")
            return True
        if isinstance(event, protocol.Step) and not event.coordinator and event.step_time > 0:
            return self._took(task, event.step_time, "a step")
        return False

    def _took(self, task: str, seconds: float, unit: str) -> bool:
        """One report of ``task``'s time (of ``unit``); whether the stragglers changed."""
        times = self.step_times.setdefault(task, deque(maxlen=WINDOW))
        times.append(seconds)
        self.reports[task] = self.reports.get(task, 0) + 1
        if len(times) < WINDOW:
            return False
        self._rank(task, statistics.median(times))
        # Judged again: this worker, and those named (a step of each worker comes about
        # once a second, so every worker is judged that often; judging all of them at
        # each of hundreds of workers' steps would not keep up).
        before = self.stragglers
        named = {s.task: s for s in before if s.task != task}
        was_named = {s.task for s in before}
        for judged in (task, *named):
            found = self._judge(judged, unit, judged in was_named)
            if found is None:
                named.pop(judged, None)
            else:
                named[judged] = found
        self.stragglers = tuple(sorted(named.values(), key=lambda s: s.task))
        return before != self.stragglers

    def _rank(self, task: str, seconds: float) -> None:
        """``task``'s typical time is now ``seconds``."""
        seen = self._seen.setdefault(task, len(self._seen))
        if (old := self._typical.get(task)) is not None:
            del self._ranked[bisect_left(self._ranked, (old, seen, task))]
        insort(self._ranked, (seconds, seen, task))
        self._typical[task] = seconds

    def _judge(self, task: str, unit: str, named: bool | None = None) -> Straggler | None:
        """``task`` as a straggler, or None when it keeps up (or has no peer to compare with):
        its peers' median, and of the peers nearest to it the first seen. ``named``: whether
        it is named now (None: look)."""
        ranked = self._ranked
        peers = len(ranked) - 1
        if peers < 1:
            return None
        seconds = self._typical[task]
        mine = bisect_left(ranked, (seconds, self._seen[task], task))

        def peer(k: int) -> float:  # the k-th smallest of the others
            return ranked[k if k < mine else k + 1][0]

        usual = peer(peers // 2) if peers % 2 else (peer(peers // 2 - 1) + peer(peers // 2)) / 2
        if named is None:
            named = any(s.task == task for s in self.stragglers)
        if seconds <= (KEEP_FACTOR if named else SLOW_FACTOR) * usual:
            return None
        # The nearest peers are the nearest time below the median's and the nearest above;
        # of the peers at one time, the first seen comes first in the ranking.
        at = bisect_left(ranked, (usual,))
        below = next((ranked[k][0] for k in range(at - 1, -1, -1) if k != mine), None)
        above = next((ranked[k][0] for k in range(at, len(ranked)) if k != mine), None)

        def first_at(value: float) -> tuple[float, int, str]:
            k = bisect_left(ranked, (value,))
            return ranked[k + 1 if k == mine else k]

        nearest = min((first_at(value) for value in (below, above) if value is not None),
                      key=lambda entry: (abs(entry[0] - usual), entry[1]))
        return Straggler(task, seconds, usual, nearest[2], unit)

    def news(self) -> list[str]:
        """A line for each worker named a straggler, or keeping up again, since the last
        call (headless prints them as they come)."""
        now = {s.task: s for s in self.stragglers}
        said = [f"warning: {straggler_text(s, self.latest.get(task), self.latest.get(s.typical_task))}"
                for task, s in now.items() if task not in self._named]
        said += [f"info: {task} keeps up with its peers again" for task in sorted(self._named - now.keys())]
        self._named = frozenset(now)
        return said

    def lines(self) -> list[str]:
        """Every worker's anatomy line, then a line per straggler naming it."""
        shown = [f"{task}: {anatomy_text(event)}" for task, event in sorted(self.latest.items())]
        return shown + [straggler_text(s, self.latest.get(s.task), self.latest.get(s.typical_task))
                        for s in self.stragglers]


    def typical(self) -> TypicalStep | None:
        """The typical sampled step over every worker's recent samples; None before any.

        The samples are those that came within the window of the step reports whose median
        heads the line, so that both figures are of the same steps (right after a link's cap
        was lifted, samples from under the cap beside untraced steps from after it read "5 ms a
        step; traced 62 ms"). Where no sample came in that window, each worker's newest is
        used and the reports' median is left out."""
        sampled = [(task, event) for task, recent in self.recent.items()
                   for seen, event in recent if seen >= self.reports.get(task, 0) - WINDOW]
        in_window = bool(sampled)
        if not in_window:
            sampled = [(task, recent[-1][1]) for task, recent in self.recent.items() if recent]
        if not sampled:
            return None
        events = [event for _, event in sampled]
        # One pass; a part a sample lacks took none of that step (it adds nothing to the mean).
        totals: dict[str, float] = {}
        for event in events:
            for part in event.parts:
                name = part_name(part)
                totals[name] = totals.get(name, 0.0) + part.share
        shares = {name: total / len(events) for name, total in totals.items()}
        # Largest first; equal shares by name, so that the line is the same on every screen.
        ordered = tuple(sorted(((n, v) for n, v in shares.items() if v >= 0.005),
                               key=lambda nv: (-round(nv[1], 6), nv[0])))
        reported = [seconds for times in self.step_times.values() for seconds in times]
        return TypicalStep(samples=len(events), workers=len({task for task, _ in sampled}),
                           seconds=statistics.median(e.seconds for e in events), shares=ordered,
                           untraced_seconds=statistics.median(reported) if reported and in_window else None,
                           stragglers=tuple(s.task for s in self.stragglers))


def typical_text(step: TypicalStep) -> str:
    """Where a typical step went, and, when compute is not most of it, that what the step waits
    on is the rest (the run's summary ends with it: "why is my step slow")."""
    shown = " · ".join(f"{name} {share:.0%}" for name, share in step.shares)
    head = "" if step.untraced_seconds is None else f"{step.untraced_seconds * 1000:.2f} ms a step; "
    text = (f"{head}traced {step.seconds * 1000:.2f} ms (median of {step.samples} sampled steps, "
            f"{step.workers} worker{'s' if step.workers != 1 else ''}): {shown}")
    if step.stragglers:
        # A straggler's own host may well be the cause: "a faster host would hardly help"
        # would be untrue for it.
        names = ", ".join(step.stragglers)
        text += (f"; {names} {'is a straggler' if len(step.stragglers) == 1 else 'are stragglers'}, "
                 "slower than its peers (see its line)")
    elif step.compute < COMPUTE_BOUND:
        text += (f"; compute is {step.compute:.0%} of a step, so a faster host would hardly help: "
                 "the rest is moving variables and gradients to and from the ps and each step's "
                 "fixed cost (see Slow steps in the troubleshooting guide)")
    return text


def anatomy_text(event: protocol.StepAnatomy) -> str:
    """A sampled step: its time, its parts' shares largest first (parts of no time left out);
    a TF2 coordinator's functions as it sees them."""
    if event.coordinator:
        return coordinator_text(event)
    parts = sorted((p for p in event.parts if p.share >= 0.005), key=lambda p: -p.share)
    shown = " · ".join(f"{part_name(p)} {p.share:.0%}" for p in parts)
    return f"step {event.global_step}, {event.seconds * 1000:.2f} ms: {shown}"


def straggler_text(straggler: Straggler, its: protocol.StepAnatomy | None,
                   typical: protocol.StepAnatomy | None) -> str:
    """``worker1 is a straggler: ...``, with both sampled steps where they are known, in
    milliseconds (shares of steps of different lengths read backwards: a straggler starved of
    CPU showed a smaller read share than its peer for the same read time), and the part that
    took most of the difference."""
    text = (f"{straggler.task} is a straggler: {straggler.step_seconds * 1000:.2f} ms {straggler.unit} "
            f"against {straggler.typical_seconds * 1000:.2f} ms typical ({straggler.typical_task})")
    if its is not None and typical is not None:
        text += (f"; its step {_brief(its)}, {straggler.typical_task}'s {_brief(typical)}")
        mine, theirs = _seconds(its), _seconds(typical)
        grew = max(mine, key=lambda name: mine[name] - theirs.get(name, 0.0))
        if (more := mine[grew] - theirs.get(grew, 0.0)) > 0:
            text += f"; most of the difference: {grew} (+{more * 1000:.2f} ms)"
    return text


def _seconds(event: protocol.StepAnatomy) -> dict[str, float]:
    return {part_name(p): p.seconds for p in event.parts}


def _brief(event: protocol.StepAnatomy) -> str:
    """A sampled step's time and its two largest parts', in milliseconds."""
    parts = sorted(event.parts, key=lambda p: -p.seconds)[:2]
    return f"{event.seconds * 1000:.2f} ms: " + " · ".join(f"{part_name(p)} {p.seconds * 1000:.2f} ms"
                                                           for p in parts)
