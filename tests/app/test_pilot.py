"""The app driven through Textual's Pilot against real local clusters."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from textual.pilot import Pilot

from tests.support import assert_no_trainers_left, async_wait_until, write_hosts
from trainer.settings import Mode, PlacementStrategy
from tui.app.app import TfdistApp
from tui.app.messages import (
    AllTasksRequested,
    CoreActionFailed,
    PendingSettingsChanged,
    PreviewReady,
    RelaunchRequested,
    TaskAction,
    TaskActionRequested,
)
from tui.app.screens import ConfirmScreen, HelpScreen
from tui.config.load import load_config
from tui.core.options import RunOptions
from tui.core.task_state import TaskState

pytestmark = pytest.mark.integration


async def until(pilot: Pilot, condition, timeout: float = 120.0, what: str = "") -> None:
    """Let the app run until ``condition()`` holds."""
    await async_wait_until(condition, timeout, what=what, pause=pilot.pause)


def make_app(tmp_path: Path, **training) -> tuple[TfdistApp, Path]:
    hosts = write_hosts(tmp_path / "hosts.yaml", nice=True, **training)
    config = load_config(hosts)
    return TfdistApp(RunOptions(config=config, runs_root=config.run_dir)), config.run_dir


def state(app: TfdistApp, name: str) -> TaskState:
    return app.dashboard.rows[name].state


def all_running(app: TfdistApp) -> bool:
    rows = app.dashboard.rows.values()
    return bool(rows) and all(r.state is TaskState.RUNNING for r in rows) and \
        app.dashboard.rows["worker1"].local_step is not None


async def test_task_keys_against_a_real_cluster(tmp_path: Path) -> None:
    app, runs = make_app(tmp_path)
    messages: list = []
    async with app.run_test(size=(120, 40), message_hook=messages.append) as pilot:
        await until(pilot, lambda: all_running(app), what="the cluster running")
        first_run = app.dashboard.run_id
        # Each task's share of this machine (tui.plan.allocation) is a column: cores, threads.
        shares = {name: app.table.get_cell(name, "share") for name in app.dashboard.rows}
        assert all(re.fullmatch(r"\d+c(/\d+t)?", share) for share in shares.values()), shares
        await pilot.press("down", "down")
        assert app.table.selected == "worker1"

        await pilot.press("x")
        assert TaskActionRequested(TaskAction.STOP, "worker1") in messages
        await until(pilot, lambda: state(app, "worker1") is TaskState.STOPPED, what="worker1 stopped")
        assert state(app, "worker0") is TaskState.RUNNING  # the others carry on

        await pilot.press("s")
        assert TaskActionRequested(TaskAction.START, "worker1") in messages
        await until(pilot, lambda: state(app, "worker1") is TaskState.RUNNING, what="worker1 again")
        assert app.dashboard.rows["worker1"].restarts == 1

        await pilot.press("r")
        assert TaskActionRequested(TaskAction.RESTART, "worker1") in messages
        await until(pilot, lambda: app.dashboard.rows["worker1"].restarts == 2
                    and state(app, "worker1") is TaskState.RUNNING, what="worker1 restarted")

        await pilot.press("X")
        assert isinstance(app.screen, ConfirmScreen)
        await pilot.press("y")
        assert AllTasksRequested(start=False) in messages
        await until(pilot, lambda: app.dashboard.finished is not None, what="all stopped")
        assert all(r.state is TaskState.STOPPED for r in app.dashboard.rows.values())

        await pilot.press("S")
        assert AllTasksRequested(start=True) in messages
        await until(pilot, lambda: app.dashboard.run_id != first_run and all_running(app),
                    what="a new run")

        await pilot.press("q")
        assert isinstance(app.screen, ConfirmScreen)
        await pilot.press("y")
        await until(pilot, lambda: not app.is_running, what="the app to exit")
    assert app.return_code == 0
    assert_no_trainers_left(runs)


async def test_settings_keys_preview_and_relaunch(tmp_path: Path) -> None:
    app, runs = make_app(tmp_path, ps=2)
    messages: list = []
    async with app.run_test(size=(120, 40), message_hook=messages.append) as pilot:
        await until(pilot, lambda: all_running(app) and app.dashboard.placement is not None,
                    what="the cluster running")
        first_run = app.dashboard.run_id

        await pilot.press("m")
        assert app.pending.mode is Mode.SYNC
        assert PendingSettingsChanged(app.pending) in messages
        assert "sync (pending)" in str(app.query_one("#status").render())

        await pilot.press("plus")
        assert app.pending.partitions == 2
        await until(pilot, lambda: app.preview is not None, what="the placement preview")
        previews = [m for m in messages if isinstance(m, PreviewReady)]
        assert previews[-1].placement.partitions == 2 and previews[-1].placement.num_ps == 2
        await pilot.press("minus")
        assert app.pending.partitions == 1
        await pilot.press("plus", "p")
        assert app.pending.placement is PlacementStrategy.ROUND_ROBIN
        await until(pilot, lambda: app.preview is not None
                    and app.preview.strategy == "round_robin", what="the round-robin preview")
        assert app.dashboard.settings.mode is Mode.ASYNC  # nothing applied yet

        await pilot.press("slash")
        assert app.focused is app.query_one("#filter")
        await pilot.press(*"ready")
        assert app.task_log.filter_text == "ready"
        await pilot.press("escape")
        assert app.task_log.filter_text == "" and not app.query_one("#filter").display

        panes = app.query_one("#panes")
        await pilot.press("tab")
        assert panes.active == "merged"
        await pilot.press("tab")
        assert panes.active == "placement"
        # The ps tasks' measured traffic, read from their TCP counters, beside the placement.
        await until(pilot, lambda: "measured traffic per ps" in str(
            app.query_one("#placement-traffic").render()), what="measured traffic bars")
        assert "expected" in str(app.query_one("#placement-traffic").render())
        await pilot.press("tab", "tab")
        assert panes.active == "runs"
        assert app.focused is app.query_one("#runs-table")
        await pilot.press("tab")
        assert panes.active == "logs"
        assert app.focused is app.table

        await pilot.press("question_mark")
        assert isinstance(app.screen, HelpScreen)
        await pilot.press("escape")
        assert not isinstance(app.screen, HelpScreen)

        await pilot.press("R")
        assert isinstance(app.screen, ConfirmScreen)
        assert "mode: async → sync" in app.screen.details
        assert "partitions: 1 → 2" in app.screen.details
        await pilot.press("y")
        (relaunch,) = [m for m in messages if isinstance(m, RelaunchRequested)]
        assert relaunch.settings == app.pending
        await until(pilot, lambda: app.dashboard.run_id != first_run and app.dashboard.placement is not None
                    and app.dashboard.global_step > 0, what="the relaunched run training")
        assert app.dashboard.settings.mode is Mode.SYNC
        assert app.dashboard.placement.partitions == 2
        assert app.dashboard.placement.strategy == "round_robin"

        await pilot.press("q", "y")
        await until(pilot, lambda: not app.is_running, what="the app to exit")
    assert_no_trainers_left(runs)


async def test_user_errors_are_notifications_not_crashes(tmp_path: Path) -> None:
    app, runs = make_app(tmp_path, dataset="mnist", data_path=str(tmp_path / "missing.npz"))
    messages: list = []
    async with app.run_test(size=(120, 40), message_hook=messages.append) as pilot:
        await until(pilot, lambda: app.dashboard.finished is not None, what="the failed run")
        failed = [r for r in app.dashboard.rows.values() if r.state is TaskState.FAILED]
        assert failed and failed[0].exit_code == 2
        assert any("dataset mnist not found" in line for line in app.dashboard.logs[failed[0].name].lines)
        assert any("failed" in n.message or "exited" in n.message for n in app._notifications)

        bad = app.pending.replace(batch_size=0)
        app.post_message(RelaunchRequested(bad))
        await until(pilot, lambda: any(isinstance(m, CoreActionFailed) for m in messages),
                    what="the relaunch refusal")
        (refusal,) = [m for m in messages if isinstance(m, CoreActionFailed)]
        assert "batch_size" in refusal.reason
        assert app.is_running
        await pilot.press("q")
        await until(pilot, lambda: not app.is_running, what="the app to exit")
    assert app.return_code == 1
    assert_no_trainers_left(runs)
