"""The messages between the app and its core's process (:mod:`tui.core.process_main`), and
their frames: a length, then a pickle. Both ends are this program, over a socket pair that
nothing else holds, so pickle carries the typed commands and events as they are."""

from __future__ import annotations

import dataclasses
import pickle
import socket
import struct
from dataclasses import dataclass, field
from typing import BinaryIO

from trainer import protocol
from tui.core.commands import Command
from tui.core.events import Level, Notice, ProgressUpdate, TaskOutput, TrainerEvent
from tui.core.inbox import Happening
from tui.core.options import RunOptions
from tui.core.progress import ProgressSnapshot, WorkerProgress
from tui.core.supervisor.records import SupervisorOptions
from tui.core.traffic import TrafficUpdate
from tui.core.usage import UsageSample

HEADER = struct.Struct("!Q")


@dataclass(frozen=True)
class Start:
    """The app's first message: what the core runs."""

    options: RunOptions
    supervisor_options: SupervisorOptions | None = None


@dataclass(frozen=True)
class Execute:
    """Carry out ``command``; the :class:`Reply` carries the same ``number``."""

    number: int
    command: Command


@dataclass(frozen=True)
class Close:
    """Stop every task and end the process (as closing the socket does)."""


@dataclass(frozen=True)
class Watch:
    """What the app has on screen that moves with each line a task prints: the tasks whose
    log it shows (None: every task's, the merged log), and whether it shows the progress or
    the traffic. What concerns none of it (:func:`prompt`) is held back until the app's
    clock ticks (:class:`Flush`), which draws it all: an idle run's trickle of lines woke
    both processes ten times a second for nothing on screen. Until the app says,
    everything is on screen."""

    tasks: frozenset[str] | None = None
    progress: bool = True
    traffic: bool = True


@dataclass(frozen=True)
class Flush:
    """Send what is held back now (the app's clock is about to draw); :class:`Flushed` ends it."""


@dataclass(frozen=True)
class Flushed:
    """Everything held back before the :class:`Flush` came has been sent."""


def prompt(item: Outgoing, watch: Watch) -> bool:
    """Whether the app shows ``item`` as soon as it comes, by ``watch``: output and steps of
    tasks whose log is not shown, progress and traffic with their panes hidden, and the
    resource samples (the task table draws those on the clock's tick) can wait for it."""
    if isinstance(item, TaskOutput):
        return watch.tasks is None or item.task in watch.tasks
    if isinstance(item, TrainerEvent):
        # A step after a worker's first adds no log line (its own line is a TaskOutput).
        step = isinstance(item.event, protocol.Step) and item.event.local_step != 1
        return watch.progress or not step
    if isinstance(item, ProgressUpdate):
        return watch.progress
    if isinstance(item, TrafficUpdate):
        return watch.traffic
    return not isinstance(item, UsageSample)


@dataclass(frozen=True)
class Reply:
    """The end of command ``number``: ``error`` is what it raised, or None."""

    number: int
    error: BaseException | None = None


@dataclass(frozen=True)
class Failed:
    """The core could not be made (the session's construction raised)."""

    text: str


@dataclass(frozen=True)
class Closed:
    """Every task stopped, the process is ending."""


@dataclass(frozen=True)
class ProgressDelta:
    """A :class:`~tui.core.events.ProgressUpdate` as it crosses: the snapshot without its
    workers, and only the workers whose entry changed since the previous one that crossed
    (:class:`ProgressPacker`). 256 workers listed ten times a second were most of what the
    core sent an idle run's app, pickled there and unpickled here."""

    progress: ProgressSnapshot
    t: float
    #: The workers' entries new since the previous update (each worker reports by itself).
    changed: tuple[WorkerProgress, ...]
    #: The workers' names in the snapshot's order; None: as in the previous update.
    order: tuple[str, ...] | None


class ProgressPacker:
    """The core's end: each update as the delta from the previous one packed. A worker's
    entry is a new object when it changed (the tracker makes one per report), so an entry
    that is the one sent before is not sent again."""

    def __init__(self) -> None:
        self._sent: dict[str, WorkerProgress] = {}
        self._order: tuple[str, ...] = ()

    def pack(self, update: ProgressUpdate) -> ProgressDelta:
        workers = update.progress.workers
        sent = self._sent
        changed = tuple(w for w in workers if sent.get(w.task) is not w)
        order = tuple(w.task for w in workers)
        self._sent = {w.task: w for w in workers}
        new_order = None if order == self._order else order
        self._order = order
        return ProgressDelta(dataclasses.replace(update.progress, workers=()), update.t, changed, new_order)


class ProgressUnpacker:
    """The app's end: each delta back as the whole update (the unchanged workers' entries are
    the objects the previous update held)."""

    def __init__(self) -> None:
        self._workers: dict[str, WorkerProgress] = {}
        self._order: tuple[str, ...] = ()

    def unpack(self, delta: ProgressDelta) -> ProgressUpdate:
        for worker in delta.changed:
            self._workers[worker.task] = worker
        if delta.order is not None:
            self._order = delta.order
            self._workers = {name: self._workers[name] for name in delta.order}
        workers = tuple(map(self._workers.__getitem__, self._order))
        return ProgressUpdate(progress=dataclasses.replace(delta.progress, workers=workers), t=delta.t)


#: What the core's process sends: in one ordered stream, so that a reply follows the events
#: its command caused. (A progress update crosses as a :class:`ProgressDelta`.)
Outgoing = Happening | Reply | Failed | Closed | Flushed | ProgressDelta


@dataclass(frozen=True)
class Batch:
    """One frame from the core: everything since the last, and the output lines it dropped
    because the app did not read them in time."""

    items: list[Outgoing] = field(default_factory=list)
    dropped: int = 0


def send_frame(sock: socket.socket, message: object) -> None:
    """Write one message (blocks while the other end's buffer is full)."""
    send_pickled(sock, pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL))


def send_pickled(sock: socket.socket, payload: bytes) -> None:
    """Write one message already pickled (:func:`sendable`)."""
    sock.sendall(HEADER.pack(len(payload)) + payload)


def read_frame(stream: BinaryIO) -> object | None:
    """The next message, or None at the end of the stream (the other end is gone)."""
    header = stream.read(HEADER.size)
    if len(header) < HEADER.size:
        return None
    (size,) = HEADER.unpack(header)
    payload = stream.read(size)
    if len(payload) < size:
        return None
    return pickle.loads(payload)


def sendable(batch: Batch) -> bytes:
    """``batch`` pickled; an item that cannot be (a bug: every event is plain data) becomes a
    notice saying so, rather than taking the batch's other items with it."""
    try:
        return pickle.dumps(batch, protocol=pickle.HIGHEST_PROTOCOL)
    except Exception:  # any pickling error: find the item below
        items: list[Outgoing] = []
        for item in batch.items:
            try:
                pickle.dumps(item)
                items.append(item)
            except Exception as error:
                text = f"the core could not send a {type(item).__name__} to the app: {error}"
                items.append(Notice(level=Level.ERROR, text=text))
        return pickle.dumps(Batch(items, batch.dropped), protocol=pickle.HIGHEST_PROTOCOL)


def portable(error: BaseException | None) -> BaseException | None:
    """``error`` as it can cross to the app: itself if it comes back from pickle saying the
    same, else a RuntimeError with its text. (Pickle rebuilds an exception from its
    ``args``: one whose ``__init__`` takes other arguments fails to, or says something else.)"""
    if error is None:
        return None
    try:
        if str(pickle.loads(pickle.dumps(error))) == str(error):
            return error
    except Exception:
        pass
    return RuntimeError(str(error) or type(error).__name__)
