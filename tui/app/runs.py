"""The Runs pane (this config's past runs, compared on a key) and the measured-traffic bars
of the Placement pane."""

from __future__ import annotations

import io
from pathlib import Path

from rich.text import Text
from textual.binding import Binding
from textual.containers import Vertical
from textual.widgets import DataTable, Static

from tui.app.controls import CONTROLS
from tui.common.private import replace_file
from tui.common.terminal import inert
from tui.common.units import format_rate
from tui.core.traffic import TrafficSample
from tui.experiments.compare import COMPARISON_HTML, compare, render_html, render_text
from tui.experiments.finished_runs import FinishedRun, RunDirError, read_run, runs_of_config

SELECTED = "●"


class RunsView(Vertical):
    """Past runs of this config, newest first. ``space`` selects a run, ``c`` compares the
    selected ones (or the two newest) below the table and writes ``comparison.html`` into
    the runs folder; ``g`` reloads the list."""

    # Declared with every other key (tui.app.controls).
    BINDINGS = [Binding(c.key, c.action, c.name, show=c.footer) for c in CONTROLS
                if c.action is not None and c.pane == "runs"]

    def __init__(self, runs_root: Path, config_path: Path, **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self.runs_root = runs_root
        self.config_path = config_path
        self.records: dict[str, FinishedRun] = {}
        self.selected: list[str] = []
        self.last_page: Path | None = None

    def compose(self):  # type: ignore[no-untyped-def]
        yield DataTable(id="runs-table", cursor_type="row", zebra_stripes=True)
        yield Static(id="runs-comparison")

    def on_mount(self) -> None:
        table = self.query_one("#runs-table", DataTable)
        for column in ("", "run", "outcome", "mode", "partitions", "placement", "workers", "wall s",
                       "loss", "accuracy"):
            table.add_column(column, key=column or "mark")
        self.action_reload_runs()

    def action_reload_runs(self) -> None:
        self.records = {}
        for path in runs_of_config(self.runs_root, self.config_path):
            try:
                self.records[path.name] = read_run(path)
            except RunDirError:
                continue  # still running, or not a run directory
        self.selected = [s for s in self.selected if s in self.records]
        table = self.query_one("#runs-table", DataTable)
        table.clear()
        for run_id, run in sorted(self.records.items(), reverse=True):
            # Text cells: a str cell is read as markup, and these are a run directory's words.
            cells = (run_id, run.outcome, run.setting("mode"), run.setting("partitions"),
                     run.setting("placement"), run.setting("workers"))
            table.add_row(SELECTED if run_id in self.selected else "", *(Text(inert(c)) for c in cells),
                          f"{run.wall_time:.1f}", _number(run.final_loss),
                          _number(run.final_accuracy), key=run_id)
        if not self.records:
            self.query_one("#runs-comparison", Static).update(
                Text(f"no finished runs of {self.config_path.name} in {self.runs_root} yet", "dim"))

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
        comparison = compare([self.records[run_id] for run_id in sorted(chosen)])
        text = io.StringIO()
        render_text(comparison, text, width=max(self.size.width, 80))
        page = self.runs_root / COMPARISON_HTML
        replace_file(page, render_html(comparison), mode=0o644)  # never through a planted link
        self.last_page = page
        self.query_one("#runs-comparison", Static).update(
            Text(inert(text.getvalue() + f"written to {page}\n", newlines=True)))


def traffic_chart(sample: TrafficSample | None, expected: list[float | None], width: int = 40) -> Text:
    """Measured bytes/s per ps (both directions) as bars, each beside the placement's
    expectation; the measured max/mean ratio coloured by how bad it is."""
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
        text.append(f"{ps.task:<6}")
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
