"""Every operator key through Pilot, against the real core (session, supervisor, its thread)
with scripted task processes that train by themselves (tests/app/fakecore.py): about the
app, so no wait here depends on how fast a loaded machine imports TensorFlow."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from textual.pilot import Pilot
from textual.widgets import DataTable, TabbedContent, TabPane

from tests.app.fakecore import fake_app
from tests.app.scripted import placement
from tests.support import async_wait_until, write_hosts
from trainer.settings import Mode, PlacementStrategy, TrainingSettings
from tui.app import pending
from tui.app.app import TfdistApp
from tui.app.messages import (
    AllTasksRequested,
    PendingSettingsChanged,
    PreviewReady,
    RelaunchRequested,
    TaskAction,
    TaskActionRequested,
)
from tui.app.runs import RunsView
from tui.app.screens import ConfirmScreen, HelpScreen
from tui.common.exit_codes import ExitCode
from tui.config.cluster import ClusterConfig
from tui.config.load import load_config
from tui.core.options import RunOptions
from tui.core.task_state import TaskState

#: Scripted tasks answer in milliseconds; this only ends a test that hangs.
HANG = 60.0


async def until(pilot: Pilot, condition, what: str) -> None:
    """Until the core's events say ``condition``; then the table is drawn from them at once
    (it is redrawn at most every 0.4 s while tasks change)."""
    await async_wait_until(condition, HANG, what=what, pause=pilot.pause, interval=0.02)
    app = pilot.app
    assert isinstance(app, TfdistApp)
    app.refresh_dashboard(force=True)


def options_for(tmp_path: Path, **hosts) -> RunOptions:
    config: ClusterConfig = load_config(write_hosts(tmp_path / "hosts.yaml", **hosts))
    return RunOptions(config=config, runs_root=tmp_path / "runs")


def state(app: TfdistApp, name: str) -> TaskState:
    return app.dashboard.rows[name].state


def all_running(app: TfdistApp) -> bool:
    rows = app.dashboard.rows.values()
    return bool(rows) and all(r.state is TaskState.RUNNING for r in rows) and \
        app.dashboard.rows["worker1"].global_step is not None


async def test_task_keys(tmp_path: Path) -> None:
    options = options_for(tmp_path)
    app = fake_app(options, options.runs_root)
    messages: list = []
    async with app.run_test(size=(120, 40), message_hook=messages.append) as pilot:
        await until(pilot, lambda: all_running(app), "the cluster running")
        first_run = app.dashboard.run_id
        # Each task's share of this machine (tui.plan.allocation) is a column: cores, threads.
        shares = {name: app.table.get_cell(name, "share") for name in app.dashboard.rows}
        assert all(re.fullmatch(r"\d+c(/\d+t)?", share) for share in shares.values()), shares
        await pilot.press("down", "down")
        assert app.table.selected == "worker1"

        await pilot.press("x")
        assert TaskActionRequested(TaskAction.STOP, "worker1") in messages
        await until(pilot, lambda: state(app, "worker1") is TaskState.STOPPED, "worker1 stopped")
        assert state(app, "worker0") is TaskState.RUNNING  # the others carry on

        await pilot.press("s")
        assert TaskActionRequested(TaskAction.START, "worker1") in messages
        await until(pilot, lambda: state(app, "worker1") is TaskState.RUNNING, "worker1 again")
        assert app.table.get_cell("worker1", "rst") == "1"

        await pilot.press("r")
        assert TaskActionRequested(TaskAction.RESTART, "worker1") in messages
        await until(pilot, lambda: app.dashboard.rows["worker1"].restarts == 2
                    and state(app, "worker1") is TaskState.RUNNING, "worker1 restarted")

        await pilot.press("X")
        assert isinstance(app.screen, ConfirmScreen)
        await pilot.press("y")
        assert AllTasksRequested(start=False) in messages
        await until(pilot, lambda: app.dashboard.finished is not None, "all stopped")
        assert all(r.state is TaskState.STOPPED for r in app.dashboard.rows.values())

        await pilot.press("S", "y")  # a new run: asked first (tests/app/test_trust.py)
        assert AllTasksRequested(start=True) in messages
        await until(pilot, lambda: app.dashboard.run_id != first_run and all_running(app), "a new run")
        assert app.table.get_cell("worker1", "rst") == "0"  # nothing restarted in this run

        await pilot.press("q")
        assert isinstance(app.screen, ConfirmScreen)
        await pilot.press("y")
        await until(pilot, lambda: not app.is_running, "the app to exit")
    assert app.return_code == ExitCode.INTERRUPTED  # quit while it trained


async def test_settings_keys_preview_and_relaunch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def preview(config: ClusterConfig, settings: TrainingSettings):
        # (tests/trainer/test_layout.py checks the real one against TensorFlow; here only
        # the app's part.)
        return placement(num_ps=2, partitions=settings.partitions, strategy=settings.placement.value)

    monkeypatch.setattr(pending, "preview_placement", preview)
    options = options_for(tmp_path, ps=2)
    app = fake_app(options, options.runs_root, num_ps=2)
    messages: list = []
    async with app.run_test(size=(120, 40), message_hook=messages.append) as pilot:
        await until(pilot, lambda: all_running(app) and app.dashboard.placement is not None,
                    "the cluster running")
        first_run = app.dashboard.run_id

        await pilot.press("m")
        assert app.pending.mode is Mode.SYNC
        assert PendingSettingsChanged(app.pending) in messages
        assert "async→sync" in str(app.query_one("#status").render())

        await pilot.press("plus")
        assert app.pending.partitions == 2
        await until(pilot, lambda: app.preview is not None, "the placement preview")
        previews = [m for m in messages if isinstance(m, PreviewReady)]
        assert previews[-1].placement.partitions == 2 and previews[-1].placement.num_ps == 2
        await pilot.press("minus")
        assert app.pending.partitions == 1
        await pilot.press("plus", "p")
        assert app.pending.placement is PlacementStrategy.ROUND_ROBIN
        await until(pilot, lambda: app.preview is not None and app.preview.strategy == "round_robin",
                    "the round-robin preview")
        assert app.dashboard.settings.mode is Mode.ASYNC  # nothing applied yet

        await pilot.press("ampersand")
        assert app.focused is app.query_one("#filter")
        await pilot.press(*"ready")
        assert app.task_log.filter_text == "ready"
        await pilot.press("escape")
        assert not app.query_one("#filter").display
        # The field's emptying reaches the panes as a message (Input.Changed), which a loaded
        # machine may deliver after the key's own handling: wait for it, not a frame.
        await until(pilot, lambda: app.task_log.filter_text == "", "the filter cleared by escape")

        panes = app.query_one("#panes")
        for pane in ("merged", "placement", "throughput", "runs"):
            await pilot.press("tab")
            assert panes.active == pane
        assert app.focused is app.query_one("#runs-table")
        await pilot.press("tab")
        assert panes.active == "hosts" and app.focused is app.query_one("#hosts-table")
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
        await until(pilot, lambda: app.dashboard.run_id != first_run and app.dashboard.global_step > 0,
                    "the relaunched run training")
        assert app.dashboard.settings.mode is Mode.SYNC
        assert app.dashboard.settings.partitions == 2

        await pilot.press("q", "y")
        await until(pilot, lambda: not app.is_running, "the app to exit")


async def test_a_run_that_ends_while_the_runs_pane_is_open_is_listed_there(tmp_path: Path) -> None:
    """Without ``g``: the pane reads the runs folder again once the app's run has ended (and
    its summary is written), and the cursor stays on the run it was on."""
    options = options_for(tmp_path)
    app = fake_app(options, options.runs_root)
    async with app.run_test(size=(120, 40)) as pilot:
        await until(pilot, lambda: all_running(app), "the cluster running")
        first_run = app.dashboard.run_id
        tabs = app.query_one(TabbedContent)
        for _ in range(len(tabs.query(TabPane))):
            if tabs.active == "runs":
                break
            await pilot.press("tab")
        assert tabs.active == "runs"
        view = app.query_one(RunsView)
        await until(pilot, lambda: view.listed > 0, "the list read")
        assert first_run not in view.records  # (it is still running)
        await pilot.press("X", "y")
        await until(pilot, lambda: first_run in view.records, "the ended run listed")
        assert view.records[first_run].outcome == app.dashboard.finished.outcome.value

        await pilot.press("S", "y")  # a second run, ended too: it comes in at the top
        await until(pilot, lambda: app.dashboard.run_id != first_run and all_running(app), "a new run")
        second_run = app.dashboard.run_id
        table = view.query_one(DataTable)
        assert table.get_row_index(first_run) == table.cursor_row == 0
        await pilot.press("X", "y")
        await until(pilot, lambda: second_run in view.records, "the second run listed")
        assert table.get_row_index(second_run) == 0
        assert table.get_row_index(first_run) == table.cursor_row == 1  # the cursor kept its run
