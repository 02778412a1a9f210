"""Log noise of TensorFlow that says nothing to a person watching a run, folded out of the
live view (the task's log file keeps every line).

Today one kind: the multi-line protobuf dump TensorFlow's eager service logs when a TF2
coordinator connects to a serving task (``eager_service_impl.cc:355] SessionOptions:
goo.gle/debugproto`` and ~20 lines of ``device_count { ... }``). Its first line stays; the
dump's body, each line of which reads as protobuf text, is noise. Pure: lines in, a verdict
out, one :class:`NoiseFolder` per task process."""

from __future__ import annotations

import re
from collections.abc import Container, Sequence

#: A log line that announces a protobuf dump on the lines after it.
DUMP_START = re.compile(r"\] SessionOptions: goo\.gle/debugproto\s*$")
_DUMP_MARK = "SessionOptions: goo.gle/debugproto"
#: A line of protobuf text format: ``name {``, ``}``, ``name: value``, or blank.
PROTO_LINE = re.compile(r"^\s*(?:[A-Za-z_][\w.]*\s*\{|\}|[A-Za-z_][\w.]*: .*|)\s*$")
#: A dump longer than this is not one (whatever follows is shown again).
MAX_DUMP_LINES = 200


class NoiseFolder:
    """Says which of one task's lines are the body of a protobuf dump."""

    def __init__(self) -> None:
        self._in_dump = 0  # lines of the current dump so far; 0: not in one

    def noise_in(self, lines: Sequence[str], joined: str, skip: Container[int] = ()) -> frozenset[int]:
        """Indices of the lines of a batch (the next lines of the task's output; ``joined``:
        them joined by newlines) that are folded out; ``skip``: pieces of an over-long line,
        never noise."""
        if not self._in_dump and _DUMP_MARK not in joined:
            return frozenset()  # a flood of plain lines: one substring search
        return frozenset(index for index, line in enumerate(lines)
                         if index not in skip and self.is_noise(line))

    def is_noise(self, line: str) -> bool:
        """Whether ``line`` (the next line of the task's output) is folded out."""
        if self._in_dump:
            if PROTO_LINE.match(line) and self._in_dump < MAX_DUMP_LINES:
                self._in_dump += 1
                return True
            self._in_dump = 0
        if DUMP_START.search(line):
            self._in_dump = 1
        return False
