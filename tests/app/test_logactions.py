"""Copying log text (``C``, tui/app/logactions.py): the mouse's selection, else the current
match's line, else the lines on screen, to the clipboard through the app (OSC 52; Textual
keeps the last copy in ``App.clipboard``), and never a task's escape sequences. Pilot over a
scripted core; tests/app/test_tmux.py checks what a real terminal multiplexer receives."""

from __future__ import annotations

import re

from tests.app.scripted import T0, feed, lines, running_history, scripted
from tui.core.events import TaskOutput
from tui.core.options import RunOptions
from tui.launch.lines import Stream

SIZE = (120, 40)
#: What a terminal would act on: C0 controls (but tab and newline), DEL, C1 controls.
CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def last_toast(app) -> str:
    return str(list(app._notifications)[-1].message)


async def test_C_copies_the_current_match_or_else_the_lines_on_screen(options: RunOptions) -> None:
    app, core = scripted(options, running_history(options.config.training))
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        await pilot.press("down", "down", "down")  # worker1
        await feed(app, core, pilot, lines("worker1", 0, 80, T0 + 41))
        log = app.task_log

        await pilot.press("C")  # no selection, no search: what the pane shows
        on_screen = log.visible_lines
        assert len(on_screen) == log.scrollable_content_region.height > 10
        assert on_screen[-1] == "worker1 line 79"
        assert app.clipboard == "\n".join(on_screen)
        assert last_toast(app) == f"copied {len(on_screen)} lines (the lines on screen)"

        await pilot.press("slash", *"line 42", "enter", "C")
        assert log.current_line == "worker1 line 42"
        assert app.clipboard == "worker1 line 42"
        assert last_toast(app) == "copied 1 line (the current match)"


async def test_C_copies_what_the_mouse_selected(options: RunOptions) -> None:
    app, core = scripted(options, running_history(options.config.training))
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        await pilot.press("down", "down", "down")
        await feed(app, core, pilot, lines("worker1", 0, 80, T0 + 41))
        log = app.task_log
        await pilot.press("slash", *"line", "enter")  # (a selection wins over a current match)
        top = round(log.scroll_offset.y)
        # From the 2nd character of the pane's 3rd row to the 10th of its 5th (the border
        # is the widget's first row and column).
        await pilot.mouse_down(log, (2, 3))
        await pilot.hover(log, (10, 5))
        await pilot.mouse_up(log, (10, 5))
        first, middle, last = log.lines[top + 2], log.lines[top + 3], log.lines[top + 4]
        await pilot.press("C")
        assert app.clipboard == f"{first[1:]}\n{middle}\n{last[:10]}"
        assert last_toast(app) == "copied 3 lines (the selection)"


async def test_what_is_copied_is_the_inert_text_never_a_tasks_escapes(options: RunOptions) -> None:
    hostile = ("\x1b]52;c;cm0gLXJmIH4=\x07evil \x1b[31mred\x1b[0m \x9b2J\x1b]0;title\x07 end\r\x1bc"
               "\u202e!dlrow")
    app, core = scripted(options, running_history(options.config.training))
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        await pilot.press("down", "down", "down")
        await feed(app, core, pilot, [TaskOutput(task="worker1", stream=Stream.STDOUT, lines=(hostile,),
                                                 t=T0 + 41)])
        await pilot.press("slash", *"evil", "enter", "C")
        assert app.clipboard == "evil red  end!dlrow"
        await pilot.press("slash", "escape", "end", "C")  # no search: the lines on screen
        assert "evil red  end!dlrow" in app.clipboard.splitlines()
        assert not CONTROL.search(app.clipboard) and "\u202e" not in app.clipboard
