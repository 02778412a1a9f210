"""A user's program in the app: an example program (flags + Supervisor, sync, real
TensorFlow) fills the panes our trainer fills and ends cleanly; the keys whose settings the
program's command does not use say so instead of pretending."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.program.helpers import REPO, processes_of_runs, program_folder
from tests.support import async_wait_until
from tui.app.app import TfdistApp
from tui.config.load import apply_overrides, load_config
from tui.core.events import RunOutcome
from tui.core.options import RunOptions
from tui.core.task_state import TaskState

pytestmark = pytest.mark.integration


async def test_keys_a_program_ignores_say_so(tmp_path: Path) -> None:
    config = load_config(program_folder(tmp_path, "plain.py", """\
        program:
          command: python plain.py --job={job} --index={index} --steps={steps}
          metrics: ['Step: (?P<step>\\d+).*Cost: (?P<loss>[0-9.]+)']
        cluster: {ps: [localhost:auto], worker: [localhost:auto]}
        training: {steps: 3}
        """))
    app = TfdistApp(RunOptions(config=config, runs_root=config.run_dir))
    async with app.run_test(size=(120, 40)) as pilot:
        await async_wait_until(lambda: app.dashboard.finished is not None, 60, what="the run's end",
                               pause=pilot.pause)
        assert all(r.state is TaskState.SUCCEEDED for r in app.dashboard.rows.values())
        before = app.pending
        await pilot.press("m", "plus", "p")
        assert app.pending == before
        messages = [n.message for n in app._notifications]
        assert "the program's command uses neither {mode} nor {sync}, so changing mode changes nothing" \
            in messages
        assert "the program's command uses no {partitions}, so changing partitions changes nothing" \
            in messages
        assert any(m.startswith("placement is the built-in trainer's setting") for m in messages)
        await pilot.press("q")
        await async_wait_until(lambda: not app.is_running, 30, what="the app to exit", pause=pilot.pause)
    assert not processes_of_runs(config.run_dir)


async def test_the_flags_example_in_sync_mode_fills_the_panes_and_ends_cleanly(tmp_path: Path) -> None:
    config = apply_overrides(load_config(REPO / "examples" / "flags_supervisor" / "hosts.yaml"),
                             steps="60", mode="sync")
    runs = tmp_path / "runs"
    app = TfdistApp(RunOptions(config=config, runs_root=runs))
    async with app.run_test(size=(120, 40)) as pilot:
        await async_wait_until(lambda: app.dashboard.finished is not None, 180, what="the run's end",
                               pause=pilot.pause)
        dashboard = app.dashboard
        assert dashboard.finished is not None and dashboard.finished.outcome is RunOutcome.SUCCEEDED, \
            dashboard.finished
        assert all(r.state is TaskState.SUCCEEDED for r in dashboard.rows.values()), dashboard.rows
        # The shim's placement (the Placement pane), progress and examples/sec (batch_size: 64,
        # the Throughput pane) and the program's own lines in each task's log pane, as for the
        # built-in trainer. (It prints its loss every 100 local steps: none in a 60-step run.)
        placement = dashboard.placement
        assert placement is not None and placement.variables and sum(placement.ps_bytes) > 0
        assert dashboard.global_step >= 60 and dashboard.target == 60
        assert max(dashboard.rate_history) > 0
        for worker in ("worker0", "worker1"):
            assert any("training finished" in line for line in dashboard.logs[worker].lines), worker
        await pilot.press("q")
        await async_wait_until(lambda: not app.is_running, 30, what="the app to exit", pause=pilot.pause)
    assert not processes_of_runs(runs)
