"""The restart policy with the real ``python -m trainer``: a worker killed with SIGKILL mid-run
is restarted, rejoins, and the run still reaches its target; the headless output, the
events and the summary say so."""

from __future__ import annotations

import dataclasses
import io
import json
import os
import signal
from pathlib import Path

import pytest

from tests.support import assert_no_trainers_left
from trainer import protocol
from trainer.settings import Mode
from tui.config import Job, RestartMode, RestartPolicy
from tui.events import ControllerEvent, RunOutcome, TaskState, TaskStateChanged, TrainerEvent
from tui.headless import run_headless
from tui.options import ExitCode, RunOptions
from tui.supervisor import Supervisor

from .fakes import make_config

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]


@pytest.mark.asyncio
async def test_a_worker_killed_mid_run_is_restarted_and_the_run_reaches_its_target(tmp_path: Path) -> None:
    config = make_config(tmp_path, mode=Mode.ASYNC, steps=3000, log_every=50)
    policy = RestartPolicy(policy=RestartMode.ON_FAILURE, max_restarts=2, backoff=0.5)
    config = dataclasses.replace(config, restart_overrides={Job.WORKER: policy})
    supervisor = Supervisor(config, runs_root=tmp_path / "runs", grace=2.0)
    killed: list[int] = []

    def kill_worker1_once_it_trains(event: ControllerEvent) -> None:
        # The first step event of worker1's first launch: it is mid-run. Kill it like the OOM
        # killer would.
        if killed or not isinstance(event, TrainerEvent) or event.task != "worker1":
            return
        if isinstance(event.event, protocol.Step):
            pid = next(t.pid for t in supervisor.tasks() if t.name == "worker1")
            assert pid is not None
            os.kill(pid, signal.SIGKILL)
            killed.append(pid)

    states: list[TaskStateChanged] = []
    supervisor.subscribe(kill_worker1_once_it_trains)
    supervisor.subscribe(lambda e: states.append(e) if isinstance(e, TaskStateChanged) else None)
    out, err = io.StringIO(), io.StringIO()
    code = await run_headless(RunOptions(config=config, runs_root=tmp_path / "runs"), supervisor=supervisor,
                              out=out, err=err, handle_signals=False)
    text = out.getvalue()
    assert killed, text
    assert code is ExitCode.OK, text[-4000:] + err.getvalue()
    assert "worker1 | warning: was killed by SIGKILL; restart 1 of 2 in 0.5 s" in text
    worker1 = [(s.new, s.exit_code) for s in states if s.task == "worker1"]
    assert (TaskState.FAILED, -signal.SIGKILL) in worker1
    assert [s for s, _ in worker1].count(TaskState.RUNNING) == 2  # it rejoined
    assert worker1[-1] == (TaskState.SUCCEEDED, 0)
    (run_dir,) = (tmp_path / "runs").iterdir()
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["outcome"] == RunOutcome.SUCCEEDED.value
    assert summary["global_step"] >= summary["target"] == 3000
    assert {t["name"]: t["restarts"] for t in summary["tasks"]} == {"ps0": 0, "worker0": 0, "worker1": 1}
    assert_no_trainers_left(tmp_path / "runs")
