"""The measurement window every throughput benchmark uses, from the workers' ``step``
events alone: it opens when every worker is past :data:`WARMUP_LOCAL_STEPS` (the latest of
their first step events at or past it) and closes at the first worker's last step event (the
run's step target, or the moment the benchmark stopped it). A benchmark keeps its runs going
for a time, not a number of steps: :func:`reached` says when a window of the asked length
has been trained (to stop a run there), and :func:`steps_for_window` sizes a run that ends by
itself from a short calibration run's window.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from trainer import protocol

#: A worker's throughput counts from its first step event at or after this local step:
#: the first steps pay for graph optimisation and connection set-up.
WARMUP_LOCAL_STEPS = 20
#: The default window: long enough that a ratio of two runs does not scatter with the
#: moment a run happens to start or stop (2 s windows did).
DEFAULT_SECONDS = 10.0
#: A run sized from a calibration trains this much longer than the window it is for, so
#: that a slower side or a busier machine still gets the whole window.
SIZE_MARGIN = 1.3


@dataclass(frozen=True)
class Window:
    """The stretch of a run in which every worker trains, with the global steps at its ends."""

    start: float
    end: float
    start_step: int
    end_step: int

    @property
    def seconds(self) -> float:
        """How long the window lasted."""
        return self.end - self.start

    @property
    def steps_per_sec(self) -> float:
        """Global steps per second over the window."""
        return (self.end_step - self.start_step) / self.seconds

    def examples_per_sec(self, examples_per_global_step: int) -> float:
        """Examples trained per second, by every worker together, over the window."""
        return self.steps_per_sec * examples_per_global_step


def warm_point(workers: Sequence[Sequence[protocol.Step]]) -> protocol.Step | None:
    """The step event at which the window opens: the latest of the workers' first events
    at or past :data:`WARMUP_LOCAL_STEPS`. None while some worker (or every one: no
    workers) is not there yet."""
    points = []
    for steps in workers:
        warm = next((s for s in steps if s.local_step >= WARMUP_LOCAL_STEPS), None)
        if warm is None:
            return None
        points.append(warm)
    return max(points, key=lambda s: s.t) if points else None


def measure(workers: Sequence[Sequence[protocol.Step]]) -> Window | None:
    """The window of these workers' step events (each worker's in order); None if it has
    not opened or nothing was trained in it."""
    start = warm_point(workers)
    if start is None:
        return None
    end = min((steps[-1] for steps in workers), key=lambda s: s.t)
    if end.t <= start.t or end.global_step <= start.global_step:
        return None
    return Window(start.t, end.t, start.global_step, end.global_step)


def reached(workers: Sequence[Sequence[protocol.Step]], seconds: float) -> bool:
    """Whether the window has lasted ``seconds`` (a run stopped now has a window that long)."""
    window = measure(workers)
    return window is not None and window.seconds >= seconds


def steps_for_window(calibration: Window, seconds: float, minimum: int) -> int:
    """A step target that keeps a run like the calibration run training for ``seconds``
    once warm (with :data:`SIZE_MARGIN`), and at least ``minimum`` steps."""
    return max(minimum, calibration.start_step + math.ceil(calibration.steps_per_sec * seconds * SIZE_MARGIN))
