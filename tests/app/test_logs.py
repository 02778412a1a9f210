"""The log panes (tui.app.logs) over a scripted core: a pane that is not on screen takes no
lines (under a flood that was work for nothing, on the UI thread) and, shown, catches up
with the newest lines, in order and without a gap."""

from __future__ import annotations

from textual.widgets import TabbedContent

from tests.app.scripted import T0, feed, lines, running_history, scripted
from tui.app.logs import PANE_LINES
from tui.core.options import RunOptions


async def test_a_hidden_pane_takes_nothing_and_catches_up_when_shown(options: RunOptions) -> None:
    app, core = scripted(options, running_history(options.config.training))
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        merged, task_log = app.merged_log, app.task_log
        held = len(merged.lines)
        await pilot.press("down", "down")  # worker0 (from ps0)
        await feed(app, core, pilot, lines("worker0", 0, PANE_LINES + 300, T0 + 41))
        assert len(merged.lines) == held  # the All logs tab is hidden
        assert str(task_log.lines[-1]).endswith(f"worker0 line {PANE_LINES + 299}")

        app.query_one(TabbedContent).active = "merged"
        await pilot.pause()
        shown = [int(str(line).rsplit(" ", 1)[1]) for line in merged.lines if "worker0 line" in str(line)]
        assert shown[-1] == PANE_LINES + 299 and len(shown) >= PANE_LINES - held
        assert shown == list(range(shown[0], shown[-1] + 1))  # in order, no gap
        # The task log, hidden now, takes nothing; it catches up when the Logs tab is back.
        task_held = [str(line) for line in task_log.lines]
        await feed(app, core, pilot, lines("worker0", PANE_LINES + 300, 5, T0 + 42))
        assert [str(line) for line in task_log.lines] == task_held
        assert str(merged.lines[-1]).endswith(f"worker0 line {PANE_LINES + 304}")
        app.query_one(TabbedContent).active = "logs"
        await pilot.pause()
        assert str(task_log.lines[-1]).endswith(f"worker0 line {PANE_LINES + 304}")


async def test_animations_are_off_unless_asked_for(options: RunOptions, monkeypatch) -> None:
    monkeypatch.delenv("TEXTUAL_ANIMATIONS", raising=False)
    app, _ = scripted(options, [])
    assert app.animation_level == "none"
    monkeypatch.setenv("TEXTUAL_ANIMATIONS", "full")
    app, _ = scripted(options, [])
    assert app.animation_level == "full"
