"""The Runs pane (this config's past runs, compared on a key) and the measured-traffic bars
of the Placement pane."""

from __future__ import annotations

import io
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from rich.text import Text
from textual import on, work
from textual.binding import Binding
from textual.containers import Vertical
from textual.message import Message
from textual.widgets import DataTable, Static
from textual.worker import Worker, WorkerState

from tui.app.controls import CONTROLS
from tui.app.runlist import RunBrief, RunCatalog
from tui.common.private import replace_file
from tui.common.terminal import inert
from tui.common.units import format_rate
from tui.core.traffic import TrafficSample, TrafficUpdate
from tui.experiments.compare import COMPARISON_HTML, compare, render_html, render_text

SELECTED = "●"
#: How many times, a second apart, a run the app saw end is looked for in the runs folder: the
#: app hears of the end as the core writes the run's summary, which the list reads.
FOLLOW_TRIES = 10


class RunsView(Vertical):
    """Past runs of this config, newest first. ``space`` selects a run, ``c`` compares the
    selected ones (or the two newest) below the table and writes ``comparison.html`` into
    the runs folder; ``g`` reloads the list. Runs are read on worker threads (a runs folder
    of large runs must not freeze the screen) and cached (:class:`RunCatalog`)."""

    # Declared with every other key (tui.app.controls).
    BINDINGS = [Binding(c.key, c.action, c.name, show=c.footer) for c in CONTROLS
                if c.action is not None and c.pane == "runs"]

    @dataclass
    class Listed(Message):
        """The worker read the list."""

        runs: list[RunBrief]

    @dataclass
    class Compared(Message):
        """The worker compared runs: the text to show and the page it wrote."""

        text: str
        page: Path

    def __init__(self, runs_root: Path, config_path: Path,
                 last_finished: Callable[[], str | None] | None = None, **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        #: The run id of the app's last finished run (None before one): listed once it ends.
        self.last_finished = last_finished
        self._looked_for: dict[str, int] = {}
        self.runs_root = runs_root
        self.config_path = config_path
        self.catalog = RunCatalog(runs_root, config_path)
        self.records: dict[str, RunBrief] = {}
        self.selected: list[str] = []
        self.last_page: Path | None = None
        #: Bumped each time a list is shown (tests and the benchmark wait on it).
        self.listed = 0

    def compose(self):  # type: ignore[no-untyped-def]
        yield DataTable(id="runs-table", cursor_type="row", zebra_stripes=True)
        yield Static(id="runs-comparison")

    def on_mount(self) -> None:
        table = self.query_one("#runs-table", DataTable)
        # The results before the settings: at 80 columns the run, its outcome, time, loss and
        # accuracy are on screen (the settings follow, by scrolling right from 100 columns).
        for column in ("", "run", "outcome", "wall s", "loss", "accuracy", "mode", "partitions",
                       "placement", "workers"):
            # (The mark's column is as wide as its "●": an auto width was that of the rows
            # first listed, none selected, and a selection then showed nothing.)
            table.add_column(column, key=column or "mark", width=None if column else len(SELECTED))
        # Not read now: the pane is hidden at start, and the first frame must not wait for
        # the runs folder. Opening the pane reads it (action_reload_runs).
        if self.last_finished is not None:
            self.set_interval(1.0, self._list_the_finished_run)

    def _list_the_finished_run(self) -> None:
        """Read the list again when the app's run has ended and is not listed yet, each second
        until it is (at most :data:`FOLLOW_TRIES` times): without it, a run that ended while
        the pane was open was missing until ``g``. Once a run, not once a second."""
        assert self.last_finished is not None
        run_id = self.last_finished()
        if run_id is None or run_id in self.records:
            return
        tries = self._looked_for.get(run_id, 0)
        if tries < FOLLOW_TRIES:
            self._looked_for[run_id] = tries + 1
            self._list_runs()

    def action_reload_runs(self) -> None:
        if not self.records:
            self.query_one("#runs-comparison", Static).update(Text("reading past runs…", "dim"))
        self._list_runs()

    @work(thread=True, exclusive=True, group="runs-list", exit_on_error=False)
    def _list_runs(self) -> None:
        self.post_message(self.Listed(self.catalog.list()))

    @on(Listed)
    def _show_list(self, message: Listed) -> None:
        self.records = {run.run_id: run for run in message.runs}
        self.selected = [s for s in self.selected if s in self.records]
        table = self.query_one("#runs-table", DataTable)
        # The cursor stays on its run, not its row: a run that ended comes in at the top.
        cursor = table.cursor_row
        at = str(table.coordinate_to_cell_key(table.cursor_coordinate).row_key.value) \
            if 0 <= cursor < table.row_count else None
        table.clear()
        for run in message.runs:
            # Text cells: a str cell is read as markup, and these are a run directory's words.
            cells = (run.run_id, run.outcome)
            settings = (run.setting("mode"), run.setting("partitions"), run.setting("placement"),
                        run.setting("workers"))
            table.add_row(SELECTED if run.run_id in self.selected else "", *(Text(inert(c)) for c in cells),
                          f"{run.wall_time:.1f}", _number(run.final_loss), _number(run.final_accuracy),
                          *(Text(inert(c)) for c in settings), key=run.run_id)
        if at in self.records:
            table.move_cursor(row=table.get_row_index(at))
        elif 0 <= cursor < table.row_count:
            table.move_cursor(row=cursor)
        comparison = self.query_one("#runs-comparison", Static)
        if not self.records:
            comparison.update(Text(f"no finished runs of {self.config_path.name} in {self.runs_root} yet",
                                   "dim"))
        elif self.last_page is None:
            comparison.update("")
        self.listed += 1

    def action_toggle_run(self) -> None:
        table = self.query_one("#runs-table", DataTable)
        if not self.records or table.cursor_row < 0:
            return
        run_id = str(table.coordinate_to_cell_key(table.cursor_coordinate).row_key.value)
        if run_id in self.selected:
            self.selected.remove(run_id)
        else:
            self.selected.append(run_id)
        table.update_cell(run_id, "mark", SELECTED if run_id in self.selected else "")

    def action_compare_runs(self) -> None:
        chosen = self.selected or sorted(self.records, reverse=True)[:2]
        if not chosen:
            return
        self.query_one("#runs-comparison", Static).update(Text(f"comparing {len(chosen)} runs…", "dim"))
        self._compare([self.records[run_id].path for run_id in sorted(chosen)],
                      max(self.size.width, 80))

    @work(thread=True, exclusive=True, group="runs-compare", exit_on_error=False)
    def _compare(self, paths: list[Path], width: int) -> None:
        comparison = compare([self.catalog.record(path) for path in paths])
        text = io.StringIO()
        render_text(comparison, text, width=width)
        page = self.runs_root / COMPARISON_HTML
        replace_file(page, render_html(comparison), mode=0o644)  # never through a planted link
        self.post_message(self.Compared(text.getvalue(), page))

    @on(Compared)
    def _show_comparison(self, message: Compared) -> None:
        self.last_page = message.page
        self.query_one("#runs-comparison", Static).update(
            Text(inert(message.text + f"written to {message.page}\n", newlines=True)))

    @on(Worker.StateChanged)
    def _worker_failed(self, event: Worker.StateChanged) -> None:
        if event.state is WorkerState.ERROR and event.worker.group.startswith("runs-"):
            self.query_one("#runs-comparison", Static).update(
                Text(inert(f"cannot read the runs: {event.worker.error}"), "red"))


def traffic_view(update: TrafficUpdate) -> Text:
    """The Placement pane's traffic: live bars while the run goes on, the run's own traffic
    (the lines headless prints after its summary) once it is over."""
    if update.final:
        return Text("traffic of the run: " + "\n".join(update.lines()))
    return traffic_chart(update.sample, list(update.expected_per_sec))


def traffic_chart(sample: TrafficSample | None, expected: list[float | None], width: int = 32) -> Text:
    """Measured bytes/s per ps (both directions) as bars, each beside the placement's
    expectation; the measured max/mean ratio coloured by how bad it is. Its bars line up
    with the placement's above it (:func:`tui.app.widgets.bar_chart`: the same name column
    and width), and a line fits the pane at 80 columns (``ps0  `` + 32 + `` 123.4 MiB/s
    (expected 123.4 MiB/s)``: 72 of 76)."""
    text = Text()
    if sample is None or not sample.ps:
        text.append("measured traffic: no samples yet (read from each ps's TCP counters)", "dim")
        return text
    rates = [ps.per_sec for ps in sample.ps]
    mean = sum(rates) / len(rates)
    ratio = max(rates) / mean if mean > 0 else 1.0
    style = "green" if ratio <= 1.10 else "yellow" if ratio <= 1.5 else "bold red"
    text.append("measured traffic per ps, max/mean ")
    text.append(f"{ratio:.2f}\n", style=style)
    peak = max(rates) or 1.0
    for number, ps in enumerate(sample.ps):
        filled = round(width * ps.per_sec / peak)
        text.append(f"{ps.task:<5}")
        text.append("█" * filled, style="magenta")
        text.append(" " * (width - filled))
        text.append(f" {format_rate(ps.per_sec)}")
        guess = expected[number] if number < len(expected) else None
        if guess is not None:
            text.append(f" (expected {format_rate(guess)})", style="dim")
        text.append("\n")
    return text


def _number(value: float | None) -> str:
    return "-" if value is None else f"{value:.4f}"
