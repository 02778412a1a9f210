"""Overlaid line charts of several runs: as terminal text and as inline SVG.

A :class:`Series` is one run's curve (x, y points); a chart draws several on shared axes.
No plotting library: the terminal chart marks each series with its own character (and
colour, where the console has colour) on a character grid; the SVG is plain markup that a
browser shows without any script or network access.
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from dataclasses import dataclass

from rich.markup import escape

#: One marker and one colour per series, in order (repeated past the end).
MARKERS = "●▲■◆✚✖○△"
COLOURS = ("#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf")
RICH_COLOURS = ("blue", "red", "green", "yellow", "magenta", "cyan", "bright_red", "bright_blue")


@dataclass(frozen=True)
class Series:
    """One run's curve."""

    label: str
    points: tuple[tuple[float, float], ...]


@dataclass(frozen=True)
class Bounds:
    x0: float
    x1: float
    y0: float
    y1: float


def bounds(series: Sequence[Series]) -> Bounds | None:
    """The box holding every point (widened where it would be empty); None without points."""
    points = [p for s in series for p in s.points]
    if not points:
        return None
    xs = [x for x, _ in points]
    ys = [y for _, y in points]
    x0, x1, y0, y1 = min(xs), max(xs), min(0.0, min(ys)), max(ys)
    return Bounds(x0, x1 if x1 > x0 else x0 + 1, y0, y1 if y1 > y0 else y0 + 1)


def text_chart(title: str, series: Sequence[Series], width: int = 60, height: int = 12,
               x_label: str = "", markup: bool = False) -> list[str]:
    """The chart as lines of text: a y-axis with its range, one marker per series per
    column, an x-axis with its range and a legend. With ``markup``, markers carry Rich
    colour tags."""
    box = bounds(series)
    if box is None:
        return [f"{title}: no data"]
    grid = [[" "] * width for _ in range(height)]
    for number, one in enumerate(series):
        mark = MARKERS[number % len(MARKERS)]
        if markup:
            mark = f"[{RICH_COLOURS[number % len(RICH_COLOURS)]}]{mark}[/]"
        for x, y in one.points:
            col = round((x - box.x0) / (box.x1 - box.x0) * (width - 1))
            row = height - 1 - round((y - box.y0) / (box.y1 - box.y0) * (height - 1))
            grid[row][col] = mark
    top, bottom = _tick(box.y1), _tick(box.y0)
    pad = max(len(top), len(bottom))
    lines = [title]
    for row, cells in enumerate(grid):
        label = top if row == 0 else bottom if row == height - 1 else ""
        lines.append(f"{label:>{pad}} │{''.join(cells)}")
    lines.append(f"{'':>{pad}} └{'─' * width}")
    left, right = _tick(box.x0), _tick(box.x1)
    lines.append(f"{'':>{pad}}  {left}{x_label:^{max(width - len(left) - len(right), 0)}}{right}")
    for number, one in enumerate(series):
        mark = MARKERS[number % len(MARKERS)]
        if markup:
            mark = f"[{RICH_COLOURS[number % len(RICH_COLOURS)]}]{mark}[/]"
        # A label is made of a run's settings (its run directory's words): never markup.
        lines.append(f"{'':>{pad}}  {mark} {escape(one.label) if markup else one.label}")
    return lines


def svg_chart(title: str, series: Sequence[Series], x_label: str, y_label: str,
              width: int = 640, height: int = 320) -> str:
    """The chart as one ``<svg>`` element: axes with their ranges, one polyline per series,
    a legend."""
    left, right, top, bottom = 60, 20, 30, 40
    legend_height = 18 * len(series)
    total = height + legend_height
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{total}" '
             f'viewBox="0 0 {width} {total}" font-family="sans-serif" font-size="12">',
             f'<text x="{width / 2}" y="18" text-anchor="middle" font-size="14">{html.escape(title)}</text>']
    box = bounds(series)
    if box is None:
        parts.append(f'<text x="{width / 2}" y="{height / 2}" text-anchor="middle">no data</text></svg>')
        return "".join(parts)
    plot_w, plot_h = width - left - right, height - top - bottom

    def at(x: float, y: float) -> str:
        px = left + (x - box.x0) / (box.x1 - box.x0) * plot_w
        py = top + plot_h - (y - box.y0) / (box.y1 - box.y0) * plot_h
        return f"{px:.1f},{py:.1f}"

    parts.append(f'<rect x="{left}" y="{top}" width="{plot_w}" height="{plot_h}" fill="none" '
                 'stroke="#888"/>')
    parts.append(f'<text x="{left - 4}" y="{top + 4}" text-anchor="end">{_tick(box.y1)}</text>')
    parts.append(f'<text x="{left - 4}" y="{top + plot_h}" text-anchor="end">{_tick(box.y0)}</text>')
    parts.append(f'<text x="{left}" y="{top + plot_h + 16}">{_tick(box.x0)}</text>')
    parts.append(f'<text x="{left + plot_w}" y="{top + plot_h + 16}" text-anchor="end">'
                 f'{_tick(box.x1)}</text>')
    parts.append(f'<text x="{left + plot_w / 2}" y="{top + plot_h + 32}" text-anchor="middle">'
                 f'{html.escape(x_label)}</text>')
    parts.append(f'<text x="14" y="{top + plot_h / 2}" text-anchor="middle" '
                 f'transform="rotate(-90 14 {top + plot_h / 2})">{html.escape(y_label)}</text>')
    for number, one in enumerate(series):
        colour = COLOURS[number % len(COLOURS)]
        points = " ".join(at(x, y) for x, y in one.points)
        parts.append(f'<polyline fill="none" stroke="{colour}" stroke-width="1.5" points="{points}"/>')
        y = height + 14 + 18 * number
        parts.append(f'<line x1="{left}" y1="{y - 4}" x2="{left + 24}" y2="{y - 4}" stroke="{colour}" '
                     'stroke-width="3"/>')
        parts.append(f'<text x="{left + 30}" y="{y}">{html.escape(one.label)}</text>')
    parts.append("</svg>")
    return "".join(parts)


def _tick(value: float) -> str:
    if value == 0:
        return "0"
    if abs(value) >= 1000:
        return f"{value:.0f}"
    return f"{value:.3g}"
