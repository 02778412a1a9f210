"""The app driven through Textual's Pilot against real local clusters (every key against the
real core with scripted processes: tests/app/test_keys.py)."""

from __future__ import annotations

import dataclasses
import re
import time
from pathlib import Path

import psutil
import pytest
from textual.pilot import Pilot

from tests.support import assert_no_trainers_left, async_wait_until, write_hosts
from tui.app.app import TfdistApp
from tui.app.messages import CoreActionFailed, RelaunchRequested, TaskAction, TaskActionRequested
from tui.app.screens import ConfirmScreen
from tui.common.exit_codes import ExitCode
from tui.config.load import load_config
from tui.core.options import RunOptions
from tui.core.task_state import TaskState

pytestmark = [pytest.mark.integration, pytest.mark.timeout(900)]


#: How long the app may show nothing new before a test gives up. A loaded machine makes
#: TensorFlow's import slow, so the tests wait while events keep coming (a task starting,
#: a line of output), not for a fixed total: only silence this long fails.
QUIET = 240.0
#: The last resort (pytest's own timeout is raised to match for these tests), so that a
#: condition that never comes true while the cluster trains says what it was and what the
#: app showed.
NEVER = 840.0
PATIENT_READY = 600.0


def working(app: TfdistApp) -> bool:
    """Whether some task uses the CPU now (tui.core.usage): still importing TensorFlow, however
    slowly a loaded machine lets it, is not silence."""
    usage = app.dashboard.usage
    return usage is not None and any((u.cpu_percent or 0) >= 1 for u in usage.tasks.values())


def showing(app: TfdistApp) -> str:
    return "; ".join(f"{name} {row.state.value} gstep={row.global_step} "
                     f"cells={[str(c) for c in app.table.get_row(name)]}"
                     for name, row in app.dashboard.rows.items())


async def until(pilot: Pilot, condition, what: str = "", *, run_ends: bool = False) -> None:
    """Let the app run until ``condition()`` holds, as long as events keep arriving; the
    run ending first fails at once, unless ``run_ends`` (waiting for or after its end)."""
    app = pilot.app
    assert isinstance(app, TfdistApp)
    seen, last_change, start = -1, time.monotonic(), time.monotonic()

    def done_or_quiet() -> bool:
        nonlocal seen, last_change
        if condition():
            return True
        now = time.monotonic()
        if app.dashboard.finished is not None and not run_ends:
            raise AssertionError(f"waiting for {what}: the run ended ({app.dashboard.finished.reason}); "
                                 f"the app shows {showing(app)}")
        if app.dashboard.applied != seen or working(app):
            seen, last_change = app.dashboard.applied, now
        if now - last_change > QUIET or now - start > NEVER:
            raise AssertionError(f"waiting for {what}: nothing happened for {now - last_change:.0f} s, "
                                 f"{now - start:.0f} s in all; the app shows {showing(app)}")
        return False

    await async_wait_until(done_or_quiet, float("inf"), what=what, pause=pilot.pause)


def make_app(tmp_path: Path, **training) -> tuple[TfdistApp, Path]:
    # Not niced: under a load of 17 on 2 cores a niced task got 1-3 % of a core and took
    # many minutes to import TensorFlow.
    hosts = write_hosts(tmp_path / "hosts.yaml", **training)
    config = load_config(hosts)
    options = RunOptions(config=config, runs_root=config.run_dir)
    # TensorFlow's import alone took over the default 120 s on a loaded machine: the tests
    # wait for readiness as long as it takes (these are about the app, not the deadline).
    patient = dataclasses.replace(options.supervisor_options(), ready_timeout=PATIENT_READY)
    return TfdistApp(options, supervisor_options=patient), config.run_dir


def state(app: TfdistApp, name: str) -> TaskState:
    return app.dashboard.rows[name].state


def all_running(app: TfdistApp) -> bool:
    rows = app.dashboard.rows.values()
    return bool(rows) and all(r.state is TaskState.RUNNING for r in rows) and \
        app.dashboard.rows["worker1"].global_step is not None


async def test_keys_against_a_real_cluster(tmp_path: Path) -> None:
    app, runs = make_app(tmp_path)
    messages: list = []
    async with app.run_test(size=(120, 40), message_hook=messages.append) as pilot:
        await until(pilot, lambda: all_running(app), what="the cluster running")
        # Each task's CPU and memory, read from /proc for its process group (tui.core.usage).
        await until(pilot, lambda: app.table.get_cell("worker0", "rss") != "-"
                    and app.table.get_cell("worker0", "cpu%") != "-", what="worker0's CPU and memory")
        assert "localhost tasks: cpu" in str(app.table.border_title)

        # Each task's share of this machine (tui.plan.allocation) is a column: cores, threads.
        shares = {name: app.table.get_cell(name, "share") for name in app.dashboard.rows}
        assert all(re.fullmatch(r"\d+c(/\d+t)?", share) for share in shares.values()), shares
        await pilot.press("down", "down")
        assert app.table.selected == "worker1"
        pid = app.dashboard.rows["worker1"].pid
        await pilot.press("x")
        assert TaskActionRequested(TaskAction.STOP, "worker1") in messages
        await until(pilot, lambda: state(app, "worker1") is TaskState.STOPPED, what="worker1 stopped")
        assert pid is not None  # and the process is really gone (or waits to be reaped)
        assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
        assert state(app, "worker0") is TaskState.RUNNING  # the others carry on
        await pilot.press("q")
        assert isinstance(app.screen, ConfirmScreen)
        await pilot.press("y")
        await until(pilot, lambda: not app.is_running, what="the app to exit", run_ends=True)
    assert app.return_code == ExitCode.INTERRUPTED
    assert_no_trainers_left(runs)


async def test_user_errors_are_notifications_not_crashes(tmp_path: Path) -> None:
    app, runs = make_app(tmp_path, dataset="mnist", data_path=str(tmp_path / "missing.npz"))
    messages: list = []
    async with app.run_test(size=(120, 40), message_hook=messages.append) as pilot:
        await until(pilot, lambda: app.dashboard.finished is not None, what="the failed run", run_ends=True)
        failed = [r for r in app.dashboard.rows.values() if r.state is TaskState.FAILED]
        assert failed and failed[0].exit_code == 2
        assert any("dataset mnist not found" in line for line in app.dashboard.logs[failed[0].name].lines)
        assert any("failed" in n.message or "exited" in n.message for n in app._notifications)

        bad = app.pending.replace(batch_size=0)
        app.post_message(RelaunchRequested(bad))
        await until(pilot, lambda: any(isinstance(m, CoreActionFailed) for m in messages),
                    what="the relaunch refusal", run_ends=True)
        (refusal,) = [m for m in messages if isinstance(m, CoreActionFailed)]
        assert "batch_size" in refusal.reason
        assert app.is_running
        await pilot.press("q")
        await until(pilot, lambda: not app.is_running, what="the app to exit", run_ends=True)
    assert app.return_code == 1
    assert_no_trainers_left(runs)
