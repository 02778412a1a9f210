"""What happened in the core, waiting for a front end to collect it: one ordered, thread-safe
queue with a bound on output lines. Events other than output are never dropped (a front end
that missed a state change would show a wrong state); output lines beyond the bound are
dropped from the screen only and counted (the run directory, written by the supervisor
itself, has every line)."""

from __future__ import annotations

import threading
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from tui.core.events import ControllerEvent, ProgressUpdate, TaskOutput, TaskStateChanged
from tui.core.traffic import TrafficUpdate
from tui.core.usage import UsageSample


@dataclass(frozen=True)
class CoreLost:
    """The core's process ended without being closed (killed, crashed): no task of it is
    left (they die with it), and no event will come about them any more."""

    text: str
    t: float = field(default_factory=time.time)


#: What reaches a front end from the core: the supervisor's events, the monitors' samples,
#: and the end of a core that was not closed.
Happening = ControllerEvent | TrafficUpdate | UsageSample | CoreLost

#: Output lines waiting to be collected. If a front end falls this far behind, further lines
#: are dropped (and counted).
MAX_PENDING_OUTPUT = 50_000

#: What an inbox holds: happenings, and in the core's process also replies to commands.
Item = TypeVar("Item")


class Inbox(Generic[Item]):
    """Items in order, put from any thread; :meth:`drain` takes them all at once."""

    def __init__(self, max_pending_output: int = MAX_PENDING_OUTPUT) -> None:
        self._items: deque[Item] = deque()
        self._max = max_pending_output
        self._pending_output = 0
        self._dropped = 0
        self._lock = threading.Lock()
        self._filled = threading.Condition(self._lock)

    def put(self, item: Item) -> None:
        """Queue ``item`` (an output batch past the bound is counted instead)."""
        with self._lock:
            if isinstance(item, TaskOutput):
                if self._pending_output >= self._max:
                    self._dropped += len(item.lines)
                    return
                self._pending_output += len(item.lines)
            self._items.append(item)
            self._filled.notify()

    def count_dropped(self, lines: int) -> None:
        """Lines dropped before they reached this inbox (by the core's process)."""
        if lines:
            with self._lock:
                self._dropped += lines
                self._filled.notify()

    def __len__(self) -> int:
        """Items queued now."""
        return len(self._items)

    def drain(self) -> tuple[list[Item], int]:
        """Everything queued since the last drain, in order (of its progress updates, the last
        one alone), and how many output lines were dropped meanwhile."""
        with self._lock:
            items = list(self._items)
            dropped = self._dropped
            self._items.clear()
            self._pending_output = self._dropped = 0
        return _latest_progress(items), dropped

    def wait(self, timeout: float | None = None) -> bool:
        """Block until something is queued (or dropped); False after ``timeout``."""
        with self._lock:
            return self._filled.wait_for(lambda: bool(self._items) or self._dropped > 0, timeout)


def _latest_progress(items: list[Item]) -> list[Item]:
    """``items`` with only the last :class:`ProgressUpdate` among them, where it was, and the
    last one before each task's end: each one is the whole run's progress, so an earlier one in
    the same frame says nothing the last does not (a busy run publishes one per step of every
    worker, each listing every worker), except what an end takes away. The core publishes
    the progress just before a worker's exit takes its rate out (``flush_progress``); a frame
    that held both kept only the progress after it, and a short run's rate was never shown."""
    keep: set[int] = set()
    last: int | None = None
    for i, item in enumerate(items):
        if isinstance(item, ProgressUpdate):
            last = i
        elif last is not None and isinstance(item, TaskStateChanged) and item.new.is_finished:
            keep.add(last)
    if last is None:
        return items
    keep.add(last)
    return [item for i, item in enumerate(items) if i in keep or not isinstance(item, ProgressUpdate)]
