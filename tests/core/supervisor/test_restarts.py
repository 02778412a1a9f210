"""The restart policy with the real ``python -m trainer``, each fault by SIGKILL mid-run: a
ps takes the whole cluster down, which restarts and resumes from the latest checkpoint; a
restarted chief rejoins a live cluster (async and sync); in sync mode a dead worker is
restarted and nobody waits forever. Every run still reaches its target with exit code 0,
the headless output and the summary say what happened, and nothing is left running."""

from __future__ import annotations

import dataclasses
import io
import json
import os
import signal
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.support import assert_no_trainers_left
from tests.support.fakes import make_config
from trainer import protocol
from trainer.settings import Mode
from tui.common.exit_codes import ExitCode
from tui.config.cluster import ClusterConfig, RestartMode, RestartPolicy
from tui.core.events import ControllerEvent, RunOutcome, TaskStateChanged, TrainerEvent
from tui.core.options import RunOptions
from tui.core.supervisor.lifecycle import Supervisor
from tui.core.supervisor.records import SupervisorOptions
from tui.core.task_state import TaskState
from tui.headless import run_headless

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]
#: A run that hangs is stopped (exit 3) before the test's own limit, so that the failure
#: shows the run's output: once, in a loaded full run, the sync run below hung for 300 s
#: and pytest-timeout showed only an idle event loop (it passed 7 of 7 alone, 3 with busy loops).
RUN_LIMIT = 200.0


def limited(config: ClusterConfig, tmp_path: Path) -> RunOptions:
    """The command line of these runs: ``--timeout RUN_LIMIT``."""
    return RunOptions(config=config, runs_root=tmp_path / "runs", timeout=RUN_LIMIT)


#: The chief of make_config's cluster.
CHIEF = "worker0"

Reported = Callable[[str, protocol.Event], bool]
"""Whether a trainer event, and the task that reported it, is the moment to act."""


def killer(supervisor: Supervisor, plan: list[tuple[str, Reported]]
           ) -> tuple[Callable[[ControllerEvent], None], list[tuple[str, int]]]:
    """A subscriber that SIGKILLs task after task: each ``(task, when)`` of ``plan`` in turn,
    at the first trainer event ``when`` accepts (once the previous kill has happened).
    Records ``(task, pid)`` of each kill."""
    kills: list[tuple[str, int]] = []

    def on_event(event: ControllerEvent) -> None:
        if len(kills) == len(plan) or not isinstance(event, TrainerEvent):
            return
        victim, when = plan[len(kills)]
        if when(event.task, event.event):
            pid = next(t.pid for t in supervisor.tasks() if t.name == victim)
            assert pid is not None
            os.kill(pid, signal.SIGKILL)
            kills.append((victim, pid))

    return on_event, kills


def step_at_least(step: int) -> Reported:
    return lambda _task, e: isinstance(e, protocol.Step) and e.global_step >= step


def after_the_chief_rejoined(steps: int) -> Reported:
    """Accepts the chief's own step event ``steps`` global steps after its (next) `initialized`:
    its own, because a restart's incident records the killed task's last report, and another
    worker's step may be up to ``log_every`` steps ahead of it."""
    rejoined: list[int] = []

    def when(task: str, event: protocol.Event) -> bool:
        if isinstance(event, protocol.Initialized) and event.is_chief:
            rejoined.append(event.global_step)
        return bool(rejoined) and task == CHIEF and isinstance(event, protocol.Step) and \
            event.global_step >= rejoined[0] + steps

    return when


async def test_async_a_ps_then_the_chief_killed_mid_run(tmp_path: Path) -> None:
    """The ps: the whole cluster restarts and resumes from the latest checkpoint. Then the
    chief: it alone restarts and rejoins the live cluster, without re-initialising or
    restoring anything (which would throw the other worker's progress away)."""
    every = 200
    config = make_config(tmp_path, mode=Mode.ASYNC, steps=2500, log_every=50, checkpoint_every=every)
    config = dataclasses.replace(config, restart=RestartPolicy(policy=RestartMode.ON_FAILURE,
                                                               max_restarts=1, backoff=0.5))
    supervisor = Supervisor(config, runs_root=tmp_path / "runs", options=SupervisorOptions(grace=2.0))
    on_event, kills = killer(supervisor, [("ps0", step_at_least(500)),
                                          ("worker0", after_the_chief_rejoined(100))])
    saved: list[int] = []
    restored: list[int] = []
    states: list[TaskStateChanged] = []

    def checkpoints(event: ControllerEvent) -> None:
        if isinstance(event, TrainerEvent) and isinstance(event.event, protocol.Checkpoint):
            action = event.event.action
            if action == protocol.CHECKPOINT_SAVED and not kills:
                saved.append(event.event.global_step)
            elif action == protocol.CHECKPOINT_RESTORED:
                restored.append(event.event.global_step)

    supervisor.subscribe(on_event)
    supervisor.subscribe(checkpoints)
    supervisor.subscribe(lambda e: states.append(e) if isinstance(e, TaskStateChanged) else None)
    out, err = io.StringIO(), io.StringIO()
    code = await run_headless(limited(config, tmp_path), supervisor=supervisor,
                              out=out, err=err, handle_signals=False)
    text = out.getvalue()
    assert [name for name, _ in kills] == ["ps0", "worker0"], text[-4000:]
    assert code is ExitCode.OK, text[-4000:] + err.getvalue()
    (run_dir,) = (tmp_path / "runs").iterdir()
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["outcome"] == RunOutcome.SUCCEEDED.value
    assert summary["global_step"] >= summary["target"] == 2500
    cluster, worker = summary["incidents"]
    assert (cluster["kind"], cluster["task"], cluster["reason"]) == (
        "cluster_restart", "ps0", "was killed by SIGKILL")
    # The chief restored the newest checkpoint written before the kill (into the run
    # directory: no checkpoint_dir was set), so at most one interval of steps was lost.
    assert saved and restored and restored[0] >= saved[-1]
    assert str(run_dir / "checkpoints") in text
    assert cluster["resumed_step"] == restored[0]
    lost = cluster["global_step"] - cluster["resumed_step"]
    assert 0 <= lost <= every, cluster
    assert (f"ps0 was killed by SIGKILL at step {cluster['global_step']}: cluster restarted, resumed "
            f"from step {restored[0]} ({lost} steps lost)") in text
    # The chief alone: restarted, rejoined the live cluster where it was; only the cluster
    # restart restored a checkpoint.
    assert (worker["kind"], worker["task"]) == ("task_restart", "worker0")
    assert worker["resumed_step"] >= worker["global_step"] >= restored[0] + 100
    assert len(restored) == 1
    assert "worker0 | warning: was killed by SIGKILL; restart 1 of 1 within 600 s in 0.5 s" in text
    chief = [(s.new, s.exit_code) for s in states if s.task == "worker0"]
    assert (TaskState.FAILED, -signal.SIGKILL) in chief and chief[-1] == (TaskState.SUCCEEDED, 0)
    assert {t["name"]: t["restarts"] for t in summary["tasks"]} == {"ps0": 1, "worker0": 1, "worker1": 0}
    assert_no_trainers_left(tmp_path / "runs")


async def test_sync_mode_survives_the_chief_then_a_worker_being_killed(tmp_path: Path) -> None:
    config = make_config(tmp_path, mode=Mode.SYNC, steps=1200, log_every=50)
    config = dataclasses.replace(config, restart=RestartPolicy(policy=RestartMode.ON_FAILURE,
                                                               max_restarts=1, backoff=0.5))
    supervisor = Supervisor(config, runs_root=tmp_path / "runs", options=SupervisorOptions(grace=2.0))
    on_event, kills = killer(supervisor, [("worker0", step_at_least(300)),
                                          ("worker1", after_the_chief_rejoined(100))])
    supervisor.subscribe(on_event)
    out, err = io.StringIO(), io.StringIO()
    code = await run_headless(limited(config, tmp_path), supervisor=supervisor,
                              out=out, err=err, handle_signals=False)
    text = out.getvalue()
    assert [name for name, _ in kills] == ["worker0", "worker1"], text[-4000:]
    assert code is ExitCode.OK, text[-4000:] + err.getvalue()
    assert "worker0 | warning: was killed by SIGKILL; restart 1 of 1 within 600 s in 0.5 s" in text
    assert "worker1 | warning: was killed by SIGKILL; restart 1 of 1 within 600 s in 0.5 s" in text
    (run_dir,) = (tmp_path / "runs").iterdir()
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["outcome"] == RunOutcome.SUCCEEDED.value
    assert summary["global_step"] == summary["target"] == 1200  # sync: exactly the target
    incidents = [(i["kind"], i["task"]) for i in summary["incidents"]]
    assert incidents == [("task_restart", "worker0"), ("task_restart", "worker1")]
    # The chief rejoined the live cluster where it was (no re-initialisation, no rollback).
    chief_incident = summary["incidents"][0]
    assert chief_incident["resumed_step"] >= 300
    assert {t["name"]: t["restarts"] for t in summary["tasks"]} == {"ps0": 0, "worker0": 1, "worker1": 1}
    for incident in summary["incidents"]:
        assert f"{incident['task']} was killed by SIGKILL at step {incident['global_step']}: restarted, " \
               f"rejoined at step {incident['resumed_step']}" in text
    assert_no_trainers_left(tmp_path / "runs")
