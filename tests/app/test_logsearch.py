"""Search in the log panes as in a pager (tui/app/logsearch.py, tui/app/logs.py): ``/``
marks every match, ``n`` / ``N`` go from one to the next and the border counts them; the
app is driven by Pilot over a scripted core (tests/app/scripted.py), so nothing waits on
processes."""

from __future__ import annotations

from rich.style import Style
from textual import events
from textual.content import Content
from textual.widgets import Input

from tests.app.scripted import T0, feed, running_history, scripted
from tests.support import async_wait_until
from tui.app.logs import PANE_LINES, LogPane
from tui.app.logsearch import LogSearch
from tui.core.events import ControllerEvent, TaskOutput
from tui.core.options import RunOptions
from tui.launch.lines import Stream

SIZE = (120, 40)


def border(pane: LogPane) -> str:
    """The pane's border subtitle as it reads on screen."""
    return Content.from_markup(pane.border_subtitle or "").plain


def row_of(pane: LogPane, index: int) -> int:
    """The screen row (within the pane) of its line ``index``; asserts it is on screen."""
    top = round(pane.scroll_offset.y)
    assert top <= index < top + pane.scrollable_content_region.height, (index, top)
    return index - top


def styles_of(pane: LogPane, index: int, text: str) -> set[Style]:
    """The styles the pane draws ``text`` with (the pieces of it drawn alike, or the piece
    holding it), on its line ``index``."""
    strip = pane.render_line(row_of(pane, index))
    return {segment.style for segment in strip if segment.style is not None and segment.text.strip()
            and (segment.text.strip() in text or text in segment.text)}


def bg(styles: set[Style]) -> set[str]:
    return {style.bgcolor.name for style in styles if style.bgcolor is not None}


def output(task: str, texts: list[str], t: float = T0 + 41) -> list[ControllerEvent]:
    return [TaskOutput(task=task, stream=Stream.STDOUT, lines=(text,), t=t) for text in texts]


# -- the search itself -----------------------------------------------------------------


def test_the_text_is_literal_and_any_case() -> None:
    search = LogSearch()
    search.reset("[AVG] (x", ["loss [avg] (x) 1", "loss avg x", "LOSS [Avg] (X)", "[", "("])
    assert search.count == 2 and search.is_match(0) and search.is_match(2) and not search.is_match(1)
    search.reset("(", ["a(", "b", "(c"])  # a regular expression would not even compile
    assert search.count == 2
    assert search.status() == "2 matches for '(' (n/N)"
    search.reset("zzz", ["a"])
    assert search.status() == "no match for 'zzz'"
    search.reset("", ["a"])
    assert search.count == 0 and search.status() == ""


def test_n_and_N_start_from_the_view_and_go_round() -> None:
    search = LogSearch()
    search.reset("x", [f"{'x' if n % 10 == 0 else '-'} {n}" for n in range(50)])  # 0, 10, ... 40
    assert search.step(True, view_top=15, view_bottom=25) == 20  # the first from the view's top
    assert search.status() == "match 3/5"
    assert search.step(True, 15, 25) == 30 and search.step(True, 15, 25) == 40
    assert search.step(True, 15, 25) == 0 and search.status() == "match 1/5 (wrapped)"
    assert search.step(False, 15, 25) == 40 and search.wrapped
    search.reset("x", [f"{'x' if n % 10 == 0 else '-'} {n}" for n in range(50)])
    assert search.step(False, view_top=15, view_bottom=25) == 20  # the last up from the bottom
    assert search.step(False, 0, 5) == 10 and not search.wrapped


def test_matches_keep_their_lines_while_lines_drop_off_the_top() -> None:
    search = LogSearch()
    search.reset("x", ["x0", "-", "x2", "-", "x4"])
    assert search.step(True, 2, 4) == 2
    search.added(["-", "x6"])
    search.dropped(1)  # the pane holds lines 1..6: the current match is now its line 1
    assert search.current_index == 1 and search.count == 3 and search.status() == "match 1/3"
    search.dropped(2)  # the current match went with them
    assert search.current_index is None and search.count == 2
    assert search.status() == "2 matches for 'x' (n/N)"
    assert search.step(True, 0, 3) == 1  # x4, now the pane's line 1


# -- in the app --------------------------------------------------------------------------


async def test_slash_marks_every_match_and_n_N_walk_them(options: RunOptions) -> None:
    app, core = scripted(options, running_history(options.config.training))
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        await pilot.press("down", "down", "down")  # worker1
        texts = [f"worker1 step {n} loss [AVG] (x)" if n % 2 else f"worker1 idle {n}" for n in range(60)]
        await feed(app, core, pilot, output("worker1", texts))
        log = app.task_log
        assert log.follow

        await pilot.press("slash")
        assert app.focused is app.query_one("#search")
        await pilot.press(*"[avg] (")  # as typed: literal, any case, marked at once
        assert log.search.count == 30
        assert border(log) == "30 matches for '[avg] (' (n/N) │ following"
        last = len(log.lines) - 1  # on screen (following), and it matches
        assert log.lines[last] == "worker1 step 59 loss [AVG] (x)"
        assert bg(styles_of(log, last, "[AVG] (")) == {"yellow"}
        assert "yellow" not in bg(styles_of(log, last - 1, "worker1 idle 58"))

        await pilot.press("enter")  # to the first match from the top of the view
        assert app.focused is app.table
        current = log.search.current_index
        assert current is not None and log.current_line == log.lines[current]
        ordinal = int(border(log).split("/")[0].removeprefix("match "))
        assert border(log) == f"match {ordinal}/30 │ paused (f)"
        assert not log.follow  # as scrolling back does
        assert bg(styles_of(log, current, "[AVG] (")) == {"dark_orange"}  # the current match
        assert bg(styles_of(log, current, "worker1 step")) == {"grey30"}  # and its line
        if current + 2 <= last:
            assert bg(styles_of(log, current + 2, "[AVG] (")) == {"yellow"}  # the others

        await pilot.press("n")
        assert log.search.current_index == current + 2
        assert border(log).startswith(f"match {ordinal + 1}/30")
        await pilot.press("N", "N")
        assert log.search.current_index == current - 2
        assert border(log).startswith(f"match {ordinal - 1}/30")

        # From the first match, N goes round to the last, scrolled into view.
        for _ in range(ordinal - 2):
            await pilot.press("N")
        assert border(log).startswith("match 1/30 │")
        await pilot.press("N")
        assert border(log).startswith("match 30/30 (wrapped)")
        assert log.current_line == "worker1 step 59 loss [AVG] (x)"
        row_of(log, log.search.current_index or 0)

        # Nothing matches: the border says so, n changes nothing.
        await pilot.press("slash", *"zzz", "enter")
        assert border(log) == "no match for 'zzz' │ paused (f)"
        await pilot.press("n")
        assert log.search.current_index is None and border(log).startswith("no match for 'zzz'")
        # Esc in the field clears the search: no marks, the border as before.
        await pilot.press("slash", "escape")
        assert log.search.text == "" and border(log) == "paused: f or End follows"
        assert not app.query_one("#search").display and app.focused is app.table


async def test_the_search_works_in_the_merged_log(options: RunOptions) -> None:
    app, core = scripted(options, running_history(options.config.training))
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        await pilot.press("tab")  # All logs
        merged = app.merged_log
        await feed(app, core, pilot, [*output("worker0", ["checkpoint saved", "x"]),
                                      *output("ps1", ["Checkpoint"])])
        await pilot.press("slash", *"CHECKPOINT", "enter")
        assert app.query_one("#panes").active == "merged"
        assert merged.search.count == 2 and border(merged).startswith("match 1/2 │ paused (f)")
        assert merged.current_line == "worker0 | checkpoint saved"
        await pilot.press("n")
        assert merged.current_line == "ps1     | Checkpoint" and border(merged).startswith("match 2/2")
        assert bg(styles_of(merged, merged.search.current_index or 0, "Checkpoint")) == {"dark_orange"}
        # The selected task's log has its own count and no current match.
        assert app.task_log.search.current_index is None and app.task_log.follow


async def test_the_marks_stay_right_while_lines_drop_off_the_top(options: RunOptions) -> None:
    app, core = scripted(options, running_history(options.config.training))
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        await pilot.press("down", "down", "down")  # worker1
        log = app.task_log
        texts = [f"needle {n}" if n % 100 == 0 else f"hay {n}" for n in range(PANE_LINES)]
        await feed(app, core, pilot, output("worker1", texts))
        assert len(log.lines) == PANE_LINES and log.lines[0] == "needle 0"  # the pane is full

        await pilot.press("slash", *"needle", "enter")  # none on screen: round to the first
        assert log.current_line == "needle 0" and border(log).startswith("match 1/20 (wrapped)")
        await pilot.press("n")
        assert log.current_line == "needle 100" and border(log).startswith("match 2/20")

        # 50 new lines push 50 off the top: the same line is still the current match, still
        # on screen (the paused view keeps its lines), still counted.
        await feed(app, core, pilot, output("worker1", [f"more {n}" for n in range(50)]))
        assert log.lines[0] == "hay 50" and log.current_line == "needle 100"
        assert log.search.current_index == 50 and border(log).startswith("match 1/19")
        assert log.current_line in log.visible_lines
        assert bg(styles_of(log, 50, "needle")) == {"dark_orange"}
        await pilot.press("n")
        assert log.current_line == "needle 200" and border(log).startswith("match 2/19")

        # New matches are counted as they come; the current match's line goes at last.
        await feed(app, core, pilot, output("worker1", ["a needle at the end"]))
        assert border(log).startswith("match 2/20")
        await feed(app, core, pilot, output("worker1", [f"later {n}" for n in range(300)]))
        assert log.search.current_index is None and log.current_line is None
        assert border(log).startswith("17 matches for 'needle' (n/N)")
        await pilot.press("n")  # from the view again
        assert log.current_line is not None and "needle" in log.current_line


async def test_keys_typed_right_after_slash_go_into_the_field(options: RunOptions) -> None:
    """A terminal hands over keys typed (or pasted) quickly in one read, and Textual sends
    each to the widget focused when it reads it: the keys after ``/`` go into the search
    field, not to the table (where ``x`` stops the selected task). A ``/`` in the field is
    text."""
    app, core = scripted(options, running_history(options.config.training))
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        await pilot.press("down", "down", "down")  # worker1
        await feed(app, core, pilot, output("worker1", ["a/x 1", "b 2", "a/x 3"]))
        field = app.query_one("#search", Input)
        for key, char in (("slash", "/"), ("a", "a"), ("slash", "/"), ("x", "x")):
            event = events.Key(key, char)  # as the driver posts them: all before any is handled
            event.set_sender(app)
            app.post_message(event)
        await async_wait_until(lambda: field.value == "a/x", 10, pause=pilot.pause, interval=0.02,
                               what=lambda: f"the field holds {field.value!r}")
        assert app.focused is field and not core.commands  # no x reached the table
        # (The field's Changed message starts the search: on a loaded machine, after the value.)
        await async_wait_until(lambda: app.task_log.search.count == 2, 10, pause=pilot.pause, interval=0.02,
                               what=lambda: f"{app.task_log.search.count} matches")
        await pilot.press("enter", "n")
        assert app.task_log.current_line == "a/x 3" and app.focused is app.table


async def test_a_match_past_the_right_edge_is_scrolled_into_view(options: RunOptions) -> None:
    app, core = scripted(options, running_history(options.config.training))
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        await pilot.press("down", "down", "down")
        log = app.task_log
        await feed(app, core, pilot, output("worker1", ["." * 300 + " needle " + "." * 100, "short"]))
        # (The pane learns how wide its lines are on a thread of its own.)
        await async_wait_until(lambda: log.virtual_size.width >= 400, 10, pause=pilot.pause, interval=0.02,
                               what="the pane to know its width")
        assert log.scroll_offset.x == 0
        await pilot.press("slash", *"needle", "enter")
        left, width = log.scroll_offset.x, log.scrollable_content_region.width
        assert left <= 301 and 301 + len("needle") <= left + width
        strip = log.render_line(row_of(log, log.search.current_index or 0))
        assert "needle" in strip.text
