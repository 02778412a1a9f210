"""The TF2 ParameterServerStrategy example under the headless controller, as its hosts.yaml
says (with 2 ps, so the partitioner shards a variable across them): the coordinator trains,
its placement and progress reach the controller through ``tfdist_report`` (the shim's own
TF2 placement then stays quiet), and once it has exited 0 the servers (worker and ps) are
sent ``end``: each ends inside its ``join()`` with exit 0 at once, every task
succeeded, no process left."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from tests.program.helpers import processes_of_runs, run_program
from trainer import protocol
from tui.common.exit_codes import ExitCode
from tui.config.load import apply_overrides, load_config
from tui.core.events import Notice, RunFinished, TaskStateChanged, TrainerEvent
from tui.core.task_state import TaskState
from tui.program.end_rules import HANG_AFTER

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "tf2_ps_strategy"
STEPS = 30
#: The product's promise: the last task is gone within 10 s of the last training step.
END_WITHIN = 10.0
#: The servers go within this long of the chief's exit: `end` at once, well before the
#: hang watch (HANG_AFTER) could have ended them.
SERVERS_END_WITHIN = 3.0

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]


async def test_the_example_runs_to_completion_and_leaves_nothing(tmp_path: Path) -> None:
    folder = tmp_path / "tf2"
    folder.mkdir()
    shutil.copy(EXAMPLE / "train.py", folder / "train.py")
    document = yaml.safe_load((EXAMPLE / "hosts.yaml").read_text())
    document["cluster"] = {"ps": ["localhost:auto"] * 2, "chief": ["localhost:auto"],
                           "worker": ["localhost:auto"]}
    (folder / "hosts.yaml").write_text(yaml.safe_dump(document))
    config = apply_overrides(load_config(folder / "hosts.yaml"), steps=STEPS)
    runs = tmp_path / "runs"

    run = await run_program(config, runs)

    assert run.code is ExitCode.OK, run.out[-3000:]
    (finished,) = [e for e in run.events if isinstance(e, RunFinished)]
    summary = finished.summary
    assert summary.global_step == STEPS and summary.final_loss is not None
    assert {t.name: t.state for t in summary.tasks} == dict.fromkeys(
        ("ps0", "ps1", "worker0", "chief0"), TaskState.SUCCEEDED)
    reported = [e for e in run.events if isinstance(e, TrainerEvent) and e.task == "chief0"]
    (placement,) = [e.event for e in reported if isinstance(e.event, protocol.Placement)]
    assert placement.num_ps == 2 and min(placement.ps_bytes) > 0
    assert {v.ps for v in placement.variables if v.variable == "hidden/weights"} == {0, 1}
    last_step = max(e.t for e in reported if isinstance(e.event, protocol.Step))
    exits = {e.task: e.t for e in run.events if isinstance(e, TaskStateChanged) and e.exit_code is not None}
    assert max(exits.values()) - last_step < END_WITHIN
    assert max(exits.values()) - exits["chief0"] < min(SERVERS_END_WITHIN, HANG_AFTER)
    # Under the shim each server ends inside join() on `end`, with exit 0.
    assert {t.name: (t.exit_code, t.reason) for t in summary.tasks} == dict.fromkeys(
        ("ps0", "ps1", "worker0", "chief0"), (0, ""))
    notices = [e.text for e in run.events if isinstance(e, Notice)]
    assert not [text for text in notices if "chief0 finished: ended" in text]
    assert not processes_of_runs(runs)
