"""The benchmarks at a tiny size, so they keep working. It asserts what must hold at
any size (no line lost from the run directory, keys handled); the timings are the
benchmark's to report, not a test's to judge."""

from __future__ import annotations

import pytest

from bench.flood import measure

pytestmark = pytest.mark.integration


async def test_flood_benchmark_smoke() -> None:
    result = await measure(tasks=2, rate=200, seconds=2)
    assert result.expected_lines == 800
    assert result.missing_lines == 0
    assert result.presses > 0 and result.flood_p99_ms > 0
    assert "lines missing from the run directory | 0 of 800" in result.table()


def test_placement_benchmark_smoke() -> None:
    from bench.placement import table

    text = table(models=("cnn",), ps_counts=(2,))
    assert "| cnn, round_robin, partitions 1 | 2.00 |" in text
    assert "| cnn, greedy, partitions = ps | 1.00 |" in text
