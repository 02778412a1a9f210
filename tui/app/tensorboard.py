"""The TensorBoard key: the core starts TensorBoard (:mod:`tui.core.tensorboard`) for the
current run, or, on the Runs tab, for the runs selected there; its address comes back as a
notice (a toast, and a line of the All logs pane that C copies)."""

from __future__ import annotations

from textual.widgets import TabbedContent

from tui.app.announce import Announcements
from tui.app.runs import RunsView
from tui.core.commands import Command, OpenTensorBoard


class TensorBoardActions(Announcements):
    """``action_open_tensorboard`` for the app (whose ``_request`` sends the command)."""

    def _request(self, command: Command) -> None:
        raise NotImplementedError  # the app's

    def action_open_tensorboard(self) -> None:
        runs = self.query_one(RunsView)
        chosen = runs.selected if self.query_one(TabbedContent).active == "runs" else []
        self._request(OpenTensorBoard(tuple(runs.records[run_id].path for run_id in sorted(chosen))))
        shown = f"{len(chosen)} selected runs" if chosen else "this run"
        self.notify(f"starting TensorBoard for {shown}…", timeout=3)
