"""A text stream for a controller's own output that outlives its terminal."""

from __future__ import annotations

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
