"""``bench.controller.app_start``: the first steps read from a run directory, and an app that cannot start
ends the measure with why, not a hang (the whole measure runs in test_warm_smoke.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.controller.app_start import app_start, first_steps

REPO = Path(__file__).resolve().parents[2]


def _step(task: str, t: float) -> str:
    return json.dumps({"type": "trainer_event", "task": task,
                       "event": {"event": "step", "t": t, "global_step": 1}}) + "\n"


def test_first_steps_are_each_worker_s_earliest_stamp_and_a_half_written_line_waits(tmp_path: Path) -> None:
    run = tmp_path / "20261126-000000-abcdef"
    run.mkdir()
    events = run / "events.jsonl"
    assert first_steps(tmp_path) == {}
    events.write_text(json.dumps({"type": "run_started", "run_id": run.name}) + "\n"
                      + _step("worker0", 10.5) + _step("worker0", 11.0) + _step("worker1", 12.25)[:30])
    assert first_steps(tmp_path) == {"worker0": 10.5}
    events.write_text(events.read_text() + _step("worker1", 12.25)[30:])
    assert first_steps(tmp_path) == {"worker0": 10.5, "worker1": 12.25}


async def test_an_app_that_exits_before_training_ends_the_measure_with_its_exit_code(tmp_path: Path) -> None:
    hosts = tmp_path / "hosts.yaml"
    hosts.write_text("cluster:\n  ps: [localhost:auto\n")  # unclosed: a usage error, exit 2
    with pytest.raises(RuntimeError, match=r"the app exited \(2\) before \['worker0'\] stepped"):
        await app_start(hosts, tmp_path / "runs", 1, cold=True, repo=REPO, timeout=60)
