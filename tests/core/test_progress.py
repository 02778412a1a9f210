"""The progress tracker keeps its aggregates as events come (issue 35): over any stream of
step reports and worker exits, each snapshot equals the one made from scratch from the
workers' latest reports."""

from __future__ import annotations

import math

from hypothesis import given, settings
from hypothesis import strategies as st

from trainer import protocol
from tui.core.progress import RATE_STALE_GAPS, RATE_STALE_MIN, RESUM_EVERY, ProgressTracker

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


def worker_step(index: int, n: int, rate: float) -> protocol.Step:
    return protocol.Step(role="worker", index=index, global_step=n, local_step=n, loss=0.5,
                         examples_per_sec=rate, step_time=0.0, target=1000)


def test_a_worker_that_stops_stepping_has_no_rate_until_it_steps_again() -> None:
    # Seen on the lab: a ps cut off, the workers stop stepping, and 162 ex/s (their last
    # rate) was shown 20 s into the cut. A rate over a window with no steps is not the last rate.
    tracker = ProgressTracker(target=1000)
    n = 0
    for second in range(10):  # both step every second
        for index, rate in ((0, 100.0), (1, 62.0)):
            n += 1
            tracker.update(f"worker{index}", worker_step(index, n, rate), 100.0 + second)
    assert tracker.snapshot(109.5).examples_per_sec == 162.0
    # worker1 stops (at 109); worker0 steps on.
    for second in range(10, 30):
        n += 1
        tracker.update("worker0", worker_step(0, n, 100.0), 100.0 + second)
        snap = tracker.snapshot(100.0 + second)
        rates = {w.task: w.examples_per_sec for w in snap.workers}
        if second < 109 - 100 + RATE_STALE_MIN:
            assert rates == {"worker0": 100.0, "worker1": 62.0}, second
        else:
            assert rates == {"worker0": 100.0, "worker1": None}, second
            assert snap.examples_per_sec == 100.0  # only what is known is summed
    # Then worker0 stops too (at 129): no rate, no steps/s, no ETA from them.
    assert tracker.next_stale_at(129.0) == 129.0 + RATE_STALE_MIN
    snap = tracker.snapshot(129.0 + RATE_STALE_MIN + 1)
    assert [w.examples_per_sec for w in snap.workers] == [None, None]
    assert snap.examples_per_sec == 0.0 and snap.steps_per_sec is None and snap.eta_seconds is None
    assert tracker.next_stale_at(129.0 + RATE_STALE_MIN + 1) is None
    # worker1 steps again: its rate is back (a snapshot without a time judges nothing stale).
    tracker.update("worker1", worker_step(1, n + 1, 60.0), 140.0)
    assert {w.task: w.examples_per_sec for w in tracker.snapshot(140.0).workers} == \
        {"worker0": None, "worker1": 60.0}
    assert tracker.snapshot().examples_per_sec == 160.0


def test_a_slow_reporter_is_given_its_usual_gap_before_its_rate_goes_unknown() -> None:
    tracker = ProgressTracker(target=0)
    for k in range(5):  # a step report every 10 s
        tracker.update("worker0", worker_step(0, k, 50.0), 10.0 * k)
    assert tracker.snapshot(40.0 + 3 * 10.0).workers[0].examples_per_sec == 50.0
    assert tracker.snapshot(40.0 + RATE_STALE_GAPS * 10.0 + 1).workers[0].examples_per_sec is None


def test_a_coordinators_workers_have_no_rate_once_it_stops_stepping() -> None:
    tracker = ProgressTracker(target=0)
    for k in range(1, 4):
        tracker.update("chief0", protocol.Step(role="chief", index=0, global_step=20 * k, local_step=20 * k,
                                               loss=None, examples_per_sec=400.0, step_time=0.05,
                                               coordinator=True, by_worker=(k, 3 * k)), float(k))
    assert [w.examples_per_sec for w in tracker.snapshot(3.0).workers] == [400.0, 100.0, 300.0]
    later = tracker.snapshot(3.0 + RATE_STALE_MIN + 0.1)
    assert [w.examples_per_sec for w in later.workers] == [None, None, None]
    assert later.examples_per_sec == 0.0


def test_a_held_out_loss_is_kept_apart_from_the_training_loss() -> None:
    tracker = ProgressTracker(target=0)
    tracker.update("chief0", protocol.Step(role="chief", index=0, t=1.0, global_step=8, local_step=8,
                                           loss=1.34, step_time=0.1, examples_per_sec=10.0), 1.0)
    tracker.update("chief0", protocol.Eval(role="chief", index=0, t=2.0, global_step=0, accuracy=None,
                                           loss=8.66, examples=0), 2.0)
    snapshot = tracker.snapshot()
    assert (snapshot.global_step, snapshot.loss) == (8, 1.34)
    assert (snapshot.eval_loss, snapshot.accuracy) == (8.66, None)
    assert (tracker.final_loss, tracker.final_eval_loss, tracker.final_accuracy) == (1.34, 8.66, None)
