"""Repetitions reduced to figures: the median of the runs that produced a sample (a failed
run is None or NaN), a percentile of latencies, and the ``median (min–max)`` every table
quotes."""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Iterator, Sequence
from typing import TypeVar

T = TypeVar("T")


def alternating(reps: int, sides: Sequence[T]) -> Iterator[tuple[int, T]]:
    """Each repetition's sides, one after the other, in reverse order every second repetition,
    so that neither side always runs first (on a warmer or a busier machine)."""
    for rep in range(reps):
        for side in (sides if rep % 2 == 0 else tuple(reversed(sides))):
            yield rep, side


def valid(samples: Iterable[float | None]) -> list[float]:
    """The samples of the runs that produced one: None and NaN (a failed run) left out."""
    return [s for s in samples if s is not None and not math.isnan(s)]


def median_of(samples: Iterable[float | None]) -> float | None:
    """The median of the valid samples; None without any."""
    seen = valid(samples)
    return statistics.median(seen) if seen else None


def percentile(values: Iterable[float], q: float) -> float:
    """The sample at quantile ``q`` (0-1) of ``values``, nearest rank: no interpolation, so
    a p99 of key presses is a press that really took that long."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def spread(samples: Iterable[float | None], digits: int = 1, unit: str = " s",
           missing: str = "n/a") -> str:
    """``3.4 s (3.0–3.4)``: the median with the minimum and maximum of the valid samples;
    ``missing`` without any."""
    seen = valid(samples)
    if not seen:
        return missing
    return (f"{statistics.median(seen):.{digits}f}{unit} "
            f"({min(seen):.{digits}f}–{max(seen):.{digits}f})")
