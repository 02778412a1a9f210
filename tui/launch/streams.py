"""Merging a task's stdout and stderr into one stream of lines, for any byte sources: the
local launcher's pipes and the SSH launcher's channels alike."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, AsyncIterator, Sequence

from tui.launch.lines import MAX_LINE_BYTES, ByteSource, OutputBatch, OutputLine, Stream, read_batches


class Prefixed:
    """A ByteSource that first returns ``head`` (bytes already read), then reads ``rest``."""

    def __init__(self, head: bytes, rest: ByteSource) -> None:
        self._head = head
        self._rest = rest

    async def read(self, n: int = -1) -> bytes:
        if self._head:
            head, self._head = self._head, b""
            return head
        return await self._rest.read(n)


async def merged_lines(sources: Sequence[tuple[ByteSource, Stream]],
                       max_line: int = MAX_LINE_BYTES) -> AsyncGenerator[OutputLine, None]:
    """Every line of every source in arrival order; ends when all reached EOF."""
    async for batch in merged_batches(sources, max_line):
        for line in batch.each():
            yield line


async def merged_batches(sources: Sequence[tuple[ByteSource, Stream]],
                         max_line: int = MAX_LINE_BYTES) -> AsyncGenerator[OutputBatch, None]:
    """:func:`merged_lines` as the batches each read completed, in arrival order: a reader
    of a flood resumes once per read (hundreds of lines), not once per line."""
    # Batches, not lines, go through the queue: its bookkeeping per item is what a flood pays.
    queue: asyncio.Queue[OutputBatch | None] = asyncio.Queue()

    async def pump(source: ByteSource, stream: Stream) -> None:
        try:
            async for batch in read_batches(source, stream, max_line):
                queue.put_nowait(batch)
        finally:
            queue.put_nowait(None)  # this source is done (EOF, or its reader failed)

    pumps = [asyncio.create_task(pump(source, stream)) for source, stream in sources]
    try:
        open_streams = len(pumps)
        while open_streams:
            item = await queue.get()
            if item is None:
                open_streams -= 1
            else:
                yield item
    finally:
        for task in pumps:
            task.cancel()
        await asyncio.gather(*pumps, return_exceptions=True)


async def read_first_line(source: ByteSource, limit: int = 4096) -> tuple[bytes | None, bytes]:
    """Read until the first newline: (the line without it, the bytes read after it). The line
    is None when the source ended first or the line exceeded ``limit``; then the second
    item holds everything read."""
    buffer = bytearray()
    while b"\n" not in buffer:
        if len(buffer) > limit:
            return None, bytes(buffer)
        data = await source.read(limit)
        if not data:
            return None, bytes(buffer)
        buffer += data
    line, _, rest = bytes(buffer).partition(b"\n")
    return line.removesuffix(b"\r"), rest


async def each_line(batches: AsyncIterator[OutputBatch]) -> AsyncGenerator[OutputLine, None]:
    """A task's output (:meth:`tui.launch.base.RunningTask.output`) line by line: for a
    reader that wants one line at a time and is not in a flood's path."""
    async for batch in batches:
        for line in batch.each():
            yield line


def task_output(stdout: ByteSource, stderr: ByteSource, max_line: int = MAX_LINE_BYTES,
                head: bytes = b"") -> AsyncGenerator[OutputBatch, None]:
    """A task's stdout (after ``head``: bytes of it already read) and stderr merged a read
    at a time (:func:`merged_batches`): every launcher's ``output``."""
    first: ByteSource = Prefixed(head, stdout) if head else stdout
    return merged_batches([(first, Stream.STDOUT), (stderr, Stream.STDERR)], max_line)
