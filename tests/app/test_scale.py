"""Nothing slow on the UI thread: the first frame does not wait for the runs folder, past runs
are read on a worker and cached, and the list is capped."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.app.scripted import T0, ScriptedCore, running_history
from tests.support import async_wait_until
from tests.support.runfixtures import write_run
from tui.app import runlist
from tui.app.app import TfdistApp
from tui.app.runs import RunsView
from tui.core.events import ControllerEvent, TaskStateChanged
from tui.core.inbox import Happening
from tui.core.options import RunOptions
from tui.core.task_state import TaskState


def past_runs(options: RunOptions, count: int) -> None:
    for n in range(count):
        write_run(options.runs_root, f"20240101-0000{n:02d}-aaaaaa", "async", (100.0, 300.0), 0.25, 0.9,
                  None, options.config.path)


async def test_the_first_frame_and_the_runs_pane_do_not_wait_for_past_runs(
        options: RunOptions, monkeypatch: pytest.MonkeyPatch) -> None:
    past_runs(options, 3)
    release = threading.Event()
    reads: list[str] = []
    read_brief = runlist.read_brief

    def slow_brief(path: Path) -> runlist.RunBrief:
        # A runs folder of huge runs on a slow disk: reading never finishes until told.
        reads.append(threading.current_thread().name)
        release.wait(30)
        return read_brief(path)

    monkeypatch.setattr(runlist, "read_brief", slow_brief)
    core = ScriptedCore(running_history(options.config.training))
    app = TfdistApp(options, core_factory=lambda app: core, autostart=False, clock=lambda: T0 + 40)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        assert app.table.row_count == 4 and not reads  # drawn, and nothing read yet
        for _ in range(4):
            await pilot.press("tab")
        view = app.query_one(RunsView)
        assert app.query_one("#panes").active == "runs"
        await pilot.pause()
        assert "reading past runs" in str(view.query_one("#runs-comparison").render())
        await pilot.press("tab")  # the UI answers while the reader waits
        assert app.query_one("#panes").active == "hosts"  # the pane after Runs
        release.set()
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert len(view.records) == 3
        assert reads and threading.main_thread().name not in reads
        # Read once: opening the pane again reads only what changed (nothing).
        reads.clear()
        view.action_reload_runs()
        await app.workers.wait_for_complete()
        assert not reads


def test_the_list_is_capped_and_newest_first(options: RunOptions, monkeypatch: pytest.MonkeyPatch) -> None:
    past_runs(options, 5)
    monkeypatch.setattr(runlist, "MAX_LISTED", 3)
    listed = runlist.RunCatalog(options.runs_root, options.config.path).list()
    assert [run.run_id for run in listed] == [f"20240101-0000{n:02d}-aaaaaa" for n in (4, 3, 2)]


class WakingCore(ScriptedCore):
    """A scripted core that says when it has news, as the app's real cores do, and counts
    how often the app looked."""

    def __init__(self, events: list[ControllerEvent]) -> None:
        super().__init__(events)
        self.wake: Callable[[], None] = lambda: None
        self.drains = 0

    def wake_on_news(self, wake: Callable[[], None]) -> None:
        self.wake = wake
        wake()

    def drain(self) -> tuple[list[Happening], int]:
        self.drains += 1
        return super().drain()


async def test_an_idle_app_looks_for_news_only_when_woken_and_once_a_second(
        options: RunOptions, monkeypatch: pytest.MonkeyPatch) -> None:
    core = WakingCore(running_history(options.config.training))
    ticks: list[int] = []  # the core's drains at each of the clock's ticks
    clock_tick = TfdistApp._clock_tick

    def counted(app: TfdistApp) -> None:
        ticks.append(core.drains)
        clock_tick(app)

    monkeypatch.setattr(TfdistApp, "_clock_tick", counted)
    app = TfdistApp(options, core_factory=lambda app: core, autostart=False, clock=lambda: T0 + 40)
    async with app.run_test(size=(120, 40)) as pilot:
        await async_wait_until(lambda: app.table.row_count == 4, 30, pause=pilot.pause)
        await async_wait_until(lambda: len(ticks) >= 3, 30, pause=pilot.pause)
        # Between two ticks of the clock, nothing new: the clock's own look and (at most) the
        # refresh timer's last before it slept, not ten a second.
        assert ticks[2] - ticks[1] <= 2
        # News wakes it (from the core's thread), and it is drawn at once.
        core.pending.append(TaskStateChanged(task="worker1", old=TaskState.RUNNING, new=TaskState.FAILED,
                                             exit_code=3, reason="exit 3", t=T0 + 41))
        threading.Thread(target=core.wake).start()
        await async_wait_until(lambda: "failed (3)" in str(app.table.get_cell("worker1", "state")), 30,
                               pause=pilot.pause)
