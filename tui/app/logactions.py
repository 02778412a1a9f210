"""The log half of the app's keys: follow, focus, search (``/``, ``n``, ``N``), filter
(``&``), copy (``C``) and the whole log in ``$PAGER`` (:class:`~tui.app.app.TfdistApp` is
made of this, :class:`~tui.app.split.SplitActions` for the second log,
:class:`~tui.app.pending.SettingsActions` and its own task keys)."""

from __future__ import annotations

import os
import shlex
import subprocess
from pathlib import Path
from typing import Any

from textual import events, on
from textual.app import App, SuspendNotSupported
from textual.widget import Widget
from textual.widgets import Input, TabbedContent

from tui.app.logs import LogPane
from tui.app.pagercopy import inert_copy
from tui.app.state import Dashboard
from tui.app.tasktable import TaskTable
from tui.common.terminal import inert

#: The fields under the panes, in the order ``esc`` looks at them.
FIELDS = ("search", "filter")


#: The panes that ``l`` goes into, by the id of their view.
SCROLLED_VIEWS = {"placement": "#placement-view", "throughput": "#throughput-view"}


class LogActions(App[int]):
    """What the operator does with the log panes."""

    dashboard: Dashboard
    #: Where the focus goes back to when a field under the panes is done with.
    _before_field: Widget | None = None

    @property
    def table(self) -> TaskTable:
        return self.query_one(TaskTable)

    @property
    def task_log(self) -> LogPane:
        return self.query_one("#task-log", LogPane)

    @property
    def merged_log(self) -> LogPane:
        return self.query_one("#merged-log", LogPane)

    @property
    def pinned_log(self) -> LogPane:
        """The split view's second log (:mod:`tui.app.split`); hidden until a task is pinned."""
        return self.query_one("#pinned-log", LogPane)

    @property
    def log_panes(self) -> tuple[LogPane, ...]:
        """Every log pane, shown or not: each takes its source's new lines on a refresh, and a
        filter or search applies to all of them."""
        return self.task_log, self.merged_log, self.pinned_log

    def watch_screen(self) -> None:
        """Tell the core which logs the screen shows now (:mod:`tui.app.pacing`)."""

    def _selected_or_warn(self) -> str | None:
        name = self.table.selected
        if name is None:
            self.notify("no task selected", severity="warning")
        return name

    @property
    def shown_log(self) -> LogPane:
        """The log pane on screen (the merged one on the All logs tab; with the split view,
        the half that follows the table's selection)."""
        return self.merged_log if self.query_one(TabbedContent).active == "merged" else self.task_log

    @property
    def shown_log_panes(self) -> list[LogPane]:
        """The log panes on screen, in the order ``l`` goes into them."""
        if self.query_one(TabbedContent).active == "merged":
            return [self.merged_log]
        return [self.task_log] + ([self.pinned_log] if self.pinned_log.display else [])

    @property
    def active_log(self) -> LogPane:
        """The log pane the log keys act on: the one with the focus (either half of the split
        view), else the one on screen."""
        focused = self.focused
        return focused if isinstance(focused, LogPane) else self.shown_log

    def _to_log_tab(self) -> None:
        tabs = self.query_one(TabbedContent)
        if tabs.active not in ("logs", "merged"):
            tabs.active = "logs"

    def action_follow_log(self) -> None:
        self._to_log_tab()
        self.active_log.set_follow(True)

    def action_toggle_follow(self) -> None:
        self._to_log_tab()
        self.active_log.action_toggle_follow()

    def action_focus_log(self) -> None:
        """Into the log (its keys scroll it), into the split view's other half, and back to
        the task table. On the Placement and Throughput panes: into that pane's view, and
        back (a model's shards and the workers' charts run past 80x24, and the task table
        has the other keys)."""
        view = SCROLLED_VIEWS.get(self.query_one(TabbedContent).active)
        if view is not None:
            widget = self.query_one(view)
            (self.table if self.focused is widget else widget).focus()
            return
        self._to_log_tab()
        panes = self.shown_log_panes
        focused = self.focused
        at = panes.index(focused) + 1 if isinstance(focused, LogPane) and focused in panes else 0
        (panes[at] if at < len(panes) else self.table).focus()

    def action_open_pager(self) -> None:
        """The selected task's whole log (the run directory's copy, made inert:
        :mod:`tui.app.pagercopy`) in ``$PAGER``; the app suspends meanwhile and comes back
        as it was."""
        name = self._selected_or_warn()
        if name is None or not self.dashboard.run_dir:
            return
        path = Path(self.dashboard.run_dir) / "logs" / f"{name}.log"
        if not path.is_file():
            self.notify(f"no log file yet: {path}", severity="warning")
            return
        try:
            pager = shlex.split(os.environ.get("PAGER") or "") or ["less", "-R"]
        except ValueError as exc:  # unbalanced quotes
            self.notify(f"PAGER is not a command line ({exc}); the log is {path}", severity="error")
            return
        try:
            # Through the app's one filter: the file holds the task's escapes as written.
            with inert_copy(path) as shown, self.suspend():
                subprocess.run([*pager, str(shown)], check=False)
        except SuspendNotSupported:
            self.notify(f"cannot suspend this terminal; the log is {path}", severity="warning")
        except OSError as exc:
            self.notify(f"cannot show {path} in {pager[0]}: {exc.strerror or exc}", severity="error")

    # -- the fields under the panes -------------------------------------------------------

    def _typed_in_a_field(self, key: str, char: str) -> bool:
        """``/`` and ``&`` are priority keys (they act before the focused widget sees them:
        tui.app.controls says why); in a field they are only text: handed to it as a key,
        after the keys it has yet to handle."""
        focused = self.focused
        if not isinstance(focused, Input):
            return False
        focused.post_message(events.Key(key, char))
        return True

    def _open_field(self, name: str) -> None:
        field = self.query_one(f"#{name}", Input)
        if not field.has_focus:
            focused = self.focused
            self._before_field = None if isinstance(focused, Input) else focused
        field.display = True
        self.query_one("#fields").display = True
        self._focus_now(field)  # (which selects its text: typing replaces it)

    def _leave_field(self, name: str, *, hide: bool) -> None:
        field = self.query_one(f"#{name}", Input)
        if hide:
            field.display = False
            self.query_one("#fields").display = any(self.query_one(f"#{f}", Input).display for f in FIELDS)
        back = self._before_field
        self._focus_now(back if back is not None and back.is_attached and back.display else self.table)

    def _focus_now(self, widget: Widget) -> None:
        # Not widget.focus(), which moves the focus only after the keys already read: with
        # "/x" typed (or pasted, or sent by tmux) at once, the x went to the table and
        # stopped the selected task.
        self.screen.set_focus(widget)

    def on_key(self, event: Any) -> None:
        if event.key != "escape":
            return
        for name in FIELDS:
            field = self.query_one(f"#{name}", Input)
            if field.has_focus:
                field.value = ""  # (Input.Changed clears the filter or the search)
                self._leave_field(name, hide=True)

    # -- filter: only the lines holding a text ----------------------------------------------

    def action_filter(self) -> None:
        if not self._typed_in_a_field("ampersand", "&"):
            self._open_field("filter")

    @on(Input.Changed, "#filter")
    def _filter_changed(self, event: Input.Changed) -> None:
        for pane in self.log_panes:
            pane.show_log(pane.source, event.value)

    @on(Input.Submitted, "#filter")
    def _filter_kept(self) -> None:
        self._leave_field("filter", hide=False)  # (shown while it filters)

    # -- search: every line, the matches marked, n and N go from one to the next ------------

    def action_search(self) -> None:
        if not self._typed_in_a_field("slash", "/"):
            self._to_log_tab()
            self._open_field("search")

    @on(Input.Changed, "#search")
    def _search_changed(self, event: Input.Changed) -> None:
        for pane in self.log_panes:  # highlighted as it is typed; n and N go to them
            pane.set_search(event.value)

    @on(Input.Submitted, "#search")
    def _search_submitted(self, event: Input.Submitted) -> None:
        self._leave_field("search", hide=True)  # (the border says what it found)
        if event.value:
            self.active_log.find(forward=True)

    def action_search_next(self) -> None:
        self._find(forward=True)

    def action_search_previous(self) -> None:
        self._find(forward=False)

    def _find(self, *, forward: bool) -> None:
        self._to_log_tab()
        pane = self.active_log
        if not pane.search.text:
            self.notify("nothing to find: / searches the log", severity="warning", timeout=3)
            return
        pane.find(forward=forward)  # (no match: its border says so)

    # -- copy -----------------------------------------------------------------------------

    def action_copy_log(self) -> None:
        """Copy the text selected with the mouse; with none, the current match's line, else
        the lines on screen of the log the keys act on. Through the terminal (OSC 52)."""
        selected = self.screen.get_selected_text()
        if selected:
            text, what = selected, "the selection"
        elif (line := self.active_log.current_line) is not None:
            text, what = line, "the current match"
        else:
            text, what = "\n".join(self.active_log.visible_lines), "the lines on screen"
        # The panes hold task output made inert (tui.common.terminal) already; once more, in
        # case a selection spans other widgets: whatever is pasted into a shell must not
        # carry a task's escape sequences.
        text = inert(text, newlines=True).rstrip("\n")
        if not text:
            self.notify("nothing to copy", severity="warning", timeout=3)
            return
        self.copy_to_clipboard(text)
        count = text.count("\n") + 1
        self.notify(f"copied {count} line{'s' if count > 1 else ''} ({what})", timeout=3)
