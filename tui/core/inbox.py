"""What happened in the core, waiting for a front end to collect it: one ordered, thread-safe
queue whose backlog is bounded whatever the load. Output lines beyond a bound are dropped from
the screen only and counted (the run directory, written by the supervisor itself, has every
line). A happening that a later one of its kind makes moot (the latest usage sample, live
traffic sample, picture of the hosts, the run's progress; and, once the backlog is long, each
task's latest step) takes the earlier one's place instead of queueing behind it, so a front
end that fell behind catches up to the present instead of replaying minutes. No state
change, notice, hint, result, run start or end is ever dropped, and none is reordered: a
happening replaces an earlier one only while no change of a task's, a host's or the run's
state lies between them."""

from __future__ import annotations

import threading
import time
from collections.abc import Hashable
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from trainer import protocol
from tui.core.events import (
    ControllerEvent,
    HostsProgress,
    ProgressUpdate,
    RunFinished,
    RunStarted,
    TaskOutput,
    TaskStateChanged,
    TrainerEvent,
)
from tui.core.host_state import HostReach
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

#: Past this many items waiting, each task's step reports are coalesced too (its latest one in
#: the place of its earlier): a front end folds every step into the loss chart and the
#: step-time window while it keeps up (a frame holds a few of each task's), and only one that
#: fell this far behind gives those points up for the present.
COALESCE_STEPS_PAST = 1_000

#: What an inbox holds: happenings, and in the core's process also replies to commands.
Item = TypeVar("Item")


class Inbox(Generic[Item]):
    """Items in order, put from any thread; :meth:`drain` takes them all at once."""

    def __init__(self, max_pending_output: int = MAX_PENDING_OUTPUT,
                 coalesce_steps_past: int = COALESCE_STEPS_PAST) -> None:
        # A list, not a deque: a replacing item is written at its predecessor's index.
        self._items: list[Item] = []
        self._max = max_pending_output
        self._steps_past = coalesce_steps_past
        self._pending_output = 0
        self._dropped = 0
        #: Where the latest item of each kind that a later one may replace waits, since the
        #: last change of state (which no item may pass).
        self._latest: dict[Hashable, int] = {}
        self._lock = threading.Lock()
        self._filled = threading.Condition(self._lock)

    def put(self, item: Item) -> None:
        """Queue ``item`` (an output batch past the bound is counted instead; an item that
        makes a waiting one moot takes its place)."""
        with self._lock:
            if isinstance(item, TaskOutput):
                if self._pending_output >= self._max:
                    self._dropped += len(item.lines)
                    return
                self._pending_output += len(item.lines)
            elif (kind := moot_kind(item, len(self._items) >= self._steps_past)) is not None:
                at = self._latest.get(kind)
                if at is not None and replaces(item, self._items[at]):
                    self._items[at] = item
                    return  # (waiting already: a drain to come takes it)
                self._latest[kind] = len(self._items)
            elif is_state_change(item):
                self._latest.clear()
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
            items = self._items
            dropped = self._dropped
            self._items = []
            self._latest.clear()
            self._pending_output = self._dropped = 0
        return _latest_progress(items), dropped

    def wait(self, timeout: float | None = None) -> bool:
        """Block until something is queued (or dropped); False after ``timeout``."""
        with self._lock:
            return self._filled.wait_for(lambda: bool(self._items) or self._dropped > 0, timeout)


def moot_kind(item: object, steps_too: bool) -> Hashable | None:
    """What a later item of the same kind makes ``item`` moot as (None: never moot): each is
    the whole picture of its kind, as the front ends take it. A step report only with
    ``steps_too`` (a long backlog), and not a task's first (which adds a line to its log)."""
    if isinstance(item, (UsageSample, ProgressUpdate, HostsProgress)):
        return type(item).__name__
    if isinstance(item, TrafficUpdate):
        return None if item.final else "TrafficUpdate"  # (the run's own traffic stays)
    if steps_too and isinstance(item, TrainerEvent) and isinstance(item.event, protocol.Step) \
            and item.event.local_step != 1:
        return ("Step", item.task)
    return None


def replaces(item: object, earlier: object) -> bool:
    """Whether ``item`` may take ``earlier``'s place (both of one :func:`moot_kind`): a
    picture of the hosts only where every host is in the state it was (a host's change of
    state is a line in both front ends' logs)."""
    if isinstance(item, HostsProgress) and isinstance(earlier, HostsProgress):
        return [(h.name, h.state) for h in item.hosts] == [(h.name, h.state) for h in earlier.hosts]
    return True


def is_state_change(item: object) -> bool:
    """A change of a task's, a host's or the run's state: no later item takes the place of one
    queued before it."""
    return isinstance(item, (TaskStateChanged, HostReach, RunStarted, RunFinished, CoreLost))


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
