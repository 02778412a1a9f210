"""bench.controller.app_scale at a tiny size: both sides launch real stand-in tasks, the app answers keys,
the past runs are listed; timings are the benchmark's to report. Keys are pressed for 1 s idle
and 1 s with the tasks running (the benchmark's 3 s and 10 s are for stable percentiles): a
handful of presses each, enough for every row and ratio of the table."""

from __future__ import annotations

import pytest

from bench.controller.app_scale import measure

pytestmark = pytest.mark.integration


async def test_app_scale_benchmark_smoke() -> None:
    table = await measure(tasks=4, past_runs=2, past_mb=0.05, idle_seconds=1.0, loaded_seconds=1.0)
    assert "4 tasks: launch to every task running, app (thread core) / headless" in table
    assert "4 tasks: launch to every task running, app (process core) / headless" in table
    assert "first frame, 2 past runs of 0.05 MB / empty runs folder" in table
    assert "x |" in table
    for core in ("thread", "process"):
        assert f"key-press latency p50 / p99, 4 tasks running / idle app ({core} core) |" in table
