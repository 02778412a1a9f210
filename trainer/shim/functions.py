"""A TF2 coordinator's functions as it sees them, for its ``step_anatomy``: each scheduled
function's time from its schedule to its result, split into waiting in the coordinator's
queue for a free worker and running on one (what happens in there, its compute and its
variable transfers, the coordinator cannot see: no step statistics come back from a worker),
per worker, and the functions put back to run again after a worker failed under them.

The clocks are read in the coordinator's own hooks (:mod:`trainer.shim.tf2`): at
``ClusterCoordinator.schedule``'s put into the closure queue, when a worker's thread takes a
closure, and when it marks it finished (its result fetched)."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Any

from trainer import protocol

#: Seconds between two coordinator anatomies (each the mean of the functions since the last).
INTERVAL = 5.0
#: The attribute a closure carries its schedule time in.
_QUEUED_AT = "_tfdist_queued_at"


@dataclass
class _Window:
    """The functions finished since the last anatomy."""

    count: int = 0
    queued: float = 0.0
    running: float = 0.0
    by_worker: dict[int, list[float]] = field(default_factory=dict)  # worker -> [seconds, count]
    retried: int = 0


_lock = threading.Lock()
_window = _Window()
_last = [0.0]  # monotonic time of the last anatomy
_local = threading.local()  # the closure a worker's thread runs, and since when


def queued(closure: Any) -> None:
    """``closure`` was scheduled (its first put: a retry keeps its first time)."""
    if getattr(closure, _QUEUED_AT, None) is None:
        setattr(closure, _QUEUED_AT, time.monotonic())


def put_back() -> None:
    """A closure goes back into the queue to run again: its worker failed."""
    with _lock:
        _window.retried += 1


def started(closure: Any) -> None:
    """A worker's thread takes ``closure``."""
    _local.closure, _local.started = closure, time.monotonic()


def finished(worker: int | None) -> None:
    """The closure this thread took has its result."""
    closure = getattr(_local, "closure", None)
    begun = getattr(_local, "started", None)
    queued_at = getattr(closure, _QUEUED_AT, None)
    if closure is None or begun is None or queued_at is None:
        return
    now = time.monotonic()
    _local.closure = None
    with _lock:
        _window.count += 1
        _window.queued += max(begun - queued_at, 0.0)
        _window.running += now - begun
        if worker is not None:
            spent = _window.by_worker.setdefault(worker, [0.0, 0])
            spent[0] += now - begun
            spent[1] += 1


def anatomy(role: str, index: int, global_step: int, functions: int,
            final: bool = False) -> protocol.StepAnatomy | None:
    """The anatomy of the functions finished since the last one, at most every
    :data:`INTERVAL` seconds (``final``: now); None when none finished or it is too soon."""
    global _window
    now = time.monotonic()
    with _lock:
        if not _window.count or (not final and now - _last[0] < INTERVAL):
            return None
        window, _window = _window, _Window()
        _last[0] = now
    queued_s, running_s = window.queued / window.count, window.running / window.count
    total = max(queued_s + running_s, 1e-9)
    parts = (protocol.AnatomyPart(part="queued", seconds=round(queued_s, 7),
                                  share=round(queued_s / total, 4)),
             protocol.AnatomyPart(part="function", seconds=round(running_s, 7),
                                  share=round(running_s / total, 4)))
    workers = max(window.by_worker, default=-1) + 1
    by_worker = tuple(round(window.by_worker[w][0] / window.by_worker[w][1], 7)
                      if w in window.by_worker else None for w in range(workers))
    return protocol.StepAnatomy(role=role, index=index, global_step=global_step,
                                local_step=functions, seconds=round(queued_s + running_s, 7),
                                parts=parts, every=window.count, coordinator=True,
                                by_worker=by_worker, retried=window.retried)
