"""The example programs of examples/ through the headless controller, with real TensorFlow:
a flags-style Supervisor program (async) and a TF_CONFIG MonitoredTrainingSession program
with SyncReplicasOptimizer and two ps (sync, whose chief hangs after its last step when run
by hand). Each ends cleanly, every task counted as succeeded, the ps tasks exiting by
themselves once told, the last task within 10 s of the last step, nothing left behind."""

from __future__ import annotations

from pathlib import Path

import pytest

from trainer import protocol
from tui.config import apply_overrides, load_config
from tui.events import TaskState, TaskStateChanged, TrainerEvent
from tui.options import ExitCode

from .helpers import REPO, processes_of_runs, run_program

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]


@pytest.mark.parametrize(("example", "mode"), [("flags_supervisor", "async"),
                                               ("tf_config_monitored", "sync")])
async def test_an_example_program_runs_to_a_clean_end(tmp_path: Path, example: str, mode: str) -> None:
    config = apply_overrides(load_config(REPO / "examples" / example / "hosts.yaml"), steps="30",
                             mode=mode)
    runs = tmp_path / "runs"
    run = await run_program(config, runs)
    assert run.code is ExitCode.OK, run.out[-4000:]
    (finished,) = [e.summary for e in run.events if hasattr(e, "summary")]
    assert finished.global_step >= 30
    assert all(t.state is TaskState.SUCCEEDED for t in finished.tasks), finished.tasks
    # The ps tasks were told the run is over and exited 0 by themselves.
    for ps in (t for t in finished.tasks if t.name.startswith("ps")):
        assert (ps.exit_code, ps.reason) == (0, ""), ps
    trainer_events = [e for e in run.events if isinstance(e, TrainerEvent)]
    placements = [e.event for e in trainer_events if isinstance(e.event, protocol.Placement)]
    assert placements and placements[0].variables, "the chief reported no placement"
    steps = [(e.t, e.event.global_step) for e in trainer_events if isinstance(e.event, protocol.Step)]
    last = max(step for _, step in steps)
    last_step_at = min(t for t, step in steps if step == last)
    last_exit_at = max(e.t for e in run.events if isinstance(e, TaskStateChanged) and e.new.is_finished)
    assert last_exit_at - last_step_at < 10.0, run.out[-4000:]
    assert not processes_of_runs(runs)
