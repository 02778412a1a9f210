"""The app tells its core what the screen shows (the core holds the rest back), and its
clock's tick draws what was held back once the core has sent it (tui.app.pacing)."""

from __future__ import annotations

import threading
from collections.abc import Callable

import pytest

from tests.app.scripted import T0, ScriptedCore, lines, running_history
from tests.support import async_wait_until
from tui.app import app as app_module
from tui.app.app import TfdistApp
from tui.app.bridge import WatchingCore
from tui.core.events import ControllerEvent
from tui.core.options import RunOptions
from tui.core.wire import Watch


class HoldingCore(ScriptedCore):
    """A scripted core that, as the core's process does, says when it has news, hears what the
    screen shows, and answers a flush when the test says (what it held back is put in
    ``pending`` without a wake)."""

    def __init__(self, events: list[ControllerEvent]) -> None:
        super().__init__(events)
        self.watches: list[Watch] = []
        self.flushes: list[Callable[[], None]] = []

    def wake_on_news(self, wake: Callable[[], None]) -> None:
        wake()

    def watch(self, watch: Watch) -> None:
        self.watches.append(watch)

    def flush(self, done: Callable[[], None]) -> None:
        self.flushes.append(done)


async def test_the_core_hears_which_logs_and_charts_are_on_screen(options: RunOptions) -> None:
    core = HoldingCore(running_history(options.config.training))
    assert isinstance(core, WatchingCore)
    app = TfdistApp(options, core_factory=lambda app: core, autostart=False, clock=lambda: T0 + 40)
    async with app.run_test(size=(120, 40)) as pilot:
        await async_wait_until(lambda: app.table.row_count == 4, 30, pause=pilot.pause)
        # The Logs tab shows the selected task's log: its lines only are wanted at once.
        logs = Watch(frozenset({"ps0"}), False, False)
        await async_wait_until(lambda: core.watches and core.watches[-1] == logs, 30, pause=pilot.pause,
                               what=lambda: core.watches)
        told = len(core.watches)
        await pilot.press("down")
        assert core.watches[-1] == Watch(frozenset({"ps1"}), False, False)
        await pilot.press("w", "down")  # ps1 pinned beside the next selected task
        assert core.watches[-1] == Watch(frozenset({"ps1", "worker0"}), False, False)
        await pilot.press("tab")  # All logs: every task's lines
        assert core.watches[-1] == Watch(None, False, False)
        await pilot.press("tab")  # Placement: its traffic, no log
        assert core.watches[-1] == Watch(frozenset(), False, True)
        await pilot.press("tab")  # Throughput: the progress and the steps
        assert core.watches[-1] == Watch(frozenset(), True, False)
        # Told only when it changed (refreshes in between said nothing new).
        assert len(core.watches) == told + 5


async def test_the_clock_draws_what_the_core_held_back_once_it_came(
        options: RunOptions, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(app_module, "CLOCK_SECONDS", 3600.0)  # (the test ticks it)
    now = T0 + 40
    core = HoldingCore(running_history(options.config.training))
    app = TfdistApp(options, core_factory=lambda app: core, autostart=False, clock=lambda: now)
    async with app.run_test(size=(120, 40)) as pilot:
        await async_wait_until(lambda: app.table.row_count == 4, 30, pause=pilot.pause)
        assert app.table.get_cell("worker1", "out") == "5s"  # its last line at T0 + 35
        # The core held back a line of worker1 (its log is not on screen); 2 s later, a tick.
        core.pending += lines("worker1", 0, 1, T0 + 45)
        now = T0 + 47
        app._clock_tick()
        assert len(core.flushes) == 1
        await pilot.pause()
        assert app.table.get_cell("worker1", "out") == "5s"  # not drawn before it came
        threading.Thread(target=core.flushes[0]).start()  # (the core's reader thread)
        await async_wait_until(lambda: app.table.get_cell("worker1", "out") == "2s", 30, pause=pilot.pause,
                               what=lambda: app.table.get_cell("worker1", "out"))
        assert app.dashboard.logs["worker1"].lines[-1] == "worker1 line 0"
        # A core that has not answered by the next tick (busy, or gone): what came is drawn.
        app._clock_tick()
        now = T0 + 51
        app._clock_tick()
        assert len(core.flushes) == 2
        await async_wait_until(lambda: app.table.get_cell("worker1", "out") == "6s", 30, pause=pilot.pause)
