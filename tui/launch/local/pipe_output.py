"""A local task's output pipes read straight into line batches.

Read through asyncio's streams, a task's line travelled pipe → StreamReader → a pump task
per stream → a queue → the reader: two task wake-ups, two futures, the queue's bookkeeping
and three generators resumed for every line, a quarter of the controller's CPU with 256
tasks printing five lines a second each. Here each pipe's protocol keeps what
arrives, and the task's one reader (:meth:`PipeOutput.batches`) wakes once for whatever
came on either pipe, splits it and yields it: the same batches as
:func:`tui.launch.streams.task_output` makes of the same bytes, in arrival order, each
read at most :data:`~tui.launch.lines.CHUNK_BYTES`, a trickle gathered the same way
(:class:`~tui.launch.lines.Pace`), and a pipe whose bytes wait unread paused as a
StreamReader pauses it.
"""

from __future__ import annotations

import asyncio
import functools
import os
import time
from collections import deque
from collections.abc import AsyncGenerator, Callable

from tui.launch.lines import (
    CHUNK_BYTES,
    GATHER_SECONDS,
    MAX_LINE_BYTES,
    LineSplitter,
    OutputBatch,
    Pace,
    Stream,
)


class _Pipe(asyncio.Protocol):
    """One output pipe of a task: the bytes that came and are not read yet."""

    def __init__(self, owner: PipeOutput, stream: Stream, max_line: int, gather: float) -> None:
        self.splitter = LineSplitter(stream, max_line)
        self.pace = Pace(gather)
        self.data = bytearray()
        self.ended = False  # EOF (or a read error) came: nothing more after ``data``
        self.queued = False  # on its reader's list of pipes to read
        self.held = False  # gathering a trickle's output: not read before its time
        self.finished = False  # its end was read (its last line handed on)
        #: When its reader last asked it for more (the loop's clock): how long a read waited.
        self.asked = 0.0
        self._owner = owner
        self._transport: asyncio.ReadTransport | None = None
        self._paused = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.ReadTransport)
        self._transport = transport

    def data_received(self, data: bytes) -> None:
        self.data += data
        # As a StreamReader with a limit of one read: past two reads' worth unread, the pipe
        # fills and the task waits in its write until the reader catches up.
        if not self._paused and len(self.data) > 2 * CHUNK_BYTES and self._transport is not None:
            self._paused = True
            self._transport.pause_reading()
        self._owner.ready(self)

    def eof_received(self) -> None:
        self._end()

    def connection_lost(self, exc: Exception | None) -> None:
        self._end()  # (a read error ends the stream as EOF does: what came is still read)

    def _end(self) -> None:
        self.ended = True
        self._owner.ready(self)

    def take(self) -> bytes:
        """What came, up to one read's worth (:data:`CHUNK_BYTES`)."""
        if len(self.data) <= CHUNK_BYTES:
            chunk = bytes(self.data)
            self.data.clear()
        else:
            chunk = bytes(self.data[:CHUNK_BYTES])
            del self.data[:CHUNK_BYTES]
        if self._paused and len(self.data) <= CHUNK_BYTES and self._transport is not None:
            self._paused = False
            self._transport.resume_reading()
        return chunk


def _same(pipe: _Pipe) -> _Pipe:
    return pipe


class PipeOutput:
    """A task's stdout and stderr pipes, read once, by :meth:`batches` (a reader that pulls)
    or by :meth:`hand` (a handler called from the read itself)."""

    def __init__(self, max_line: int = MAX_LINE_BYTES, gather: float = GATHER_SECONDS) -> None:
        self._pipes = (_Pipe(self, Stream.STDOUT, max_line, gather),
                       _Pipe(self, Stream.STDERR, max_line, gather))
        self._open = len(self._pipes)
        self._ready: deque[_Pipe] = deque()
        self._waiter: asyncio.Future[None] | None = None
        #: With :meth:`hand`: the handler, and what its caller awaits (both streams' end).
        self._handle: Callable[[OutputBatch], None] | None = None
        self._done: asyncio.Future[None] | None = None

    @classmethod
    async def open(cls, stdout: int, stderr: int, max_line: int = MAX_LINE_BYTES) -> PipeOutput:
        """Read the read ends ``stdout`` and ``stderr`` (which it then owns and closes at EOF)."""
        output = cls(max_line)
        loop = asyncio.get_running_loop()
        for fd, pipe in zip((stdout, stderr), output._pipes, strict=True):
            await loop.connect_read_pipe(functools.partial(_same, pipe), os.fdopen(fd, "rb", buffering=0))
        return output

    def ready(self, pipe: _Pipe) -> None:
        """``pipe`` has something for the reader (bytes, its end)."""
        if pipe.held or pipe.finished:
            return
        if self._handle is not None:
            self._deliver(pipe)
            return
        if pipe.queued:
            return
        pipe.queued = True
        self._ready.append(pipe)
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)

    def _release(self, pipe: _Pipe) -> None:
        """A trickle's gathering time is up: read what came meanwhile."""
        pipe.held = False
        pipe.asked = time.monotonic()
        if pipe.data or pipe.ended:
            self.ready(pipe)

    def _after_read(self, pipe: _Pipe, size: int, now: float) -> bool:
        """Pace ``pipe`` after a read of ``size`` bytes at ``now`` (:func:`time.monotonic`, the
        loop's clock, called directly: twice a line): whether it is held."""
        wait = pipe.pace.wait_after(size, now, full=size >= CHUNK_BYTES, waited=now - pipe.asked)
        if wait:
            pipe.held = True
            asyncio.get_running_loop().call_later(wait, self._release, pipe)
            return True
        pipe.asked = time.monotonic()
        return False

    def _finish(self, pipe: _Pipe) -> list[OutputBatch]:
        """``pipe`` ended and all it brought was read: its last line, if it had no newline."""
        pipe.finished = True
        self._open -= 1
        return pipe.splitter.finish()

    async def batches(self) -> AsyncGenerator[OutputBatch, None]:
        """Both streams' lines in arrival order, a read at a time, until both reached EOF."""
        loop = asyncio.get_running_loop()
        while self._open:
            if not self._ready:
                self._waiter = loop.create_future()
                try:
                    await self._waiter
                finally:
                    self._waiter = None
                continue
            pipe = self._ready.popleft()
            pipe.queued = False
            if not pipe.data:
                if pipe.ended and not pipe.finished:
                    for batch in self._finish(pipe):
                        yield batch
                continue
            now = time.monotonic()
            data = pipe.take()
            for batch in pipe.splitter.feed(data):
                yield batch
            if not self._after_read(pipe, len(data), now) and (pipe.data or pipe.ended):
                self.ready(pipe)

    async def hand(self, handle: Callable[[OutputBatch], None]) -> None:
        """Call ``handle`` with every batch :meth:`batches` would yield, in the same order,
        from the read that completed it (no task wakes up for it); return once both streams
        reached EOF. An exception from ``handle`` ends the reading and is raised here."""
        self._done = asyncio.get_running_loop().create_future()
        self._handle = handle
        self._ready.clear()
        try:
            for pipe in self._pipes:  # what came before the handler did
                pipe.queued = False
                self.ready(pipe)
            await self._done
        finally:
            self._handle = None

    def _deliver(self, pipe: _Pipe) -> None:
        """Hand what ``pipe`` brought (and its end) to the handler, as :meth:`batches` reads it."""
        handle = self._handle
        done = self._done
        assert handle is not None and done is not None
        try:
            while pipe.data:
                now = time.monotonic()
                data = pipe.take()
                for batch in pipe.splitter.feed(data):
                    handle(batch)
                if self._after_read(pipe, len(data), now):
                    return
            if pipe.ended:
                for batch in self._finish(pipe):
                    handle(batch)
                if not self._open and not done.done():
                    done.set_result(None)
        except Exception as exc:  # (the reader's failure: told to the one awaiting hand())
            self._handle = None
            if not done.done():
                done.set_exception(exc)
