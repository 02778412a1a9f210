"""The task table of a big cluster brings only the rows on screen up to date on a refresh
(issue 35); rows scrolled into sight are brought up to date at the next one."""

from __future__ import annotations

from pathlib import Path

from textual.app import App, ComposeResult

from trainer.settings import TrainingSettings
from tui.app.state import Dashboard
from tui.app.tasktable import ALL_ROWS_UNDER, ROWS_BEYOND, TaskTable
from tui.config.cluster import Job
from tui.core.events import RunStarted
from tui.plan.tasks import TaskInfo

WORKERS = 200


class TableApp(App[None]):
    def compose(self) -> ComposeResult:
        yield TaskTable(id="tasks")


def dashboard() -> Dashboard:
    d = Dashboard(TrainingSettings(), clock=lambda: 0.0)
    tasks = (TaskInfo("ps0", Job.PS, 0, "localhost", 40000),
             *(TaskInfo(f"worker{i}", Job.WORKER, i, "localhost", 40001 + i) for i in range(WORKERS)))
    d.apply(RunStarted(run_id="r", run_dir=Path("/tmp/r"), tasks=tasks, settings=TrainingSettings(), t=0.0))
    return d


async def test_a_refresh_updates_the_rows_on_screen_and_those_scrolled_to_next() -> None:
    assert WORKERS > ALL_ROWS_UNDER
    d = dashboard()
    app = TableApp()
    async with app.run_test(size=(100, 30)) as pilot:
        table = app.query_one(TaskTable)
        table.show(d)
        await pilot.pause()
        for row in d.rows.values():
            row.global_step = 7
        table.show(d)
        first, last = "worker0", f"worker{WORKERS - 1}"
        assert table.get_cell(first, "gstep") == "7"
        assert table.get_cell(last, "gstep") == "-"  # out of sight: not yet
        beyond = table.size.height + ROWS_BEYOND
        assert sum(table.get_cell(f"worker{i}", "gstep") == "7" for i in range(WORKERS)) <= beyond
        table.scroll_end(animate=False)
        await pilot.pause()
        table.show(d)
        assert table.get_cell(last, "gstep") == "7"
