"""Turn a task's raw output bytes into lines, whatever the task prints.

Tasks print tracebacks, progress bars, ANSI colours, and sometimes binary junk or a single
multi-megabyte line. The reader must never raise or stall on any of it, and must never lose
bytes (the run directory keeps every line). So we read fixed-size chunks and split them
ourselves instead of using ``StreamReader.readline`` (which raises on lines over its limit),
decode each line with ``errors="replace"``, and cut a line longer than ``max_line`` bytes
into pieces marked ``partial`` rather than buffering it without bound.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from enum import Enum
from typing import Protocol

from tui.common.quick import maker


class Stream(Enum):
    """Which of a task's output streams a line came from."""

    STDOUT = "stdout"
    STDERR = "stderr"


#: Longer lines are delivered in pieces of at most this many bytes.
MAX_LINE_BYTES = 4 * 1024 * 1024
#: How much to read at once.
CHUNK_BYTES = 64 * 1024
#: How long a trickling stream's output gathers between two reads. Eight tasks printing a
#: line every millisecond otherwise cost the controller 8,000 reads, events and screen
#: updates a second, and on a loaded CPU the operator's keys wait behind them; gathered,
#: 50 a stream, and no line is shown later than this.
GATHER_SECONDS = 0.02
#: A stream bringing this many bytes a second or more floods: its reads never wait (the
#: writer would soon fill the pipe and block).
FLOOD_BYTES_PER_SECOND = 2 * 1024 * 1024
#: A read of this many bytes or more is not a trickle's (a task printing a line at a time
#: leaves a few lines behind between two reads), so the next read does not wait.
SMALL_READ = 4096


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


@dataclass(frozen=True)
class OutputBatch:
    """The lines one read of a stream completed, in order, without their newlines: what a
    task's output travels as, so that a flood costs one object per read (hundreds of lines),
    not one per line. ``continued``: the first line continues the last of the stream's
    previous batch (a piece of an over-long line); ``partial``: the last line is such a
    piece, continued in the stream's next batch."""

    stream: Stream
    lines: tuple[str, ...]
    continued: bool = False
    partial: bool = False

    def each(self) -> Iterator[OutputLine]:
        """The batch line by line."""
        last = len(self.lines) - 1
        for index, text in enumerate(self.lines):
            yield OutputLine(self.stream, text, partial=self.partial and index == last,
                             continued=self.continued and index == 0)

    def is_piece(self, index: int) -> bool:
        """Whether line ``index`` is a piece of an over-long line (never an event)."""
        return (self.continued and index == 0) or (self.partial and index == len(self.lines) - 1)


#: A batch made at once (one a read: tui.common.quick).
_make_batch = maker(OutputBatch)


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
        self._redrawing = False  # the last line out ended at a \r: what follows continues it

    def feed(self, data: bytes) -> list[OutputBatch]:
        """Add bytes; return the lines they completed (no batch is empty)."""
        self._buffer += data
        if len(self._buffer) <= self._max_line:
            return self._whole_lines()
        return self._batches(self._pieces())

    def _whole_lines(self) -> list[OutputBatch]:
        # The common case: no line in the buffer can be over the limit, so every complete
        # line is cut at once and decoded in one call (a UTF-8 sequence never spans a
        # newline, so this decodes exactly as line by line would).
        last = self._buffer.rfind(b"\n", self._scanned)
        if last == -1:
            # (From the last byte scanned before: a \r held there may end a line now.)
            start = max(0, self._scanned - 1)
            self._scanned = len(self._buffer)
            return self._redrawn(start)
        text = self._buffer[:last].decode("utf-8", errors="replace")
        del self._buffer[:last + 1]
        self._scanned = 0
        lines = text.split("\n")
        if "\r" in text or self._redrawing:
            lines = _redraws([line.removesuffix("\r") for line in lines], self._redrawing)
        self._redrawing = False
        batch = _make_batch(stream=self._stream, lines=tuple(lines), continued=self._continuing,
                            partial=False) if lines else None
        self._continuing = False
        return [*([batch] if batch else []), *self._redrawn(0)]

    def _redrawn(self, start: int) -> list[OutputBatch]:
        """Progress redrawn in place (tqdm, a Keras bar: ``\r`` and the next state, a
        newline only once done) ends a line at each ``\r``, as it comes: left in one line
        until the loop's end, a task training for an hour would show no progress, and say
        nothing the stall watchdog hears, for that hour. The buffer holds no newline; a
        ``\r`` as its last byte may begin a ``\r\n`` and waits for the next one."""
        cut = self._buffer.rfind(b"\r", start, len(self._buffer) - 1)
        if cut == -1:
            return []
        text = self._buffer[:cut].decode("utf-8", errors="replace")  # (\r is never in a UTF-8 sequence)
        del self._buffer[:cut + 1]
        self._scanned = len(self._buffer)
        lines = tuple(part for part in text.split("\r") if part)
        if not lines:
            return []
        self._redrawing = True
        batch = _make_batch(stream=self._stream, lines=lines, continued=self._continuing, partial=False)
        self._continuing = False
        return [batch]

    def _pieces(self) -> list[OutputLine]:
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

    def finish(self) -> list[OutputBatch]:
        """The stream ended: return what is left (a last line without a newline)."""
        if not self._buffer:
            return []
        raw = bytes(self._buffer)
        self._buffer.clear()
        self._scanned = 0
        if (b"\r" in raw or self._redrawing) and not self._continuing:  # a redrawn line's last states
            lines = _redraws([raw.decode("utf-8", errors="replace").removesuffix("\r")], self._redrawing)
            self._redrawing = False
            return [OutputBatch(self._stream, tuple(lines))] if lines else []
        return self._batches([self._line(raw, partial=False)])

    def _line(self, raw: bytes, partial: bool) -> OutputLine:
        line = OutputLine(self._stream, raw.decode("utf-8", errors="replace"), partial,
                          continued=self._continuing)
        self._continuing = partial
        return line

    def _batches(self, lines: list[OutputLine]) -> list[OutputBatch]:
        """``lines`` grouped so that a piece of an over-long line only ever ends a batch
        (``partial``) or starts one (``continued``)."""
        batches: list[OutputBatch] = []
        group: list[str] = []
        continued = False
        for line in lines:
            if line.continued and group:
                batches.append(OutputBatch(self._stream, tuple(group), continued=continued))
                group = []
            if not group:
                continued = line.continued
            group.append(line.text)
            if line.partial:
                batches.append(OutputBatch(self._stream, tuple(group), continued=continued, partial=True))
                group = []
        if group:
            batches.append(OutputBatch(self._stream, tuple(group), continued=continued))
        return batches


def _redraws(lines: list[str], continues: bool = False) -> list[str]:
    """Each line's ``\r``-separated states as lines of their own (empty ones left out; a
    line of nothing but ``\r`` stays one empty line, as an empty line does, unless it is
    the rest of a line whose states went out already: ``continues``)."""
    out: list[str] = []
    for number, line in enumerate(lines):
        parts = [part for part in line.split("\r") if part] if "\r" in line or not line else [line]
        out += parts or ([] if continues and number == 0 else [""])
    return out


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
        for line in batch.each():
            yield line


class Pace:
    """Whether a stream trickles (its next read waits for output to gather) or floods (it
    never waits), judged from the bytes of its last :data:`GATHER_SECONDS` or more."""

    def __init__(self, gather: float = GATHER_SECONDS) -> None:
        self.gather = gather
        self._since = 0.0
        self._bytes = 0
        # Until a window has passed nothing is known: no wait (a flood's start must not fill
        # the pipe; a trickle's first lines just come sooner).
        self._flooding = True

    def wait_after(self, size: int, now: float, full: bool = False, waited: float = 0.0) -> float:
        """Seconds to wait before the next read, after one of ``size`` bytes at ``now``;
        ``full``: it took all it asked for, so more is waiting (the controller is behind);
        ``waited``: how long the read waited for its bytes. A stream whose read waited a
        whole gathering time or more prints less than a line per gathering time: waiting
        would gather nothing more, and cost a timer and a wake-up per line (256 tasks at 5
        lines/s each paid 1,280 of them a second)."""
        if now - self._since >= self.gather:
            self._flooding = self._bytes >= FLOOD_BYTES_PER_SECOND * (now - self._since)
            self._since, self._bytes = now, 0
        self._bytes += size
        if self._flooding or full or size >= SMALL_READ or waited >= self.gather:
            return 0.0
        return self.gather


async def read_batches(source: ByteSource, stream: Stream, max_line: int = MAX_LINE_BYTES,
                       chunk: int = CHUNK_BYTES, gather: float = GATHER_SECONDS,
                       ) -> AsyncIterator[OutputBatch]:
    """Every line of ``source`` until EOF, as the batches each read completed; a trickling
    source's reads wait ``gather`` seconds between them for output to collect (:class:`Pace`)."""
    splitter = LineSplitter(stream, max_line)
    pace = Pace(gather)
    loop = asyncio.get_running_loop()
    while True:
        asked = loop.time()
        data = await source.read(chunk)
        if not data:
            break
        now = loop.time()
        for batch in splitter.feed(data):
            yield batch
        if wait := pace.wait_after(len(data), now, full=len(data) >= chunk, waited=now - asked):
            await asyncio.sleep(wait)
    for batch in splitter.finish():
        yield batch
