"""Repetitions reduced to figures: failed runs left out, nearest-rank percentiles."""

from __future__ import annotations

import math

from bench.harness.stats import alternating, median_of, percentile, spread


def test_failed_runs_are_left_out_of_a_median() -> None:
    assert median_of([3.0, None, math.nan, 1.0, 2.0]) == 2.0
    assert median_of([None, math.nan]) is None


def test_percentile_is_a_sample_that_happened() -> None:
    presses = [float(n) for n in range(1, 101)]
    assert percentile(presses, 0.99) == 99.0
    assert percentile(presses, 0.5) in presses
    assert percentile([7.0], 0.99) == 7.0


def test_spread_quotes_median_min_and_max() -> None:
    assert spread([3.4, 3.0, math.nan, 3.4]) == "3.4 s (3.0–3.4)"
    assert spread([0.81, 0.74, 0.82], 2, "") == "0.81 (0.74–0.82)"
    assert spread([None], missing="-") == "-"


def test_repetitions_alternate_which_side_runs_first() -> None:
    assert list(alternating(3, ("warm", "cold"))) == [
        (0, "warm"), (0, "cold"), (1, "cold"), (1, "warm"), (2, "warm"), (2, "cold")]
