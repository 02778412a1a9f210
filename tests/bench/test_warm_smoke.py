"""``python -m bench.training.warm`` at a tiny size, so it keeps working: every phase measured on both
sides, every warm first start forked every task, the seeded loss curves agree, and the table
is written. The timings are the benchmark's to report, not a test's to judge.

One worker beside the ps (the benchmark's ``--workers 1``): each phase still starts, kills or
relaunches real tasks on both sides, with a third fewer TensorFlow imports on the cold side
than the default two workers. One pool serving two workers of a run is
tests/core/supervisor/test_prestart.py's to check."""

from __future__ import annotations

import math

import pytest

from bench.training.warm import SIDES, measure, report

# About 60 s on a quiet machine. On one shared by other runs (loads of 16 to 140 on 2 cores)
# a run took up to 600 s, and one phase (a first start, 2 TensorFlow imports starved of CPU)
# over the benchmark's 240 s: each phase gets PHASE_LIMIT here, the whole test the timeout
# below; both are for a hang, not for a busy machine.
PHASE_LIMIT = 480.0
pytestmark = [pytest.mark.integration, pytest.mark.timeout(1200)]


async def test_warm_benchmark_smoke() -> None:
    results = await measure(reps=1, steps_seeded=20, workers=1, phase_limit=PHASE_LIMIT)
    for side in SIDES:
        (sample,) = results.samples[side]
        for value in (sample.first_start, sample.worker_restart, sample.ps_restart, sample.relaunch,
                      sample.command_start, sample.app_start, sample.rss_mib, sample.pss_mib):
            assert math.isfinite(value) and value > 0, (side, sample)
    assert results.samples["warm"][0].warm_tasks == 2  # the ps and the worker
    assert results.samples["cold"][0].warm_tasks == 0
    assert results.losses["warm"] and results.losses["warm"] == results.losses["cold"]
    text = report(results)
    assert "| first start, every worker stepping |" in text and "identical" in text
