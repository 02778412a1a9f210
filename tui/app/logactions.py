"""The log half of the app's keys: follow, focus, filter, and the whole log in ``$PAGER``
(:class:`~tui.app.app.TfdistApp` is made of this, :class:`~tui.app.pending.SettingsActions`
and its own task keys)."""

from __future__ import annotations

import os
import shlex
import subprocess
from pathlib import Path

from textual import on
from textual.app import App, SuspendNotSupported
from textual.widgets import Input, TabbedContent

from tui.app.logs import LogPane
from tui.app.state import Dashboard
from tui.app.tasktable import TaskTable


class LogActions(App[int]):
    """What the operator does with the log panes."""

    dashboard: Dashboard

    @property
    def table(self) -> TaskTable:
        return self.query_one(TaskTable)

    @property
    def task_log(self) -> LogPane:
        return self.query_one("#task-log", LogPane)

    @property
    def merged_log(self) -> LogPane:
        return self.query_one("#merged-log", LogPane)

    def _selected_or_warn(self) -> str | None:
        name = self.table.selected
        if name is None:
            self.notify("no task selected", severity="warning")
        return name

    @property
    def shown_log(self) -> LogPane:
        """The log pane on screen (the merged one on the All logs tab)."""
        return self.merged_log if self.query_one(TabbedContent).active == "merged" else self.task_log

    def _to_log_tab(self) -> None:
        tabs = self.query_one(TabbedContent)
        if tabs.active not in ("logs", "merged"):
            tabs.active = "logs"

    def action_follow_log(self) -> None:
        self._to_log_tab()
        self.shown_log.set_follow(True)

    def action_toggle_follow(self) -> None:
        self._to_log_tab()
        self.shown_log.action_toggle_follow()

    def action_focus_log(self) -> None:
        """Into the log (its keys scroll it) and back to the task table."""
        self._to_log_tab()
        log = self.shown_log
        if log.has_focus:
            self.table.focus()
        else:
            log.focus()

    def action_open_pager(self) -> None:
        """The selected task's whole log (the run directory's copy) in ``$PAGER``; the app
        suspends meanwhile and comes back as it was."""
        name = self._selected_or_warn()
        if name is None or not self.dashboard.run_dir:
            return
        path = Path(self.dashboard.run_dir) / "logs" / f"{name}.log"
        if not path.is_file():
            self.notify(f"no log file yet: {path}", severity="warning")
            return
        argv = [*shlex.split(os.environ.get("PAGER") or "less -R"), str(path)]
        try:
            with self.suspend():
                subprocess.run(argv, check=False)
        except SuspendNotSupported:
            self.notify(f"cannot suspend this terminal; the log is {path}", severity="warning")
        except OSError as exc:
            self.notify(f"cannot run {argv[0]}: {exc.strerror or exc}", severity="error")

    def action_filter(self) -> None:
        field = self.query_one("#filter", Input)
        field.display = True
        field.focus()

    @on(Input.Changed, "#filter")
    def _filter_changed(self, event: Input.Changed) -> None:
        self.task_log.show_log(self.task_log.source, event.value)
        self.merged_log.show_log(self.merged_log.source, event.value)

    @on(Input.Submitted, "#filter")
    def _filter_kept(self) -> None:
        self.table.focus()
