"""The log panes: a task's output (or every task's, merged), following its tail like
``tail -f`` until the operator scrolls back, and searched as in a pager (``/``, ``n``, ``N``:
:mod:`tui.app.logsearch`).

Following is the operator's choice, kept in :attr:`LogPane.follow`; it is not guessed from
the scroll position. (Textual's ``Log`` scrolls to new lines only while it is scrolled to
the end, so anything that changes the pane's height, a hint line appearing above it, left
it stuck where it was.)"""

from __future__ import annotations

import re
from collections.abc import Iterable

from rich.highlighter import Highlighter
from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual.binding import Binding
from textual.content import Content
from textual.events import MouseScrollUp, Resize
from textual.strip import Strip
from textual.widgets import Log

from tui.app.logsearch import LogSearch
from tui.app.state import LOG_LINES_PER_TASK, TaskLog

#: Lines a pane keeps (the run directory has every line).
PANE_LINES = LOG_LINES_PER_TASK


#: The colour of each role's name where a line starts with it (the merged log's prefix).
ROLE_STYLES = (("ps", "magenta"), ("chief", "yellow"), ("worker", "cyan"), ("evaluator", "green"))
_PREFIX = re.compile(r"^(ps|chief|worker|evaluator)\d*\s*\|")

#: Every match of the search; the current match's line, and the match in it, stand out more.
SEARCH_MATCH = "black on yellow"
CURRENT_LINE = Style.parse("on grey30")
CURRENT_MATCH = "bold black on dark_orange"


class LogHighlighter(Highlighter):
    """Colours a line's task prefix by role, the controller's own lines (``──``) dim, every
    match of the pane's filter in reverse video and every match of its search on yellow (on
    orange on the current match's line, which :meth:`LogPane.render_line` marks)."""

    def __init__(self, pane: LogPane) -> None:
        self.pane = pane

    def highlight(self, text: Text) -> None:
        plain = text.plain
        prefix = _PREFIX.match(plain)
        if prefix is not None:
            style = dict(ROLE_STYLES)[prefix.group(1)]
            text.stylize(style, 0, prefix.end())
        if "──" in plain[:20]:
            text.stylize("dim", plain.index("──"))
        if self.pane.filter_text:
            text.highlight_words([self.pane.filter_text], "reverse bold", case_sensitive=False)
        search = self.pane.search.text
        if search:  # (highlight_words escapes it: literal text)
            style = CURRENT_MATCH if self.pane.rendering_current else SEARCH_MATCH
            text.highlight_words([search], style, case_sensitive=False)


class LogPane(Log):
    """A log that follows its tail unless the operator scrolled back; ``End`` or ``f``
    follow again. Its border shows which (``following`` / ``paused``), and where a search
    stands (``match 3/17``)."""

    BINDINGS = [Binding("end", "follow", "Follow", show=False)]

    def __init__(self, *, id: str) -> None:
        super().__init__(max_lines=PANE_LINES, auto_scroll=False, highlight=True, id=id)
        self.highlighter = LogHighlighter(self)
        self.filter_text = ""
        self.source: TaskLog | None = None
        self._mark = 0  # the source's line count when this pane last took its lines
        self.search = LogSearch()
        #: The line being drawn is the current match's (read by the highlighter).
        self.rendering_current = False
        self.follow = True
        self._status = ""

    def on_mount(self) -> None:
        self._show_status()

    # -- what it shows --------------------------------------------------------------------

    def show_log(self, source: TaskLog | None, filter_text: str) -> None:
        """Switch to another source or filter: redraw from the retained tail (at its end
        when following)."""
        if source is not self.source:
            self.set_follow(True)  # another task: its latest lines, as a pager opens at the end
        self.source, self.filter_text = source, filter_text
        self.clear()
        self.search.reset(self.search.text)
        if source is not None:
            self._mark = source.added
            self._write(self._matching(source.lines)[-PANE_LINES:])
        self._show_status()

    def append_unseen(self) -> None:
        """Add what the source got since the last call (the app asks the panes on screen
        only: a hidden one catches up when shown, with as many lines as its source kept)."""
        if self.source is None or self.source.added == self._mark:
            return
        lines = self._matching(self.source.since(self._mark))
        self._mark = self.source.added
        if lines:
            self._write(lines)

    def _write(self, lines: list[str]) -> None:
        # Split as Log.write_lines splits them (an empty line is no line), so that the
        # search numbers the lines the pane holds.
        lines = [piece for line in lines for piece in line.splitlines()]
        before = len(self.lines)
        self.write_lines(lines, scroll_end=False)
        self.search.added(lines)
        dropped = before + len(lines) - len(self.lines)  # off the top: the pane is bounded
        if dropped > 0:
            self.search.dropped(dropped)
            if not self.follow:
                # Paused: the same lines stay on screen while the ones above them go.
                self.scroll_to(y=max(0, self.scroll_offset.y - dropped), animate=False, immediate=True)
        if self.follow:
            self.scroll_end(animate=False, immediate=True, x_axis=False)
        if self.search.text:
            self._show_status()

    def _matching(self, lines: Iterable[str]) -> list[str]:
        needle = self.filter_text.lower()
        return [line for line in lines if needle in line.lower()] if needle else list(lines)

    @property
    def visible_lines(self) -> list[str]:
        """The lines on screen."""
        top = round(self.scroll_offset.y)
        return list(self.lines[top:top + self.scrollable_content_region.height])

    # -- search ---------------------------------------------------------------------------

    def set_search(self, text: str) -> None:
        """Highlight every line holding ``text`` (literally, in any case); no match is
        current until :meth:`find`."""
        self.search.reset(text, self.lines)
        self._show_status()
        self.refresh()

    def find(self, forward: bool = True) -> bool:
        """Go to the next (or previous) match: it becomes current, is scrolled into view,
        and following stops, as scrolling back stops it. False: nothing matches."""
        top = round(self.scroll_offset.y)
        height = max(1, self.scrollable_content_region.height)
        index = self.search.step(forward, top, top + height - 1)
        self.refresh()
        if index is None:
            self._show_status()
            return False
        self.set_follow(False)
        if not top <= index < top + height:
            self.scroll_to(y=max(0, index - height // 2), animate=False, immediate=True)
        # A match past the right edge (lines are not wrapped): sideways too.
        left, width = round(self.scroll_offset.x), self.scrollable_content_region.width
        column = self.search.column(self.lines[index].expandtabs())
        if column >= 0 and not left <= column <= column + len(self.search.text) <= left + width:
            self.scroll_to(x=max(0, column - width // 4), animate=False, immediate=True)
        return True

    @property
    def current_line(self) -> str | None:
        """The current match's line, if there is one."""
        index = self.search.current_index
        return None if index is None else self.lines[index]

    def render_line(self, y: int) -> Strip:
        index = self.search.current_index
        current = index is not None and round(self.scroll_offset.y) + y == index
        self.rendering_current = current
        try:
            strip = super().render_line(y)
        finally:
            self.rendering_current = False
        if not current:
            return strip
        # The current match's line stands out across the pane's width: its background
        # under the text and the blank after it (matches and a selection keep their own).
        background = self.rich_style.bgcolor
        return Strip([Segment(text, style + CURRENT_LINE if style is not None and style.bgcolor == background
                              else style, control) for text, style, control in strip], strip.cell_length)

    # -- following ------------------------------------------------------------------------

    def set_follow(self, follow: bool) -> None:
        """Follow the tail (and go there now) or stay where the operator scrolled."""
        self.follow = follow
        if follow:
            self.scroll_end(animate=False, immediate=True, x_axis=False)
        self._show_status()

    def _show_status(self) -> None:
        search = self.search.status()
        if search:  # (briefly: a half of the split view is 40 columns wide at 80)
            status = f"{search} │ {'following' if self.follow else 'paused (f)'}"
        else:
            status = "following (f)" if self.follow else "paused: f or End follows"
        if status != self._status:  # (set on every write while a search is on)
            self._status = status
            # Content, not markup: the search text is the operator's, "[" and all.
            self.border_subtitle = Content(status)

    def action_follow(self) -> None:
        self.set_follow(True)

    def action_toggle_follow(self) -> None:
        self.set_follow(not self.follow)

    def on_resize(self, event: Resize) -> None:
        # A hint line above the pane, a narrower terminal: still at the tail.
        if self.follow:
            self.call_after_refresh(self.scroll_end, animate=False, x_axis=False)

    # Scrolling back is the operator's way of saying "stop following".
    def action_scroll_up(self) -> None:
        self.set_follow(False)
        super().action_scroll_up()

    def action_page_up(self) -> None:
        self.set_follow(False)
        super().action_page_up()

    def action_scroll_home(self) -> None:
        self.set_follow(False)
        super().action_scroll_home()

    def action_scroll_end(self) -> None:
        self.set_follow(True)

    def _on_mouse_scroll_up(self, event: MouseScrollUp) -> None:
        self.set_follow(False)
        super()._on_mouse_scroll_up(event)
