"""The full trace the step anatomy is checked against (bench.training.step_profile): each
part's share of a step from a Chrome trace's events."""

from __future__ import annotations

import pytest

from bench.training.step_profile import trace_shares

WORKER = "/job:worker/replica:0/task:0/device:CPU:0"
PS = "/job:ps/replica:0/task:0/device:CPU:0"


def lane(pid: int, name: str) -> dict:
    return {"name": "process_name", "ph": "M", "pid": pid, "args": {"name": name}}


def op(pid: int, name: str, ts: float, dur: float) -> dict:
    return {"ph": "X", "pid": pid, "tid": 0, "name": name, "ts": ts, "dur": dur}


def test_each_part_is_the_union_of_its_events_within_the_step() -> None:
    trace = {"traceEvents": [
        lane(1, f"{WORKER} Compute"), lane(2, f"{WORKER} Tensors"), lane(3, f"{PS} Compute"),
        op(1, "RecvTensor", 100, 200),          # the read: 100-300
        op(1, "IteratorGetNext", 150, 50),      # input, inside the read
        op(1, "MatMul", 300, 300),              # compute 300-600 ...
        op(1, "ReluGrad", 500, 200),            # ... overlapping: 300-700 in all
        op(1, "Const", 0, 1000),                # constants are nobody's time
        op(2, "MatMul", 0, 1000),               # a tensor lane, not an op's
        op(3, "RecvTensor", 650, 250),          # the push on the ps: 650-900 ...
        op(3, "ApplyGradientDescent", 880, 100),  # ... and its apply, cut at the step's end
    ]}
    shares = trace_shares(trace, 0.0, 950.0)
    assert shares["read"] == pytest.approx(200 / 950)
    assert shares["input"] == pytest.approx(50 / 950)
    assert shares["compute"] == pytest.approx(400 / 950)
    assert shares["push"] == pytest.approx(300 / 950)
    # Covered by something: 100-950; the rest is 0-100.
    assert shares["rest"] == pytest.approx(100 / 950)
