"""The step anatomy: the sweep that gives each moment of a step to one part, the sampler's
interval, and the parts of a real traced step on real in-process ps servers."""

from __future__ import annotations

import itertools
import time

import pytest

from trainer import protocol
from trainer.anatomy import BUDGET, MIN_EVERY, Interval, Sampler, anatomy, dissect


def shares(parts: tuple[protocol.AnatomyPart, ...]) -> dict[str, float]:
    return {p.part if p.ps is None else f"{p.part} ps{p.ps}": p.share for p in parts}


def test_each_moment_goes_to_one_part_and_the_parts_add_up_to_the_step() -> None:
    found = [Interval(0, 40, "read", 0), Interval(10, 40, "read", 1),   # two ps read at once
             Interval(40, 60, "input"), Interval(45, 70, "compute"),    # compute wins over input
             Interval(0, 90, "push", 0)]                                # the ps waits all along
    parts = dissect(found, 0, 100, num_ps=2, sync=False)
    got = shares(parts)
    assert got == pytest.approx({"compute": 0.25, "input": 0.05, "read ps0": 0.25, "read ps1": 0.15,
                                 "push ps0": 0.2, "push ps1": 0.0, "rest": 0.1})
    assert sum(p.seconds for p in parts) == pytest.approx(100e-6)
    assert "wait" not in got  # async: nothing waits for other replicas, so it is not shown


def test_sync_wait_and_intervals_outside_the_step() -> None:
    found = [Interval(-50, 20, "compute"), Interval(20, 80, "wait"), Interval(60, 500, "push", 0)]
    got = shares(dissect(found, 0, 100, num_ps=1, sync=True))
    assert got == pytest.approx({"compute": 0.2, "input": 0.0, "wait": 0.6, "read ps0": 0.0,
                                 "push ps0": 0.2, "rest": 0.0})


def test_the_sampler_keeps_its_cost_under_the_budget() -> None:
    sampler = Sampler()
    step = 0
    traced = 0
    while step < 5000:
        step += 1
        due = sampler.due(step)
        traced += due
        # a traced step costs 20 times an untraced one
        sampler.ran(step, 0.02 if due else 0.001, traced=due)
    assert traced >= 1
    assert sampler.every >= MIN_EVERY
    assert sampler.cost <= 2 * BUDGET
    assert sampler.cost == pytest.approx(sampler.extra_seconds / sampler.total_seconds)
    assert not Sampler().due(1)  # never before the warm-up


@pytest.mark.integration
def test_a_real_traced_step_reads_and_pushes_its_ps() -> None:
    from tests.trainer.test_graph import ready_session
    from trainer.settings import TrainingSettings
    from trainer.tfimport import import_tf

    tf = import_tf()
    with ready_session(tf, TrainingSettings().replace(batch_size=16)) as (g, sess):
        sess.run(g.fetches())
        metadata = tf.RunMetadata()
        began = time.time()
        step, _, _ = sess.run(g.fetches(), options=tf.RunOptions(trace_level=tf.RunOptions.FULL_TRACE),
                              run_metadata=metadata)
        ended = time.time()
    event = anatomy(metadata, worker=0, num_ps=1, sync=False, start=began, end=ended,
                    global_step=int(step), local_step=2, sampler=Sampler())
    got = shares(event.parts)
    assert got["read ps0"] > 0 and got["compute"] > 0 and got["push ps0"] > 0
    assert sum(got.values()) == pytest.approx(1.0, abs=0.01)
    assert protocol.parse_event(event.to_json()) == event


def test_a_worker_that_slows_down_is_traced_as_often_in_seconds() -> None:
    """Seen in tmux: a worker's interval set at 836 steps from its typical step, then its
    steps grew 5x slower (starved of CPU): no sample for 53 s, and the straggler line showed a
    step from before it slowed. The interval holds in seconds too, within the same budget."""
    now = [0.0]
    sampler = Sampler(clock=lambda: now[0])
    traced_at: list[float] = []
    step = 0
    while now[0] < 600:
        step += 1
        slow = now[0] > 100  # from here on each step takes 5x as long
        due = sampler.due(step)
        seconds = (0.05 if slow else 0.01) + (0.04 if due else 0.0)  # a trace adds 40 ms
        now[0] += seconds
        sampler.ran(step, seconds, traced=due)
        if due:
            traced_at.append(now[0])
    gaps = [b - a for a, b in itertools.pairwise(traced_at) if a > 110]
    assert gaps and max(gaps) <= 0.04 / BUDGET + 0.1, max(gaps)  # 8 s, not 5 x 8 s
    assert sampler.cost <= BUDGET
