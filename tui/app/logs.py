"""The log panes: a task's output (or every task's, merged), following its tail like
``tail -f`` until the operator scrolls back, as a pager does.

Following is the operator's choice, kept in :attr:`LogPane.follow`; it is not guessed from
the scroll position. (Textual's ``Log`` scrolls to new lines only while it is scrolled to
the end, so anything that changes the pane's height, a hint line appearing above it, left
it stuck where it was.)"""

from __future__ import annotations

import re
from collections.abc import Iterable

from rich.highlighter import Highlighter
from rich.text import Text
from textual.binding import Binding
from textual.events import MouseScrollUp, Resize
from textual.widgets import Log

from tui.app.state import LOG_LINES_PER_TASK, TaskLog

#: Lines a pane keeps (the run directory has every line).
PANE_LINES = LOG_LINES_PER_TASK


#: The colour of each role's name where a line starts with it (the merged log's prefix).
ROLE_STYLES = (("ps", "magenta"), ("chief", "yellow"), ("worker", "cyan"), ("evaluator", "green"))
_PREFIX = re.compile(r"^(ps|chief|worker|evaluator)\d*\s*\|")


class LogHighlighter(Highlighter):
    """Colours a line's task prefix by role, the controller's own lines (``──``) dim, and
    every match of the pane's filter in reverse video."""

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


class LogPane(Log):
    """A log that follows its tail unless the operator scrolled back; ``End`` or ``f``
    follow again. Its border shows which (``following`` / ``paused``)."""

    BINDINGS = [Binding("end", "follow", "Follow", show=False)]

    def __init__(self, *, id: str) -> None:
        super().__init__(max_lines=PANE_LINES, auto_scroll=False, highlight=True, id=id)
        self.highlighter = LogHighlighter(self)
        self.filter_text = ""
        self.source: TaskLog | None = None
        self._mark = 0  # the source's line count when this pane last took its lines
        self.follow = True

    def on_mount(self) -> None:
        self._show_follow()

    # -- what it shows --------------------------------------------------------------------

    def show_log(self, source: TaskLog | None, filter_text: str) -> None:
        """Switch to another source or filter: redraw from the retained tail (at its end
        when following)."""
        if source is not self.source:
            self.set_follow(True)  # another task: its latest lines, as a pager opens at the end
        self.source, self.filter_text = source, filter_text
        self.clear()
        if source is not None:
            self._mark = source.added
            self._write(self._matching(source.lines))

    def append_unseen(self) -> None:
        """Add what the source got since the last call."""
        if self.source is None or self.source.added == self._mark:
            return
        lines = self._matching(self.source.since(self._mark))
        self._mark = self.source.added
        if lines:
            self._write(lines)

    def _write(self, lines: list[str]) -> None:
        self.write_lines(lines, scroll_end=False)
        if self.follow:
            self.scroll_end(animate=False, immediate=True, x_axis=False)

    def _matching(self, lines: Iterable[str]) -> list[str]:
        needle = self.filter_text.lower()
        return [line for line in lines if needle in line.lower()] if needle else list(lines)

    # -- following ------------------------------------------------------------------------

    def set_follow(self, follow: bool) -> None:
        """Follow the tail (and go there now) or stay where the operator scrolled."""
        self.follow = follow
        if follow:
            self.scroll_end(animate=False, immediate=True, x_axis=False)
        self._show_follow()

    def _show_follow(self) -> None:
        self.border_subtitle = "following (f)" if self.follow else "paused: f or End follows"

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
