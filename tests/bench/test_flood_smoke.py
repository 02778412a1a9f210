"""The log-flood benchmark at a tiny size, so it keeps working. It asserts what must hold at
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
