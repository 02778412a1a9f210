"""A text stream for a controller's own output that outlives its terminal."""

from __future__ import annotations

import asyncio
import io
from typing import TextIO


class SurvivingStream(io.TextIOBase):
    """A text stream whose writes stop quietly once the stream fails (a hung-up terminal,
    a closed pipe) instead of raising into the controller."""

    def __init__(self, stream: TextIO) -> None:
        super().__init__()
        self._stream = stream
        self.lost = False

    def write(self, text: str) -> int:
        if not self.lost:
            try:
                self._stream.write(text)
            except (OSError, ValueError):  # EIO, EPIPE; ValueError: closed
                self.lost = True
        return len(text)

    def flush(self) -> None:
        if not self.lost:
            try:
                self._stream.flush()
            except (OSError, ValueError):
                self.lost = True

    def isatty(self) -> bool:
        try:
            return self._stream.isatty()
        except (OSError, ValueError):
            return False


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
