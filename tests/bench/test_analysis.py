"""The benchmarks' arithmetic on made-up runs: windows, throughput, CPU interpolation, the
end latency, figures and their verdicts. No process is started."""

from __future__ import annotations

import math

import pytest

from bench.harness.report import Figure, Target, ratios, within_noise
from bench.harness.window import WARMUP_LOCAL_STEPS, Window
from bench.training import run_records
from bench.training.campaign import steps_for
from bench.training.run_records import RunConfig, RunRecord, Side, TaskRecord
from trainer import protocol


def step(index: int, t: float, global_step: int, local_step: int) -> protocol.Step:
    return protocol.Step(role="worker", index=index, t=t, global_step=global_step,
                         local_step=local_step, loss=1.0, examples_per_sec=1.0, step_time=0.01)


def record(side: Side = Side.BARE, mode: str = "async") -> RunRecord:
    config = RunConfig(model="mlp", mode=mode, steps=200, workers=2)
    result = RunRecord(side=side, config=config, rep=0, launched_at=100.0)
    # worker0 warms up at t=103 (global 30), worker1 at t=104 (global 45); the first of them
    # to take its last step is worker1 at t=110 (global 195).
    result.tasks["ps0"] = TaskRecord("ps0", exited_at=110.6, exit_code=0)
    result.tasks["worker0"] = TaskRecord("worker0", [step(0, 102.0, 1, 1), step(0, 103.0, 30, 20),
                                                     step(0, 111.0, 200, 100)], 111.2, 0)
    result.tasks["worker1"] = TaskRecord("worker1", [step(1, 102.5, 2, 1), step(1, 104.0, 45, 25),
                                                     step(1, 110.0, 195, 99)], 110.5, 0)
    return result


def test_window_runs_from_every_worker_warm_to_the_first_last_step() -> None:
    window = run_records.window(record())
    assert window == Window(start=104.0, end=110.0, start_step=45, end_step=195)
    asynchronous = RunConfig(mode="async")
    assert window.examples_per_sec(asynchronous.examples_per_global_step) == pytest.approx(150 * 64 / 6)
    sync = RunConfig(mode="sync", workers=2)
    assert window.examples_per_sec(sync.examples_per_global_step) == pytest.approx(2 * 150 * 64 / 6)


def test_no_window_while_a_worker_is_not_warm() -> None:
    cold = record()
    cold.tasks["worker1"].steps = cold.tasks["worker1"].steps[:1]
    assert run_records.window(cold) is None
    assert run_records.warm_start(cold) is None


def test_first_steps_and_end_latency() -> None:
    run = record()
    assert run_records.first_steps(run) == {"worker0": 2.0, "worker1": 2.5}
    assert run_records.end_seconds(run) == pytest.approx(111.2 - 111.0)
    controller = record(Side.HEADLESS)
    controller.controller_exited_at = 112.0
    assert run_records.end_seconds(controller) == pytest.approx(1.0)


def test_controller_cpu_is_interpolated_between_samples() -> None:
    run = record(Side.HEADLESS)
    run.cpu_samples = [(100.0, 1.0), (105.0, 2.0), (110.0, 4.0)]
    assert run_records.controller_cpu(run, 102.5, 107.5) == pytest.approx(3.0 - 1.5)
    assert run_records.controller_cpu(run, 99.0, 107.5) is None  # not sampled that early


def test_figures_quote_median_range_and_verdict() -> None:
    figure = Figure("controller / bare", (1.02, 1.20, 0.98), target=Target("<=", 1.10),
                    held_back="its own start-up")
    assert figure.cell() == "1.02 (0.98–1.20)"
    assert figure.verdict() == "met"
    slow = Figure("x", (1.2, math.nan, 1.3), target=Target("<=", 1.10), held_back="why", attempted=3)
    assert slow.cell() == "1.25 (1.20–1.30) [2 of 3 runs]"
    assert slow.verdict() == "**missed**: why"
    assert Figure("y", (math.nan,), target=Target(">=", 1.0)).verdict().startswith("**no data**")
    assert ratios([(2.0, 4.0), (None, 1.0), (1.0, 0.0)])[0] == 0.5
    assert all(math.isnan(r) for r in ratios([(None, 1.0), (1.0, 0.0)]))


def test_run_sizes_leave_room_for_warm_up() -> None:
    assert steps_for("mlp", "async", 5.0, 2, 10) == math.ceil(195 * 6)
    assert steps_for("cnn", "sync", 0.1, 2, 10) == 2 * (WARMUP_LOCAL_STEPS + 20)


def test_staged_handoffs_need_every_task_loaded_and_ready() -> None:
    run = record(Side.HEADLESS)
    for name, loaded, ready in (("ps0", 101.0, 101.1), ("worker0", 101.5, 101.6), ("worker1", 101.4, 101.7)):
        run.tasks[name].milestones.update(loaded=loaded, ready=ready)
    assert run_records.staged_handoffs(run) == pytest.approx(101.7 - 101.5)
    del run.tasks["worker1"].milestones["loaded"]
    assert run_records.staged_handoffs(run) is None


def test_a_miss_within_the_spread_is_called_noise() -> None:
    target = Target(">=", 1.0)
    assert "on both sides of 1" in within_noise((0.92, 1.21, 0.93), target)
    assert within_noise((0.92, 0.95, 0.93), target) == ""
    assert within_noise((0.92,), target) == ""
