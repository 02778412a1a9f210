"""The example programs of examples/ through the headless controller, with real TensorFlow:
a flags-style Supervisor program (async) and a TF_CONFIG MonitoredTrainingSession program
with SyncReplicasOptimizer and two ps (sync, whose chief hangs after its last step when run
by hand, and async). Each ends cleanly, every task counted as succeeded, the ps tasks
exiting by themselves once told, the last task within 10 s of the last step, nothing left
behind. All run at once: their staged starts mostly wait on one TensorFlow import at a time."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from tests.program.helpers import REPO, Finished, processes_of_runs, run_program
from trainer import protocol
from tui.common.exit_codes import ExitCode
from tui.config.load import apply_overrides, load_config
from tui.core.events import RunFinished, TaskStateChanged, TrainerEvent
from tui.core.task_state import TaskState

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]

#: Flags style sync runs through the app (tests/program/test_program_app.py).
EXAMPLES = (("flags_supervisor", "async"), ("tf_config_monitored", "sync"), ("tf_config_monitored", "async"))


async def test_the_example_programs_run_to_a_clean_end(tmp_path: Path) -> None:
    async def run(example: str, mode: str) -> Finished:
        config = apply_overrides(load_config(REPO / "examples" / example / "hosts.yaml"), steps="30",
                                 mode=mode)
        return await run_program(config, tmp_path / f"{example}-{mode}")

    runs = await asyncio.gather(*(run(example, mode) for example, mode in EXAMPLES))
    for (example, mode), run_ in zip(EXAMPLES, runs, strict=True):
        check_clean_end(run_)
        assert not processes_of_runs(tmp_path / f"{example}-{mode}")


def check_clean_end(run: Finished) -> None:
    assert run.code is ExitCode.OK, run.out[-4000:]
    (summary,) = [e.summary for e in run.events if isinstance(e, RunFinished)]
    assert summary.global_step >= 30
    assert all(t.state is TaskState.SUCCEEDED for t in summary.tasks), summary.tasks
    # The ps tasks were told the run is over and exited 0 by themselves.
    for ps in (t for t in summary.tasks if t.name.startswith("ps")):
        assert (ps.exit_code, ps.reason) == (0, ""), ps
    trainer_events = [e for e in run.events if isinstance(e, TrainerEvent)]
    placements = [e.event for e in trainer_events if isinstance(e.event, protocol.Placement)]
    assert placements and placements[0].variables, "the chief reported no placement"
    steps = [(e.t, e.event.global_step) for e in trainer_events if isinstance(e.event, protocol.Step)]
    last = max(step for _, step in steps)
    last_step_at = min(t for t, step in steps if step == last)
    last_exit_at = max(e.t for e in run.events if isinstance(e, TaskStateChanged) and e.new.is_finished)
    assert last_exit_at - last_step_at < 10.0, run.out[-4000:]
