"""One background coroutine a monitor runs while a run is on (the traffic and usage samplers):
started, cancelled at the run's end, and awaited on close."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Coroutine
from typing import Any


class Background:
    """Holds at most one task; :meth:`start` replaces a running one only when asked."""

    def __init__(self) -> None:
        self._task: asyncio.Task[None] | None = None
        #: Cancelled tasks that may still be cleaning up (closing a sampler): :meth:`close`
        #: waits for them too.
        self._ending: set[asyncio.Task[None]] = set()

    @property
    def running(self) -> bool:
        return self._task is not None and not self._task.done()

    def start(self, make: Callable[[], Coroutine[Any, Any, None]]) -> None:
        """Run ``make()`` as the task, cancelling any earlier one."""
        self.cancel()
        self._task = asyncio.ensure_future(make())

    def cancel(self) -> None:
        """Cancel the task, if any (without waiting for it)."""
        if self._task is not None:
            self._task.cancel()
            self._ending.add(self._task)
            self._task.add_done_callback(self._ending.discard)
            self._task = None

    async def close(self) -> None:
        """Cancel the task and wait for it, and those cancelled before, to end (idempotent)."""
        self.cancel()
        for task in list(self._ending):
            with contextlib.suppress(asyncio.CancelledError):
                await task
