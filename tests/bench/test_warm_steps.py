"""The warm benchmark's wait for a phase (bench/training/warm.py): one that runs out of time
says what the run's tasks were doing, so a slow restart reads differently from a failed one."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from bench.training.warm import _Steps
from tui.core.events import RunFinished, RunOutcome, RunSummary, TaskStateChanged
from tui.core.task_state import TaskState


async def test_a_phase_out_of_time_names_each_task_s_last_state() -> None:
    steps = _Steps()
    steps(TaskStateChanged(task="ps0", old=TaskState.PENDING, new=TaskState.STARTING))
    steps(TaskStateChanged(task="worker0", old=TaskState.RUNNING, new=TaskState.STOPPED,
                           reason="cluster restart after ps0 failed"))
    with pytest.raises(RuntimeError) as raised:
        await steps.until(lambda: False, timeout=0.2)
    assert str(raised.value) == ("the phase did not end within 0.2 s: ps0 starting; "
                                 "worker0 stopped (cluster restart after ps0 failed)")


async def test_a_phase_whose_run_ended_says_so_at_once() -> None:
    # A start that failed (a ps not ready in time on a starved machine) ends the run: the phase
    # waited its whole limit (480 s) for steps that could not come.
    steps = _Steps(limit=3600.0)
    steps(TaskStateChanged(task="ps0", old=TaskState.STARTING, new=TaskState.FAILED,
                           reason="did not report ready within 120 s"))
    summary = RunSummary(run_id="r", run_dir=Path("r"), outcome=RunOutcome.FAILED,
                         reason="start failed: ps0 did not report ready within 120 s", started_at=0.0,
                         wall_time=1.0, global_step=0, target=0, final_loss=None, final_accuracy=None,
                         tasks=())
    waiting = asyncio.ensure_future(steps.until(lambda: False))
    await asyncio.sleep(0.05)
    steps(RunFinished(summary=summary))
    with pytest.raises(RuntimeError) as raised:
        await asyncio.wait_for(waiting, 10)
    late = "did not report ready within 120 s"
    assert str(raised.value) == (f"the run ended (failed: start failed: ps0 {late}) "
                                 f"before the phase did: ps0 failed ({late})")
