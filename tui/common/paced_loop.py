"""An event loop that wakes at most once a tick, for a controller watching many tasks.

Hundreds of tasks printing a few lines a second each make the plain loop wake for nearly
every line on its own: each wake-up is a sleep and a wake of the thread, a poll, and the
callbacks of one pipe, so that a line cost the controller more in being woken than in
being handled (256 tasks at 5 lines/s: ~150 µs a line, of which a profiler's pauses alone,
letting lines pile up, took away half). A paced loop, before it sleeps in its poll,
waits until a tick has passed since it last woke: whatever became ready meanwhile is then
handled in one wake-up. Nothing waits longer than a tick for it, and a loop that has work
at hand (a poll that would not sleep) is never held back.
"""

from __future__ import annotations

import asyncio
import selectors
import time
from typing import Any

#: The shortest time between two wake-ups of a paced loop, seconds: a line reaches the
#: screen and the run directory at most this much later.
TICK_SECONDS = 0.02


class PacedSelector(selectors.DefaultSelector):
    """The system's default selector whose blocking polls come at most once a ``tick``."""

    def __init__(self, tick: float = TICK_SECONDS) -> None:
        super().__init__()
        self.tick = tick
        self._woke = 0.0
        #: How many polls slept first (for tests and measurements).
        self.held = 0

    def select(self, timeout: float | None = None) -> list[tuple[selectors.SelectorKey, int]]:
        if timeout is None or timeout > 0:
            hold = self._woke + self.tick - time.monotonic()
            if hold > 0:
                if timeout is not None:
                    hold = min(hold, timeout)
                    timeout -= hold
                self.held += 1
                time.sleep(hold)
        ready: list[Any] = super().select(timeout)
        self._woke = time.monotonic()
        return ready


def paced_loop(tick: float = TICK_SECONDS) -> asyncio.AbstractEventLoop:
    """A new event loop on a :class:`PacedSelector` (for ``asyncio.Runner(loop_factory=)``)."""
    return asyncio.SelectorEventLoop(PacedSelector(tick))
