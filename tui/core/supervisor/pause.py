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

    def __init__(self, now: Callable[[], float] = time.monotonic, *, enabled: bool = True) -> None:
        self._now = now
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
        if gap <= SLACK or not self.enabled:
            return 0.0
        self.total += gap
        return gap
