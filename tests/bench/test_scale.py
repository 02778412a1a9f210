"""bench.controller.scale at a tiny size: 4 light tasks, idle and stepping, headless and the app; it
asserts what holds at any size (every task came up, the controller's CPU was read, the
stepping tasks' lines reached their logs, the app answered keys); the figures are the
benchmark's to report."""

from __future__ import annotations

import pytest

from bench.controller.scale import Case, Front, Mode, measure

pytestmark = pytest.mark.integration


@pytest.mark.parametrize("front", list(Front))
def test_scale_benchmark_smoke(front: Front) -> None:
    idle = measure(Case(4, Mode.IDLE, front), window=1.5, settle=0.5, keys=1.0)
    stepping = measure(Case(4, Mode.STEPPING, front), window=2.0, settle=0.5, keys=1.0)
    for result in (idle, stepping):
        assert result.up > 0 and result.cpu >= 0 and result.window >= 1.5
        assert result.row(None).startswith(f"| 4 | {result.case.mode.label} | {front.value} |")
    assert stepping.lines >= 4  # 4 tasks at 5 lines/s for 2 s: some lines at least, on a loaded machine
    assert ("µs" in stepping.row(None)) and ("µs" not in idle.row(None))
    if front is Front.APP:
        assert stepping.keys and all(k > 0 for k in stepping.keys)
        assert stepping.front_cpu <= stepping.cpu
    else:
        assert not stepping.keys
