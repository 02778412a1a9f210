"""Two tasks' logs at once: ``w`` pins the selected task's log in a second pane beside the
one that follows the table's selection (above it under 80 columns), so that the operator can
select another task and read both; ``w`` again closes the split. Each half follows or pauses
by itself (``l`` goes into one, then the other) and its border names its task."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.containers import Container
from textual.events import Resize
from textual.widgets import TabbedContent

from tui.app.logactions import LogActions
from tui.app.logs import LogPane
from tui.app.state import TaskLog

#: From this many columns the halves are side by side; below, one above the other. At 80x24
#: the task table leaves the logs about 13 rows: one above the other, each half would show
#: 3 lines (fewer under a hint); side by side, 9 lines of 36 columns each, and a longer line
#: scrolls sideways in its half.
SIDE_BY_SIDE_COLUMNS = 80


class LogSplit(Container):
    """The Logs tab: the selected task's log and, once a task is pinned, that task's log
    before it (left, or above when narrow)."""

    #: The pinned task, while the split is open.
    pinned: str | None = None

    def compose(self) -> ComposeResult:
        yield LogPane(id="pinned-log")
        yield LogPane(id="task-log")

    def on_mount(self) -> None:
        self.query_one("#pinned-log", LogPane).display = False

    def on_resize(self, event: Resize) -> None:
        self.set_class(event.size.width >= SIDE_BY_SIDE_COLUMNS, "-side-by-side")

    def pin(self, name: str, source: TaskLog | None, *, like: LogPane) -> None:
        """Show ``name``'s log in the second pane, filtered and searched as ``like`` is."""
        pane = self.query_one("#pinned-log", LogPane)
        pane.search.reset(like.search.text)
        pane.show_log(source, like.filter_text)
        pane.border_title = f"{name} (pinned; w closes)"
        pane.display = True
        self.pinned = name

    def unpin(self) -> None:
        """Close the split: the selected task's log alone again."""
        pane = self.query_one("#pinned-log", LogPane)
        pane.display = False
        pane.show_log(None, pane.filter_text)  # (it stops taking its task's lines)
        pane.border_title = ""
        self.pinned = None


class SplitActions(LogActions):
    """The split view's key."""

    def action_toggle_split(self) -> None:
        split = self.query_one(LogSplit)
        if split.pinned is not None:
            if self.pinned_log.has_focus:
                self.table.focus()
            split.unpin()
            self.watch_screen()
            return
        name = self._selected_or_warn()
        if name is None:
            return
        self.query_one(TabbedContent).active = "logs"
        split.pin(name, self.dashboard.logs.get(name), like=self.task_log)
        self.watch_screen()
        self.notify(f"{name}'s log pinned: select another task to see both (w closes)", timeout=3)
