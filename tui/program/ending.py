"""Ending a user's program cleanly whatever it does: the sync chief's hang after its last
step (tensorflow#13779) is noticed here, and a ps's port probed for readiness. Pure
bookkeeping plus one small probe; the supervisor acts on the answers."""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass, field

#: Once the target step is reached, a worker whose global step has not advanced for this
#: long is ended (and counted as succeeded): well inside the 10 s the product promises.
HANG_AFTER = 5.0
#: How often a task's port is tried while it is starting.
PORT_PROBE_INTERVAL = 0.25


@dataclass
class HangWatch:
    """Which workers have stopped making progress after the run reached its target.

    ``target`` is the step the run trains to (0: unknown, and then nothing is ever judged
    hung: a program that ignores ``{steps}`` may rightly train past it)."""

    target: int
    after: float = HANG_AFTER
    _advanced: dict[str, tuple[int, float]] = field(default_factory=dict)  # task -> (step, when)
    _reached_at: float | None = None

    def started(self, task: str, now: float) -> None:
        """``task`` (a worker or the chief) was launched."""
        self._advanced[task] = (-1, now)

    def step(self, task: str, global_step: int, target: int, now: float) -> None:
        """``task`` reported ``global_step`` (``target`` as it knows it, 0 if not)."""
        if target > 0:
            self.target = target
        last = self._advanced.get(task)
        if last is None or global_step > last[0]:
            self._advanced[task] = (global_step, now)
        if self.target > 0 and global_step >= self.target and self._reached_at is None:
            self._reached_at = now

    def exited(self, task: str) -> None:
        self._advanced.pop(task, None)

    @property
    def reached(self) -> bool:
        return self._reached_at is not None

    def hung(self, now: float) -> list[str]:
        """Workers still running whose step has not moved for :attr:`after` seconds since
        the target was reached (or since they last advanced, if later)."""
        if self._reached_at is None:
            return []
        reached = self._reached_at
        return [task for task, (_, when) in self._advanced.items() if now - max(when, reached) >= self.after]

    def next_check(self, now: float) -> float | None:
        """Seconds until someone may be hung (None: nobody can be yet)."""
        if self._reached_at is None or not self._advanced:
            return None
        reached = self._reached_at
        return max(0.0, min(max(when, reached) + self.after for _, when in self._advanced.values()) - now)


async def port_open(host: str, port: int, timeout: float = 1.0) -> bool:
    """Whether something accepts connections on ``host:port`` now."""
    try:
        _, writer = await asyncio.wait_for(asyncio.open_connection(host, port), timeout)
    except (OSError, asyncio.TimeoutError):
        return False
    writer.close()
    with contextlib.suppress(OSError):
        await writer.wait_closed()
    return True
