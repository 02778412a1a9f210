"""A core killed under its run (issue 33): the real app with its real core process, the core
SIGKILLed mid-run; the app writes the run's summary.json and its end, and ``tfdist-tui
compare`` reads it as a finished (interrupted) run, not one that "has not finished"."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import pytest

from tests.app.test_process_bridge import options_for
from tests.support import async_wait_until
from tui.app.app import TfdistApp
from tui.app.process_bridge import ProcessBridge
from tui.core.task_state import TaskState
from tui.experiments.finished_runs import read_run

pytestmark = pytest.mark.timeout(120)


async def test_a_sigkilled_core_leaves_a_run_with_its_record(tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAKE_FOREVER", "*")
    monkeypatch.setenv("FAKE_PS_STAY", "*")
    options, fake = options_for(tmp_path)
    app = TfdistApp(options, supervisor_options=fake)  # type: ignore[arg-type]
    async with app.run_test(size=(120, 40)) as pilot:
        def running() -> bool:
            rows = app.dashboard.rows  # (a new dict when the run starts)
            # (The run's step as the app's record has it: the progress the core sent, which
            # may come a tick after a worker's step does.)
            return bool(rows) and all(r.state is TaskState.RUNNING for r in rows.values()) \
                and (rows["worker0"].global_step or 0) > 0 and app.dashboard.global_step > 0

        await async_wait_until(running, 60, what="every task running", pause=pilot.pause)
        assert isinstance(app.core, ProcessBridge)
        run_dir = Path(app.dashboard.run_dir)
        os.kill(app.core.process.pid, signal.SIGKILL)
        summary_file = run_dir / "summary.json"
        await async_wait_until(summary_file.exists, 30, what="summary.json", pause=pilot.pause)
        summary = json.loads(summary_file.read_text())
        assert summary["outcome"] == "interrupted" and "signal 9" in summary["reason"], summary
        assert summary["global_step"] > 0 and {t["state"] for t in summary["tasks"]} == {"stopped"}
        last = (run_dir / "events.jsonl").read_text().splitlines()[-1]
        assert json.loads(last)["type"] == "run_finished"
        assert app.dashboard.finished is not None
        await pilot.press("q")
    finished = read_run(run_dir)  # what compare and the Runs pane read
    assert finished.outcome == "interrupted"
