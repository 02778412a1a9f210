"""Turn a task's raw output bytes into lines, whatever the task prints.

Tasks print tracebacks, progress bars, ANSI colours, and sometimes binary junk or a single
multi-megabyte line. The reader must never raise or stall on any of it, and must never lose
bytes (the run directory keeps every line). So we read fixed-size chunks and split them
ourselves instead of using ``StreamReader.readline`` (which raises on lines over its limit),
decode each line with ``errors="replace"``, and cut a line longer than ``max_line`` bytes
into pieces marked ``partial`` rather than buffering it without bound.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from enum import Enum
from typing import Protocol


class Stream(Enum):
    """Which of a task's output streams a line came from."""

    STDOUT = "stdout"
    STDERR = "stderr"


#: Longer lines are delivered in pieces of at most this many bytes.
MAX_LINE_BYTES = 4 * 1024 * 1024
#: How much to read at once.
CHUNK_BYTES = 64 * 1024


@dataclass(frozen=True)
class OutputLine:
    """One line (without its newline) from one stream of a task. ``partial`` means the line
    was longer than the limit and continues in the next OutputLine of the same stream;
    ``continued`` means this is such a continuation (the one place that state is kept is
    :class:`LineSplitter`)."""

    stream: Stream
    text: str
    partial: bool = False
    continued: bool = False


class ByteSource(Protocol):
    """Anything with ``async read(n) -> bytes`` returning ``b""`` at EOF: an asyncio
    StreamReader, an asyncssh reader opened with ``encoding=None``."""

    async def read(self, n: int = -1) -> bytes: ...


class LineSplitter:
    """Incremental splitter: feed bytes in any chunking, get complete lines out."""

    def __init__(self, stream: Stream, max_line: int = MAX_LINE_BYTES) -> None:
        if max_line < 4:
            raise ValueError("max_line must leave room for one UTF-8 character")
        self._stream = stream
        self._max_line = max_line
        self._buffer = bytearray()
        # Bytes of the buffer already known to hold no newline: rescanning them for every
        # chunk of a long line would make a 4 MB line cost quadratic time.
        self._scanned = 0
        self._continuing = False  # the last line out was a partial piece

    def feed(self, data: bytes) -> list[OutputLine]:
        """Add bytes; return the lines they completed."""
        self._buffer += data
        lines: list[OutputLine] = []
        while True:
            newline = self._buffer.find(b"\n", self._scanned)
            if newline == -1 or newline > self._max_line:
                if len(self._buffer) <= self._max_line:
                    self._scanned = len(self._buffer)
                    return lines
                cut = _utf8_boundary(self._buffer, self._max_line)
                lines.append(self._line(bytes(self._buffer[:cut]), partial=True))
                del self._buffer[:cut]
                self._scanned = 0
                continue
            raw = bytes(self._buffer[:newline])
            del self._buffer[: newline + 1]
            self._scanned = 0
            lines.append(self._line(raw.removesuffix(b"\r"), partial=False))

    def finish(self) -> list[OutputLine]:
        """The stream ended: return what is left (a last line without a newline)."""
        if not self._buffer:
            return []
        raw = bytes(self._buffer)
        self._buffer.clear()
        self._scanned = 0
        return [self._line(raw, partial=False)]

    def _line(self, raw: bytes, partial: bool) -> OutputLine:
        line = OutputLine(self._stream, raw.decode("utf-8", errors="replace"), partial,
                          continued=self._continuing)
        self._continuing = partial
        return line


def _utf8_boundary(buffer: bytearray, limit: int) -> int:
    """The largest cut position <= limit that does not split a UTF-8 character (falls back
    to ``limit`` when the bytes there are not UTF-8 anyway)."""
    cut = limit
    # Continuation bytes look like 0b10xxxxxx; a character is at most 4 bytes long.
    while cut > limit - 3 and (buffer[cut] & 0xC0) == 0x80:
        cut -= 1
    return cut if (buffer[cut] & 0xC0) != 0x80 else limit


async def read_lines(source: ByteSource, stream: Stream, max_line: int = MAX_LINE_BYTES,
                     chunk: int = CHUNK_BYTES) -> AsyncIterator[OutputLine]:
    """Yield every line of ``source`` until EOF."""
    async for batch in read_batches(source, stream, max_line, chunk):
        for line in batch:
            yield line


async def read_batches(source: ByteSource, stream: Stream, max_line: int = MAX_LINE_BYTES,
                       chunk: int = CHUNK_BYTES) -> AsyncIterator[list[OutputLine]]:
    """Every line of ``source`` until EOF, as the lists each read completed (a flooding task
    fills a 64 KiB read with hundreds of lines: one hand-over each, not one per line)."""
    splitter = LineSplitter(stream, max_line)
    while True:
        data = await source.read(chunk)
        if not data:
            break
        if lines := splitter.feed(data):
            yield lines
    if lines := splitter.finish():
        yield lines
