"""Two tasks' logs at once (tui/app/split.py): ``w`` pins the selected task's log beside the
one that follows the table, each half follows or pauses by itself, ``w`` closes it; side by
side from 80 columns, one above the other below. Pilot over a scripted core."""

from __future__ import annotations

from tests.app.scripted import T0, feed, lines, running_history, scripted
from tui.app.logs import LogPane
from tui.core.options import RunOptions


def shown(pane: LogPane) -> bool:
    """On screen, with room for a few lines."""
    region = pane.region
    return pane.display and region.height >= 5 and region.width >= 30


async def test_w_pins_a_task_beside_the_selected_one(options: RunOptions) -> None:
    app, core = scripted(options, running_history(options.config.training))
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        pinned, live = app.pinned_log, app.task_log
        assert not pinned.display and app.table.selected == "ps0"
        full_width = live.region.width
        await pilot.press("w")
        await pilot.press("down", "down", "down")  # worker1 in the other half
        assert app.table.selected == "worker1"
        assert pinned.border_title == "ps0 (pinned; w closes)" and live.border_title == "worker1"
        assert shown(pinned) and shown(live)
        assert pinned.region.right <= live.region.x and pinned.region.y == live.region.y  # side by side
        assert live.region.width < full_width

        await feed(app, core, pilot, [*lines("ps0", 0, 60, T0 + 41), *lines("worker1", 0, 60, T0 + 41)])
        assert pinned.lines[-1] == "ps0 line 59" and live.lines[-1] == "worker1 line 59"
        assert pinned.is_vertical_scroll_end and live.is_vertical_scroll_end

        # l goes into one half, then the other; scrolling one back pauses only that one.
        await pilot.press("l")
        assert app.focused is live
        await pilot.press("l")
        assert app.focused is pinned
        await pilot.press("pageup")
        assert not pinned.follow and live.follow
        assert "paused" in str(pinned.border_subtitle) and "following" in str(live.border_subtitle)
        await feed(app, core, pilot, [*lines("ps0", 60, 5, T0 + 42), *lines("worker1", 60, 5, T0 + 42)])
        assert not pinned.is_vertical_scroll_end and live.is_vertical_scroll_end
        await pilot.press("f")  # f (and End) act on the focused half
        assert pinned.follow and pinned.is_vertical_scroll_end
        await pilot.press("l")
        assert app.focused is app.table

        await pilot.press("w")  # closed: one log, the whole width again
        await pilot.pause()
        assert not pinned.display and pinned.source is None
        assert live.region.width == full_width and live.border_title == "worker1"


async def test_the_split_fits_80x24_side_by_side_and_narrower_one_above_the_other(
        options: RunOptions) -> None:
    app, core = scripted(options, running_history(options.config.training))
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        await pilot.press("down", "down", "w", "down")
        await pilot.pause()
        pinned, live = app.pinned_log, app.task_log
        assert pinned.border_title.startswith("worker0") and live.border_title == "worker1"
        assert shown(pinned) and shown(live)
        assert pinned.region.right <= live.region.x and live.region.right <= 80
        footer = app.query_one("QuietFooter")
        assert live.region.bottom <= footer.region.y  # nothing under the footer
        await feed(app, core, pilot, [*lines("worker0", 0, 30, T0 + 41), *lines("worker1", 0, 30, T0 + 41)])
        assert pinned.visible_lines[-7:] == [f"worker0 line {n}" for n in range(23, 30)]
        assert live.visible_lines[-7:] == [f"worker1 line {n}" for n in range(23, 30)]

        # Under 80 columns the halves would be too narrow: one above the other.
        await pilot.resize_terminal(64, 30)
        await pilot.pause()
        assert shown(pinned) and shown(live)
        assert pinned.region.bottom <= live.region.y and pinned.region.width == live.region.width == 64
        assert live.region.bottom <= footer.region.y
        assert "worker0 line 29" in pinned.visible_lines and "worker1 line 29" in live.visible_lines


async def test_both_halves_get_every_line_of_the_same_task(options: RunOptions) -> None:
    app, core = scripted(options, running_history(options.config.training))
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        await pilot.press("down", "down", "w")  # worker0 pinned and selected
        pinned, live = app.pinned_log, app.task_log
        await feed(app, core, pilot, lines("worker0", 0, 10, T0 + 41))
        # (Each half keeps its own place in the task's log: neither takes lines from the other.)
        assert pinned.lines[-10:] == live.lines[-10:] == [f"worker0 line {n}" for n in range(10)]
        await pilot.press("down")  # the selected half shows worker1 now
        await feed(app, core, pilot, lines("worker0", 10, 5, T0 + 42))
        await pilot.press("up")  # and worker0 again, from its whole tail
        await feed(app, core, pilot, lines("worker0", 15, 5, T0 + 43))
        assert pinned.lines[-20:] == live.lines[-20:] == [f"worker0 line {n}" for n in range(20)]
