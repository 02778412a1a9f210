"""The progress tracker keeps its aggregates as events come (issue 35): over any stream of
step reports and worker exits, each snapshot equals the one made from scratch from the
workers' latest reports."""

from __future__ import annotations

import math

from hypothesis import given, settings
from hypothesis import strategies as st

from trainer import protocol
from tui.core.progress import RESUM_EVERY, ProgressTracker

WORKERS = [f"worker{i}" for i in range(12)]

#: (worker, examples/sec) for a step report, or (worker, None) for that worker's exit.
Happening = tuple[str, float | None]
happenings = st.lists(st.tuples(st.sampled_from(WORKERS),
                                st.one_of(st.none(), st.floats(0, 1e6, allow_nan=False))),
                      max_size=300)


def step(rate: float, n: int) -> protocol.Step:
    return protocol.Step(role="worker", index=0, global_step=n, local_step=n, loss=None,
                         examples_per_sec=rate, step_time=0.0)


@settings(max_examples=200, deadline=None)
@given(happenings)
def test_each_snapshot_equals_the_one_made_from_scratch(stream: list[Happening]) -> None:
    tracker = ProgressTracker(target=0)
    latest: dict[str, float] = {}
    for n, (worker, rate) in enumerate(stream, 1):
        if rate is None:
            tracker.worker_exited(worker)
            latest.pop(worker, None)
        else:
            tracker.update(worker, step(rate, n), float(n))
            latest[worker] = rate
        snap = tracker.snapshot()
        assert [w.task for w in snap.workers] == sorted(latest, key=lambda t: (len(t), t))
        assert [w.examples_per_sec for w in snap.workers] == [latest[w.task] for w in snap.workers]
        assert math.isclose(snap.examples_per_sec, math.fsum(latest.values()), rel_tol=1e-9, abs_tol=1e-6)


def test_the_total_is_summed_afresh_so_rounding_cannot_pile_up() -> None:
    tracker = ProgressTracker(target=0)
    tracker.update("worker0", step(1e16, 1), 1.0)
    tracker.update("worker1", step(1.0, 2), 2.0)
    tracker.snapshot()
    # 1e16 + 1 - 1e16 loses the 1 in floats: a running total alone would say 0 here.
    tracker.update("worker0", step(0.0, 3), 3.0)
    for n in range(RESUM_EVERY):
        tracker.update("worker0", step(0.0, 4 + n), 4.0 + n)
    assert tracker.snapshot().examples_per_sec == 1.0
