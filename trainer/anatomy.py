"""Where a worker's step goes: one step in N traced (``RunOptions(trace_level=FULL_TRACE)``)
and its step statistics split into compute, input, variable reads per ps, gradient pushes
per ps, waiting (sync) and the rest, as a :class:`trainer.protocol.StepAnatomy`.

What each op of the trace is:

- on this worker, a ``RecvTensor`` from ps j: a variable read from ps j (the worker waits
  for it); ``IteratorGetNext``: input; any other op but sends, receives and no-ops: compute;
- on ps j, a ``RecvTensor`` from this worker, and any op but the token queue's dequeue:
  the gradient push to ps j and its apply there (the ps's receive starts with the step and
  ends when the gradient has arrived: the worker's compute covers its start);
- on a ps, the dequeue of the sync token queue: waiting for the other replicas.

The step runs from the client's call to its return (its wall time); the timeline is swept
once, each moment given to one part (:data:`PRIORITY`), so the parts add up to the step.
A remote ps's clock may differ from the worker's by its skew: its intervals move with it.

N is chosen by measurement: after each traced step its extra time over a typical untraced
step (the mean of the last :data:`TYPICAL_STEPS`) sets the next interval so that the extra
stays :data:`BUDGET` of the time, never closer than :data:`MIN_EVERY` steps. The interval is
also kept in seconds (the extra over the budget): a worker whose steps grew slower than the
typical step that set N is traced as often in time, at the same cost, so a straggler's
sample is of its slow steps."""

from __future__ import annotations

import math
import re
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from trainer import protocol

#: The share of a worker's time the sampling may cost (the extra time of traced steps).
BUDGET = 0.005
#: Never trace two steps closer than this, nor before this many steps (warm-up).
MIN_EVERY = 20
#: Untraced steps whose mean wall time is the typical step.
TYPICAL_STEPS = 50
#: Which part a moment belongs to when several are under way at once: the worker's own work
#: first, then what it waits for.
PRIORITY = ("compute", "input", "wait", "read", "push")
_TASK = re.compile(r"/job:(ps|worker|chief)/(?:replica:\d+/)?task:(\d+)")
_FROM = re.compile(r" from (/job:\w+/(?:replica:\d+/)?task:\d+)")
_NOT_WORK = frozenset({"_Send", "_Recv", "_HostSend", "_HostRecv", "NoOp", "Const", "RecvTensor"})


def _task(device: str) -> tuple[str, int] | None:
    match = _TASK.search(device or "")
    return (match.group(1), int(match.group(2))) if match else None


def _op(node: Any) -> str:
    """The op type of a node in step stats (the label reads ``name = Op(inputs)``)."""
    label = node.timeline_label
    if " = " in label:
        return label.split(" = ", 1)[1].split("(", 1)[0].strip()
    return node.node_name


@dataclass
class Interval:
    """One op's time, in microseconds since the epoch, and the part it is."""

    start: float
    end: float
    part: str
    ps: int | None = None


def intervals(step_stats: Any, worker: int, job: str = "worker") -> list[Interval]:
    """The parts of task ``worker`` of job ``job``'s step (a user's TF1 program may train
    as ``chief``) in its step statistics."""
    found: list[Interval] = []
    for dev in step_stats.dev_stats:
        where = _task(dev.device)
        if where is None:
            continue
        on, index = where
        for node in dev.node_stats:
            start = float(node.all_start_micros)
            end = start + float(node.all_end_rel_micros)
            part: str | None = None
            ps: int | None = None
            if where == (job, worker):
                if node.node_name == "RecvTensor":
                    source = _FROM.search(node.timeline_label)
                    sender = _task(source.group(1)) if source else None
                    if sender is not None and sender[0] == "ps":
                        part, ps = "read", sender[1]
                else:
                    op = _op(node)
                    if "IteratorGetNext" in op:
                        part = "input"
                    elif op not in _NOT_WORK:
                        part = "compute"
            elif on == "ps":
                if "sync_token_q" in node.node_name and "Dequeue" in _op(node):
                    part = "wait"
                elif node.node_name == "RecvTensor":
                    source = _FROM.search(node.timeline_label)
                    if source and _task(source.group(1)) == (job, worker):
                        part, ps = "push", index
                elif _op(node) not in _NOT_WORK:
                    part, ps = "push", index
            if part is not None and end > start:
                found.append(Interval(start, end, part, ps))
    return found


def dissect(found: list[Interval], start: float, end: float, num_ps: int,
            sync: bool) -> tuple[protocol.AnatomyPart, ...]:
    """Sweep ``[start, end]`` (microseconds) once: each moment to the first part under way
    in :data:`PRIORITY` (reads and pushes of several ps at once split evenly), the rest to
    ``rest``. Seconds and shares of the step; a ps with nothing read or pushed shows 0."""
    edges: list[tuple[float, int, str, int | None]] = []
    for iv in found:
        lo, hi = max(iv.start, start), min(iv.end, end)
        if hi > lo:
            edges += [(lo, 1, iv.part, iv.ps), (hi, -1, iv.part, iv.ps)]
    edges.sort(key=lambda e: (e[0], e[1]))
    active: dict[tuple[str, int | None], int] = {}
    spent: dict[tuple[str, int | None], float] = {}
    at = start
    for when, delta, part, ps in edges:
        if when > at:
            _give(spent, active, when - at)
            at = when
        key = (part, ps)
        active[key] = active.get(key, 0) + delta
        if not active[key]:
            del active[key]
    if end > at:
        _give(spent, active, end - at)
    total = max(end - start, 1e-9)
    names = ["compute", "input", *(["wait"] if sync else [])]
    keys: list[tuple[str, int | None]] = [(n, None) for n in names]
    keys += [("read", j) for j in range(num_ps)] + [("push", j) for j in range(num_ps)]
    keys.append(("rest", None))
    return tuple(protocol.AnatomyPart(part=part, ps=ps, seconds=round(spent.get((part, ps), 0.0) / 1e6, 7),
                                      share=round(spent.get((part, ps), 0.0) / total, 4))
                 for part, ps in keys)


def _give(spent: dict[tuple[str, int | None], float], active: dict[tuple[str, int | None], int],
          micros: float) -> None:
    """Give ``micros`` to the first part under way (``rest`` if none)."""
    for part in PRIORITY:
        under_way = [key for key in active if key[0] == part]
        if under_way:
            for key in under_way:
                spent[key] = spent.get(key, 0.0) + micros / len(under_way)
            return
    spent[("rest", None)] = spent.get(("rest", None), 0.0) + micros


@dataclass
class Sampler:
    """When to trace a step, and what the tracing has cost so far."""

    next_at: int = MIN_EVERY
    every: int = MIN_EVERY
    untraced: deque[float] = field(default_factory=lambda: deque(maxlen=TYPICAL_STEPS))
    total_seconds: float = 0.0
    extra_seconds: float = 0.0
    #: When a step is due by time, whatever its number: a worker starved of CPU, its steps
    #: 3x the typical step that set ``every``, went 53 s untraced (836 steps), and its
    #: straggler line showed a step from before it slowed.
    next_time: float = math.inf
    last_at: int = 0
    clock: Callable[[], float] = field(default=time.monotonic)

    def due(self, local_step: int) -> bool:
        """Whether step number ``local_step`` (1 for the first) is to be traced."""
        if len(self.untraced) < min(TYPICAL_STEPS, MIN_EVERY):
            return False
        return local_step >= self.next_at or (
            local_step >= self.last_at + MIN_EVERY and self.clock() >= self.next_time)

    def ran(self, local_step: int, seconds: float, traced: bool) -> None:
        """A step took ``seconds``; after a traced one, the next interval."""
        self.total_seconds += seconds
        if not traced:
            self.untraced.append(seconds)
            return
        typical = sum(self.untraced) / len(self.untraced)
        extra = max(0.0, seconds - typical)
        self.extra_seconds += extra
        self.every = max(MIN_EVERY, math.ceil(extra / (BUDGET * max(typical, 1e-6))))
        self.next_at = local_step + self.every
        self.last_at = local_step
        self.next_time = self.clock() + extra / BUDGET

    @property
    def cost(self) -> float:
        """The traced steps' extra time over all steps' time."""
        return self.extra_seconds / self.total_seconds if self.total_seconds else 0.0


def anatomy(metadata: Any, *, worker: int, num_ps: int, sync: bool, start: float, end: float,
            global_step: int, local_step: int, sampler: Sampler,
            role: str = "worker") -> protocol.StepAnatomy:
    """The event for one traced step of task ``worker`` of job ``role`` that ran from
    ``start`` to ``end`` (``time.time()``)."""
    parts = dissect(intervals(metadata.step_stats, worker, role), start * 1e6, end * 1e6, num_ps,
                    sync)
    return protocol.StepAnatomy(role=role, index=worker, global_step=global_step,
                                local_step=local_step, seconds=round(end - start, 6), parts=parts,
                                every=sampler.every, cost=round(sampler.cost, 5))
