"""A text stream for a controller's own output that outlives its terminal."""

from __future__ import annotations

import asyncio
import contextlib
import io
import os
import select
from collections.abc import Callable, Sequence
from typing import TextIO


class SurvivingStream(io.TextIOBase):
    """A text stream whose writes stop quietly once the stream fails (a hung-up terminal,
    a closed pipe) instead of raising into the controller; ``on_lost`` is called once, when
    that is first seen (by a failed write or by :meth:`check`)."""

    def __init__(self, stream: TextIO, on_lost: Callable[[], None] | None = None) -> None:
        super().__init__()
        self._stream = stream
        self.on_lost = on_lost
        self.lost = False
        self.terminal = self.isatty()  # asked now: a terminal that is gone answers no

    def write(self, text: str) -> int:
        if not self.lost:
            try:
                self._stream.write(text)
            except (OSError, ValueError):  # EIO, EPIPE; ValueError: closed
                self._lose()
        return len(text)

    def flush(self) -> None:
        if not self.lost:
            try:
                self._stream.flush()
            except (OSError, ValueError):
                self._lose()

    def check(self) -> bool:
        """Whether the stream is lost, also when nothing was written since its reader went
        (a controller whose tasks are quiet writes nothing for minutes)."""
        if not self.lost and reader_gone(self._stream):
            self._lose()
        return self.lost

    def _lose(self) -> None:
        if self.lost:
            return
        self.lost = True
        _divert_to_null(self._stream)
        if self.on_lost is not None:
            self.on_lost()

    def isatty(self) -> bool:
        try:
            return self._stream.isatty()
        except (OSError, ValueError):
            return False


def reader_gone(stream: TextIO) -> bool:
    """Nothing written to ``stream`` can be read any more: a pipe whose reading end is
    closed, a socket whose peer went, a terminal hung up. poll() reports these (POLLERR,
    POLLHUP) without being asked and without writing; a file never has them."""
    try:
        fd = stream.fileno()
    except (OSError, ValueError, AttributeError, io.UnsupportedOperation):
        return False
    poller = select.poll()
    try:
        poller.register(fd, 0)
        events = poller.poll(0)
    except (OSError, ValueError):
        return False
    return any(mask & (select.POLLERR | select.POLLHUP) for _, mask in events)


#: How often :func:`watch_readers` looks whether the streams still have a reader.
READER_CHECK_INTERVAL = 1.0


async def watch_readers(streams: Sequence[SurvivingStream], interval: float = READER_CHECK_INTERVAL) -> None:
    """Check ``streams`` every ``interval`` seconds until cancelled: each calls its
    ``on_lost`` once its reader is gone."""
    while True:
        await asyncio.sleep(interval)
        for stream in streams:
            stream.check()


def _divert_to_null(stream: TextIO) -> None:
    """Point a lost stream's descriptor at /dev/null: the interpreter flushes stdout once
    more as it exits, and that failing write would turn the exit code into 120."""
    with contextlib.suppress(OSError, ValueError, AttributeError, io.UnsupportedOperation):
        fd = stream.fileno()
        null = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(null, fd)
        finally:
            os.close(null)


#: How long text written to a :class:`BatchedWriter` may wait for more before it goes out.
BATCH_SECONDS = 0.02


class BatchedWriter:
    """Text for a stream, gathered between flushes and written in one go: hundreds of tasks
    printing a line each paid a write (and a flush) per line, where the terminal shows
    them no sooner than a frame. :meth:`flush` writes what is gathered now, in the order it
    came; :meth:`flush_soon` within :data:`BATCH_SECONDS` (at once without an event loop)."""

    def __init__(self, stream: TextIO, every: float = BATCH_SECONDS) -> None:
        self._stream = stream
        self._every = every
        self._parts: list[str] = []
        self._due: asyncio.TimerHandle | None = None

    def write(self, text: str) -> int:
        self._parts.append(text)
        return len(text)

    def flush(self) -> None:
        """Write and flush what is gathered."""
        if self._due is not None:
            self._due.cancel()
            self._due = None
        if self._parts:
            text = "".join(self._parts)
            self._parts.clear()
            self._stream.write(text)
        self._stream.flush()

    def flush_soon(self) -> None:
        """Flush within :data:`BATCH_SECONDS`, once for everything written until then."""
        if self._due is not None:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            self.flush()
            return
        self._due = loop.call_later(self._every, self.flush)
