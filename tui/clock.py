"""Time for the supervisor, injectable so tests can drive timeouts without sleeping."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable
from typing import Any, Protocol


class Clock(Protocol):
    """Where the supervisor gets time from. Tests pass a fake whose ``sleep`` completes only
    when the test advances it."""

    def monotonic(self) -> float:
        """Seconds on a clock that never goes back (durations, deadlines)."""
        ...

    def time(self) -> float:
        """Wall-clock seconds since the epoch (timestamps in events and files)."""
        ...

    async def sleep(self, seconds: float) -> None:
        """Return after ``seconds``."""
        ...


class SystemClock:
    """The real clock."""

    def monotonic(self) -> float:
        return time.monotonic()

    def time(self) -> float:
        return time.time()

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)


async def first_completed(*awaitables: Awaitable[Any]) -> int:
    """Run ``awaitables`` concurrently until one finishes; cancel the others and return the
    index of the one that finished (the lowest index if several finished together).

    This is how every wait in the supervisor gets a timeout or a stop request: race the
    thing awaited against ``clock.sleep(timeout)`` and an ``Event.wait()``. An exception
    raised by the winner propagates."""
    tasks = [asyncio.ensure_future(a) for a in awaitables]
    try:
        done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        winner = min(i for i, task in enumerate(tasks) if task in done)
        tasks[winner].result()
        return winner
    finally:
        for task in tasks:
            if not task.done():
                task.cancel()
        # Let the losers finish cancelling so nothing is left pending or unretrieved.
        await asyncio.gather(*tasks, return_exceptions=True)
