"""``tfdist-tui compare RUN_DIR...``: several runs side by side.

One table (the settings that differ between the runs, then wall time, time to the first
step (start-up) and to the target step, final loss and accuracy, aggregate examples/sec as
median and min-max, bytes placed on each ps and measured traffic per ps) and two overlaid
charts (loss against step, examples/sec against time). :func:`render_text` gives the
terminal form (Rich), and :func:`render_html` a self-contained HTML page with the same
table and inline SVG charts.
"""

from __future__ import annotations

import html
import io
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from rich.console import Console
from rich.table import Table
from rich.text import Text

from tui.common.private import replace_file
from tui.common.terminal import inert
from tui.common.units import format_bytes, format_rate
from tui.core.describe import format_number
from tui.experiments.charts import Series, svg_chart, text_chart
from tui.experiments.finished_runs import FinishedRun

COMPARISON_HTML = "comparison.html"
COMPARISON_TEXT = "comparison.txt"
#: A file is never wrapped: wide enough for every column of many differing settings.
FILE_WIDTH = 1000


@dataclass(frozen=True)
class Comparison:
    """Rows of text, one per run, under ``columns``; and the runs' curves."""

    columns: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]
    labels: tuple[str, ...]
    loss: tuple[Series, ...]
    rate: tuple[Series, ...]


def differing_settings(runs: Sequence[FinishedRun]) -> list[str]:
    """Names of the settings whose values are not the same in every run, in first-seen order."""
    names: list[str] = []
    for run in runs:
        names += [name for name, _ in run.settings if name not in names]
    return [name for name in names if len({run.setting(name) for run in runs}) > 1]


def compare(runs: Sequence[FinishedRun]) -> Comparison:
    """The comparison of ``runs`` (at least one)."""
    differ = differing_settings(runs)
    columns = ("run", *differ, "outcome", "wall s", "first step s", "to target s", "loss", "accuracy",
               "ex/s median (min-max)", "bytes per ps", "traffic per ps", "max/mean")
    rows = []
    labels = []
    for run in runs:
        # Settings and ids come from run directories: made inert once, here, for every view.
        label = inert(" ".join(f"{name}={run.setting(name)}" for name in differ) or run.run_id)
        labels.append(label)
        rate = (f"{run.throughput.median:.1f} ({run.throughput.low:.1f}-{run.throughput.high:.1f})"
                if run.throughput else "-")
        placed = " / ".join(format_bytes(b) for b in run.ps_bytes) or "-"
        traffic = " / ".join(format_rate(t.measured_per_sec) for t in run.traffic) or "-"
        imbalance = f"{run.traffic_imbalance:.2f}" if run.traffic_imbalance is not None else "-"
        rows.append((inert(run.run_id), *(inert(run.setting(name)) for name in differ), inert(run.outcome),
                     f"{run.wall_time:.1f}", _seconds(run.time_to_first_step),
                     _seconds(run.time_to_target),
                     format_number(run.final_loss), format_number(run.final_accuracy),
                     rate, placed, traffic, imbalance))
    loss = tuple(Series(label, tuple((float(s), v) for s, v in run.loss_curve))
                 for label, run in zip(labels, runs, strict=True))
    rate_series = tuple(Series(label, run.rate_curve) for label, run in zip(labels, runs, strict=True))
    return Comparison(columns, tuple(rows), tuple(labels), loss, rate_series)


def render_text(comparison: Comparison, out: TextIO, colour: bool = False, width: int = 240) -> None:
    """The table and both charts, for a terminal (or a file with ``colour=False``)."""
    console = Console(file=out, width=width, color_system="auto" if colour else None,
                      force_terminal=colour, highlight=False, soft_wrap=False)
    table = Table(title=f"{len(comparison.rows)} run(s)", title_justify="left")
    for number, column in enumerate(comparison.columns):
        table.add_column(Text(inert(column)), no_wrap=True,
                         justify="left" if number == 0 or not _numeric(column) else "right")
    for row in comparison.rows:
        table.add_row(*(Text(cell) for cell in row))  # Text: a "[/]" in a value is not markup
    if _natural_width(comparison) > width:
        # Too wide: Rich would cut every header to "outc…". A run per column instead (there
        # are few runs and many measures), which 120 columns hold for three or four runs.
        table = _by_run(comparison)
    console.print(table)
    for title, series, x_label in (("loss by step", comparison.loss, "global step"),
                                   ("examples/sec by time", comparison.rate, "seconds since start")):
        console.print()
        for line in text_chart(title, series, x_label=x_label, markup=colour):
            console.print(line, markup=colour, highlight=False)


def render_html(comparison: Comparison, title: str = "tfdist-tui comparison") -> str:
    """A self-contained page: the table and both charts as inline SVG (no scripts)."""
    head = "".join(f"<th>{html.escape(c)}</th>" for c in comparison.columns)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(cell)}</td>" for cell in row) + "</tr>"
                   for row in comparison.rows)
    charts = (svg_chart("loss by step", comparison.loss, "global step", "loss")
              + svg_chart("examples/sec by time", comparison.rate, "seconds since start", "examples/sec"))
    stamp = time.strftime("%Y-%m-%d %H:%M:%S")
    return ("<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\">"
            f"<title>{html.escape(title)}</title><style>"
            "body{font-family:sans-serif;margin:1em}table{border-collapse:collapse}"
            "td,th{border:1px solid #ccc;padding:2px 6px;text-align:right}"
            "td:first-child,th{text-align:left}svg{display:block;margin:1em 0}</style></head><body>"
            f"<h1>{html.escape(title)}</h1><p>written {stamp}</p>"
            f"<table><tr>{head}</tr>{body}</table>{charts}</body></html>\n")


def write_files(comparison: Comparison, folder: Path) -> tuple[Path, Path]:
    """Write ``comparison.txt`` and ``comparison.html`` into ``folder``; their paths."""
    text = io.StringIO()
    render_text(comparison, text, width=FILE_WIDTH)
    text_path = folder / COMPARISON_TEXT
    replace_file(text_path, text.getvalue(), mode=0o644)  # never through a planted link
    html_path = folder / COMPARISON_HTML
    replace_file(html_path, render_html(comparison), mode=0o644)
    return text_path, html_path


def _natural_width(comparison: Comparison) -> int:
    """The table's width with no cell cut (Rich's box: 3 characters a column, plus 1)."""
    widths = [max(len(column), *(len(row[n]) for row in comparison.rows))
              for n, column in enumerate(comparison.columns)]
    return sum(widths) + 3 * len(widths) + 1


def _by_run(comparison: Comparison) -> Table:
    """The comparison transposed: a row per measure, a column per run."""
    table = Table(title=f"{len(comparison.rows)} run(s)", title_justify="left")
    table.add_column("", no_wrap=True)
    for row in comparison.rows:
        table.add_column(Text(row[0]), justify="right", overflow="fold")
    for number, column in enumerate(comparison.columns[1:], 1):
        table.add_row(Text(column), *(Text(row[number]) for row in comparison.rows))
    return table


def _numeric(column: str) -> bool:
    return column not in ("outcome", "bytes per ps", "traffic per ps")


def _seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"
