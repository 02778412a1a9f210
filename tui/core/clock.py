"""Time for the supervisor, injectable so tests can drive timeouts without sleeping."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Mapping
from enum import Enum
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


class Wake(Enum):
    """Why a wait of the supervisor ended: what :func:`first_completed` returns."""

    DONE = "done"          # the thing awaited happened
    STOPPED = "stopped"    # the run was asked to stop (or to recover) meanwhile
    TIMEOUT = "timeout"    # the time limit passed first


async def first_completed(awaitables: Mapping[Wake, Awaitable[Any]]) -> Wake:
    """Run ``awaitables`` concurrently until one finishes; cancel the others and return the
    key of the one that finished (the first in the mapping's order if several finished
    together).

    This is how every wait in the supervisor gets a timeout or a stop request: race the
    thing awaited against ``clock.sleep(timeout)`` and an ``Event.wait()``. An exception
    raised by the winner propagates."""
    keys = list(awaitables)
    tasks = [asyncio.ensure_future(awaitables[k]) for k in keys]
    try:
        done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        winner = min(i for i, task in enumerate(tasks) if task in done)
        tasks[winner].result()
        return keys[winner]
    finally:
        for task in tasks:
            if not task.done():
                task.cancel()
        # Let the losers finish cancelling so nothing is left pending or unretrieved.
        await asyncio.gather(*tasks, return_exceptions=True)
