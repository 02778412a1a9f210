"""The controller's own pauses are not its tasks' silence.

Ctrl-Z then ``fg`` (SIGTSTP, SIGCONT), a debugger, a laptop lid, a swap storm on the
controller's machine: while the controller is not running, it reads no output, so every
task looks silent when it wakes, and the stall watchdog and the hang rule would blame (and,
with ``on_stall: fail``, kill) healthy tasks. :class:`PauseGuard` notices such a gap in the
controller's own execution, and :mod:`.pause_watch` moves the run's quiet clocks on by its
length.

The gap is measured on the process's real monotonic clock, not on the run's injected
:class:`~tui.core.clock.Clock`: it is a fact about this process (a test's fake clock that jumps
ahead is time passing while the controller runs, not a pause of the controller).

A controller short of CPU (a busy machine) is late the same way, but it was not suspended:
the kernel counts the time a runnable thread waited for a CPU (``run_delay`` in
``/proc/thread-self/schedstat``), which a stopped thread never accrues. A gap mostly spent
waiting so is said as what it was (:attr:`PauseGuard.starved`).
"""

from __future__ import annotations

import time
from collections.abc import Callable

#: How often the guard's ticker looks at the clock while a run is up.
TICK = 0.25
#: A gap longer than this between two looks (beyond the tick) is a pause of the controller:
#: a loaded machine delays a tick by tens of milliseconds, not seconds.
SLACK = 2.0


class PauseGuard:
    """Remembers when the controller last ran; :meth:`paused` says how long it did not."""

    def __init__(self, now: Callable[[], float] = time.monotonic, *, enabled: bool = True,
                 run_delay: Callable[[], float | None] | None = None) -> None:
        self._now = now
        self._run_delay = run_delay or thread_run_delay
        self._delay = self._run_delay()
        #: The last gap was mostly spent runnable, waiting for a CPU: short of CPU, not suspended.
        self.starved = False
        #: Off for a run on an injected clock (tests): shifting its fake timestamps by real
        #: seconds of a slow test machine would mix two clocks.
        self.enabled = enabled
        self._last = now()
        #: Every pause noticed so far, in seconds.
        self.total = 0.0

    def paused(self) -> float:
        """Seconds the controller did not run since the last look (0.0 for none)."""
        now = self._now()
        gap = now - self._last - TICK
        self._last = now
        delay, self._delay = self._delay, self._run_delay()
        if gap <= SLACK or not self.enabled:
            return 0.0
        self.starved = delay is not None and self._delay is not None and self._delay - delay >= gap / 2
        self.total += gap
        return gap


def thread_run_delay() -> float | None:
    """Seconds this thread has waited, runnable, for a CPU (None where the kernel does not say)."""
    try:
        with open("/proc/thread-self/schedstat", encoding="ascii") as stat:
            return int(stat.read().split()[1]) / 1e9
    except (OSError, ValueError, IndexError):
        return None
