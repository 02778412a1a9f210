"""The measurement window rule (bench.harness.window) on made-up step events, and how a campaign
sizes its runs from a calibration run's window. No process is started."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from bench.harness.window import SIZE_MARGIN, Window, measure, reached, steps_for_window, warm_point
from bench.training import campaign, runs
from bench.training.run_records import RunConfig, RunRecord, Side, TaskRecord
from bench.training.runs import Budget
from trainer import protocol


def step(t: float, global_step: int, local_step: int) -> protocol.Step:
    return protocol.Step(role="worker", index=0, t=t, global_step=global_step,
                         local_step=local_step, loss=1.0, examples_per_sec=1.0, step_time=0.01)


#: Two async workers, 10 global steps a second each way: worker0 is warm (local step 20) at
#: t=2.0 (global 40), worker1 at t=2.5 (global 48); worker1 is the first to stop, at t=14.5.
WORKERS = [
    [step(0.5, 1, 1), step(1.0, 20, 10), step(2.0, 40, 20), step(8.0, 160, 80), step(15.0, 300, 150)],
    [step(0.6, 2, 1), step(1.5, 30, 15), step(2.5, 48, 24), step(9.0, 178, 89), step(14.5, 288, 144)],
]


def test_the_window_runs_from_the_last_worker_warm_to_the_first_last_step() -> None:
    assert warm_point(WORKERS) == WORKERS[1][2]
    window = measure(WORKERS)
    assert window == Window(start=2.5, end=14.5, start_step=48, end_step=288)
    assert window.seconds == pytest.approx(12.0)
    assert window.steps_per_sec == pytest.approx(240 / 12)
    assert window.examples_per_sec(64) == pytest.approx(240 * 64 / 12)


def test_no_window_until_every_worker_is_warm_and_has_stepped_since() -> None:
    assert warm_point([WORKERS[0], WORKERS[1][:2]]) is None
    assert measure([WORKERS[0], WORKERS[1][:2]]) is None
    assert measure([WORKERS[0][:3], WORKERS[1][:3]]) is None  # worker0's last step precedes worker1's warm
    assert warm_point([]) is None and measure([]) is None


def test_a_window_is_reached_once_it_has_lasted_the_seconds_asked() -> None:
    so_far = [WORKERS[0][:4], WORKERS[1][:4]]  # first last step t=8.0: 5.5 s since t=2.5
    assert reached(so_far, 5.5) and not reached(so_far, 5.6)
    assert reached(WORKERS, 12.0) and not reached(WORKERS, 12.1)
    assert not reached([WORKERS[0], WORKERS[1][:2]], 0.1)


def test_a_run_is_sized_from_its_calibration_for_the_window_with_a_margin() -> None:
    calibration = Window(start=3.0, end=5.0, start_step=40, end_step=240)  # 100 steps/s
    assert steps_for_window(calibration, 10.0, minimum=60) == 40 + math.ceil(100 * 10 * SIZE_MARGIN)
    assert steps_for_window(calibration, 0.01, minimum=60) == 60


def test_a_campaign_calibrates_every_configuration_and_falls_back_to_the_nominal_size(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    asked: list[tuple[RunConfig, Budget]] = []

    def calibration_run(side: Side, config: RunConfig, rep: int, directory: Path,
                        budget: Budget) -> RunRecord:
        asked.append((config, budget))
        record = RunRecord(side=side, config=config, rep=rep, launched_at=0.0)
        if config.model == "cnn":
            record.failure = "broken"
        else:
            record.tasks = {f"worker{i}": TaskRecord(f"worker{i}", list(steps))
                            for i, steps in enumerate(WORKERS)}
        return record

    monkeypatch.setattr(runs, "run", calibration_run)
    plan = campaign.Plan.build(("mlp", "cnn"), ("async",), lambda model, mode: (Side.BARE,),
                               reps=1, seconds=20.0)
    said: list[str] = []
    sized, records = campaign.calibrate(plan, tmp_path, said.append)
    assert [c.steps for c, _ in asked] == [campaign.UNBOUNDED_STEPS] * 2
    assert all(b.stop_after == campaign.CALIBRATION_SECONDS for _, b in asked)
    mlp, cnn = sized.configs[0][0], sized.configs[1][0]
    assert mlp.steps == 48 + math.ceil(20 * 20 * SIZE_MARGIN)  # 20 global steps/s in WORKERS' window
    assert cnn == plan.configs[1][0]  # calibration failed: the nominal size
    assert "failed (broken)" in said[1] and sized.window == 20.0
    assert [r.config.model for r in records] == ["mlp", "cnn"]
