"""The warm benchmark's wait for a phase (bench/training/warm.py): one that runs out of time
says what the run's tasks were doing, so a slow restart reads differently from a failed one."""

from __future__ import annotations

import pytest

from bench.training.warm import _Steps
from tui.core.events import TaskStateChanged
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
