"""The dashboard's widgets. Each renders from :class:`~tui.app.state.Dashboard` when the app
refreshes it; none holds state of its own beyond what it displays."""

from __future__ import annotations

from collections.abc import Iterable
from typing import ClassVar

from rich.cells import cell_len, set_cell_size
from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.geometry import Size
from textual.renderables.sparkline import Sparkline as SparklineRenderable
from textual.screen import Screen
from textual.scrollbar import ScrollBar, ScrollBarRender
from textual.strip import Strip
from textual.widget import Widget
from textual.widgets import DataTable, Footer, ProgressBar, Sparkline, Static, TabbedContent, TabPane

from trainer import protocol
from trainer.settings import TrainingSettings
from tui.app.controls import CONTROLS, TOGGLES, Section, Toggle
from tui.app.state import Dashboard
from tui.common.terminal import inert
from tui.common.units import format_bytes
from tui.core.anatomy import typical_text
from tui.core.run_facts import Figures, RateUnit, setting_text
from tui.core.task_state import TaskState
from tui.program.base import Setting

STATE_STYLES: dict[TaskState, str] = {
    TaskState.PENDING: "dim",
    TaskState.STARTING: "yellow",
    TaskState.RUNNING: "green",
    TaskState.STOPPING: "yellow",
    TaskState.BACKOFF: "bold yellow",
    TaskState.SUCCEEDED: "cyan",
    TaskState.FAILED: "bold red",
    TaskState.STOPPED: "magenta",
    TaskState.UNREACHABLE: "bold magenta",
}


class WholeCellScrollBar(ScrollBarRender):
    """A scrollbar whose thumb is drawn in whole cells. Textual draws a thumb's ends with
    eighth blocks for smoothness; beside a table or a sparkline they read as stray glyphs
    (``▅▅`` after the task table's last column, ``▌`` under its pids) and a text capture of
    the screen shows nothing else of the bar."""

    VERTICAL_BARS = [" "] * len(ScrollBarRender.VERTICAL_BARS)
    HORIZONTAL_BARS = [" "] * len(ScrollBarRender.HORIZONTAL_BARS)


def use_whole_cell_scrollbars() -> None:
    """Every scrollbar of the app in whole cells (Textual's documented way: the class's
    renderer; one app runs in the process)."""
    ScrollBar.renderer = WholeCellScrollBar


def duration(seconds: float) -> str:
    seconds = int(seconds)
    return f"{seconds // 3600}:{seconds % 3600 // 60:02d}:{seconds % 60:02d}"


def _shown(settings: TrainingSettings, toggle: Toggle) -> str:
    if toggle.setting is Setting.FUSE:
        return setting_text(settings, toggle.setting)
    value = getattr(settings, toggle.setting.value)
    return str(getattr(value, "value", value))


class Panes(TabbedContent):
    """The panes below the task table. They change by the operator's keys and clicks only.
    Textual also shows the pane in which a widget takes the focus; that message, delivered
    late on a busy machine, took the screen back to the Runs pane (which focuses its list
    when shown) after the operator had pressed tab again: a lost key press."""

    def _on_tab_pane_focused(self, event: TabPane.Focused) -> None:
        event.prevent_default()  # (TabbedContent's own handler would switch)
        event.stop()


class StatusBar(Static):
    """Run id, elapsed time and outcome first (never cut), then the applied settings with
    pending changes as ``old→new`` and one note that ``R`` applies them."""

    #: The time the elapsed time is shown at: the app's last clock tick (None: now).
    _now: float | None = None

    def show(self, dashboard: Dashboard, pending: TrainingSettings, *, tick: bool = False) -> None:
        """Show the dashboard; ``tick``: the clock's tick, the elapsed time moves to now
        (between ticks it stays, so that only a tick's frame redraws it)."""
        if tick:
            self._now = dashboard.clock()
        # Ten refreshes a second, a new text about once a second: skip the other nine.
        put(self, status_text(dashboard, pending, self._now))


def put(widget: Static, content: Text | str) -> None:
    """Show ``content`` in ``widget``: nothing if it shows that already, and without a layout
    pass (of the whole screen) when it takes as many lines as what it replaces, so that the
    widget's size stays (the status bar's clock changes every second)."""
    old = widget.content
    if type(old) is type(content) and old == content and (
            not isinstance(content, Text) or content.style == old.style):  # type: ignore[union-attr]
        return
    # (Its size as laid out last, without asking the compositor: ``size`` computes the whole
    # screen's map for a widget in a hidden pane.)
    width = widget.outer_size.width - widget.styles.gutter.width
    old_height = _height(widget, width)
    widget.update(content, layout=False)
    if width <= 0 or _height(widget, width) != old_height:
        widget.refresh(layout=True)


def _height(widget: Static, width: int) -> int:
    """The lines ``widget``'s content takes at ``width``, as Textual lays it out."""
    if width <= 0:
        return 0
    return widget.visual.get_height(widget.styles, width)  # type: ignore[arg-type]  # (as Textual's own)


def set_border_title(widget: Widget, title: str) -> None:
    """``widget``'s border title, redrawn only when it changes (Textual redraws the widget
    on every assignment)."""
    if widget.border_title != title:
        widget.border_title = title


def status_text(dashboard: Dashboard, pending: TrainingSettings, at: float | None = None) -> Text:
    """The status bar's text: run id, elapsed time (at ``at``, None: now) and outcome first, then the
    settings in use as the core's facts say (with pending changes as ``old→new``), or the
    program."""
    applied = dashboard.settings
    text = Text()
    text.append(f" run {dashboard.run_id or '-'} ", style="bold")
    text.append(f"│ {duration(dashboard.elapsed(at))} ")
    if dashboard.finished is not None:
        text.append(f"│ {dashboard.finished.outcome.value} ", style="bold")
    if dashboard.refused:  # the toast goes; an empty table must still say why
        text.append(f"│ not started: {inert(dashboard.refused)} (S tries again) ", style="bold red")
    facts = dashboard.facts
    # Only the settings the run's program honours (the core's facts): a user's command
    # that uses none of them is shown as itself, never as "async │ partitions 1".
    toggles = [t for t in TOGGLES if facts is None or t.setting in facts.honoured]
    changed = sum(_shown(applied, t) != _shown(pending, t) for t in toggles)
    if changed:  # before the values: what matters is that R has something to apply
        text.append(f"│ {changed} pending, R applies ", style="bold yellow")
    if facts is not None and not facts.honoured:
        text.append(f"│ {facts.description} ")
    for toggle in toggles:
        label, now, later = toggle.label, _shown(applied, toggle), _shown(pending, toggle)
        text.append("│ ")
        text.append(f"{label}{now}")
        if later != now:
            text.append(f"→{later}", style="bold yellow")
        text.append(" ")
    return text


#: Footer keys that make room where the focused pane shows its own (the Runs list's space,
#: c, g): 80 columns do not hold both, and "? Help q Quit" at the end were cut off. They
#: still act there, and the help lists them.
_MAKE_ROOM = frozenset(c.action for c in CONTROLS
                       if c.action is not None and c.section in (Section.TASKS, Section.SETTINGS))
_PANE_ACTIONS = frozenset(c.action for c in CONTROLS if c.action is not None and c.pane is not None)


class QuietFooter(Footer):
    """Textual's footer, rebuilt only when the keys it shows change. The stock one rebuilds
    every key widget on each focus change; under a log flood that stalled pane switches that
    move the focus (into and out of the Runs list) by 100-300 ms (``python -m bench.controller.flood``).
    A pane's own keys take the place of the task keys (:data:`_MAKE_ROOM`)."""

    _shown: tuple[tuple[str, str, str, bool, str], ...] | None = None

    def compose(self) -> ComposeResult:
        # (A key widget by its action, not its class: Textual's FooterKey is not public; a
        # footer built otherwise is left whole.)
        keys = list(super().compose())
        if any(getattr(key, "action", None) in _PANE_ACTIONS for key in keys):
            keys = [key for key in keys if getattr(key, "action", None) not in _MAKE_ROOM]
            self.styles.grid_size_columns = len(keys)
        yield from keys

    def bindings_changed(self, screen: Screen[object]) -> None:
        shown = tuple((binding.key, binding.description, binding.action, enabled, tooltip)
                      for _, binding, enabled, tooltip in screen.active_bindings.values()
                      if binding.show)
        if shown == self._shown and self._bindings_ready:
            return
        self._shown = shown
        super().bindings_changed(screen)


class HintBar(Static):
    """Under the task table, one line per task with a known-failure hint: what probably went
    wrong and what to do. Hidden while there is none."""

    _shown: list[tuple[str, str]] | None = None

    def show(self, dashboard: Dashboard) -> None:
        hints = dashboard.hints
        if hints == self._shown:
            return
        self._shown = hints
        self.display = bool(hints)
        text = Text()
        for number, (name, hint) in enumerate(hints):
            if number:
                text.append("\n")
            text.append(f"⚠ {name}: ", style="bold yellow")
            text.append(hint)
        self.update(text)


class PlacementView(VerticalScroll):
    """Bytes per ps as bars with the max/mean ratio, and the shard table; a pending
    preview is shown above the current placement."""

    def compose(self):  # type: ignore[no-untyped-def]
        yield Static(id="placement-preview")
        yield Static(id="placement-bars")
        yield Static(id="placement-traffic")
        yield DataTable(id="placement-shards", cursor_type="row", zebra_stripes=True)

    def on_mount(self) -> None:
        table = self.query_one("#placement-shards", DataTable)
        for column in ("variable", "shard", "shape", "bytes", "ps"):
            table.add_column(column, key=column)

    def show(self, current: protocol.Placement | None, preview: protocol.Placement | None,
             preview_note: str) -> None:
        bars = self.query_one("#placement-bars", Static)
        bars.update(bar_chart("current placement", current) if current else
                    Text("no placement yet: the chief reports it once its graph is built", "dim"))
        preview_widget = self.query_one("#placement-preview", Static)
        if preview is not None:
            chart = bar_chart("preview (pending, not applied until R)", preview)
            preview_widget.update(chart)
        else:
            preview_widget.update(Text(preview_note, style="yellow") if preview_note else "")
        shown = preview or current
        table = self.query_one("#placement-shards", DataTable)
        table.clear()
        if shown is not None:
            for v in shown.variables:
                shape = "x".join(str(d) for d in v.shape) or "scalar"
                table.add_row(v.variable, f"{v.shard + 1}/{v.num_shards}", shape,
                              format_bytes(v.bytes), f"ps{v.ps}")


def bar_chart(title: str, placement: protocol.Placement, width: int = 32) -> Text:
    """One bar per ps; the ratio max/mean is coloured by how bad it is. (As wide as the
    measured traffic's bars below it, :func:`tui.app.runs.traffic_chart`.)"""
    text = Text()
    ratio = placement.max_mean_ratio
    style = "green" if ratio <= 1.10 else "yellow" if ratio <= 1.5 else "bold red"
    text.append(f"{title}: {placement.strategy}, partitions {placement.partitions}, "
                f"{placement.num_ps} ps, max/mean ")
    text.append(f"{ratio:.2f}\n", style=style)
    peak = max(placement.ps_bytes, default=0) or 1
    for i, total in enumerate(placement.ps_bytes):
        filled = round(width * total / peak)
        text.append(f"ps{i:<3}")
        text.append("█" * filled, style=style if total == peak and ratio > 1.10 else "cyan")
        text.append(" " * (width - filled))
        text.append(f" {format_bytes(total)}\n")
    return text


class ThroughputView(VerticalScroll):
    """Progress to the target with ETA, aggregate and per-worker examples/sec, loss trend.
    Scrolled by its keys once ``l`` gave it the focus (the workers' charts run past 80x24)."""

    def compose(self):  # type: ignore[no-untyped-def]
        yield Static(id="progress-text")
        yield ProgressBar(total=100, show_eta=False, show_percentage=False, id="progress-bar")
        yield Static("aggregate examples/sec", classes="chart-title", id="rate-title")
        yield Sparkline([], id="rate-chart")
        yield Static("loss", classes="chart-title", id="loss-title")
        yield Sparkline([], id="loss-chart")
        yield Static("step anatomy", classes="chart-title", id="anatomy-title")
        yield Static(id="anatomy-text")
        yield WorkerCharts(id="worker-charts")

    def show(self, dashboard: Dashboard, *, workers: bool = True) -> None:
        """Redraw from ``dashboard``; the per-worker charts too unless ``workers`` is False
        (they change a point a second, and there may be hundreds)."""
        shown = dashboard.figures
        put(self.query_one("#progress-text", Static), progress_text(shown))
        bar = self.query_one("#progress-bar", ProgressBar)
        bar.display = shown.target is not None  # no target: no bar that reads as done
        if shown.target is not None:
            bar.update(total=shown.target, progress=min(shown.step, shown.target))
        examples = shown.unit is RateUnit.EXAMPLES
        rates = list(dashboard.rate_history) if examples else list(dashboard.step_rate_history)
        self.query_one("#rate-chart", Sparkline).data = drawable(rates)
        put(self.query_one("#rate-title", Static),
            scaled("aggregate examples/sec" if examples else "global steps/sec", rates,
                   "{:,.0f}" if examples else "{:,.1f}", "a second"))
        losses = list(dashboard.loss_history)
        chart = self.query_one("#loss-chart", Sparkline)
        chart.data = drawable(losses)
        chart.display = bool(losses)  # none: no flat line that reads as a loss at its lowest
        put(self.query_one("#loss-title", Static),
            scaled("training loss", losses, "{:.4g}", "a step report") if losses
            else "training loss: none reported yet")
        lines = dashboard.anatomy.lines()
        if (typical := dashboard.anatomy.typical()) is not None:
            lines.insert(0, f"a typical step: {typical_text(typical)}")  # as headless's summary ends
        # No sample yet, or a program that samples none (only the built-in trainer does): no
        # heading that promises one.
        title = self.query_one("#anatomy-title", Static)
        title.display = bool(lines)
        coordinators = [e.coordinator for e in dashboard.anatomy.latest.values()]
        if coordinators and all(coordinators):  # (no worker's step stats: none to promise)
            put(title, "step anatomy (a TF2 coordinator's functions as it sees them)")
        elif any(coordinators):
            put(title, "step anatomy (sampled steps from TensorFlow's step stats; a TF2 coordinator's "
                       "functions as it sees them)")
        else:
            put(title, "step anatomy (a sampled step of each worker, from TensorFlow's step stats)")
        put(self.query_one("#anatomy-text", Static), "\n".join(lines))
        if workers:
            self._show_workers(dashboard, examples)

    def _show_workers(self, dashboard: Dashboard, examples: bool) -> None:
        # Without examples (no batch size) a worker has no examples/sec: no chart of zeros.
        self.query_one(WorkerCharts).show([
            (scaled(f"{task} examples/sec", history, "{:,.0f}", "a second"), drawable(list(history)))
            for task, history in dashboard.worker_history.items()] if examples else [])


class WorkerCharts(Widget):
    """Each worker's examples/sec: a title line and a sparkline under it, as the aggregate's
    (a :class:`Static` and a :class:`Sparkline` of two lines), but one widget drawn a line at
    a time: a widget per chart made hundreds of them with 240 workers, and showing the pane
    laid every one out (hundreds of ms on the UI thread). Only the lines on screen
    are rendered, each chart once until its points change."""

    COMPONENT_CLASSES: ClassVar[set[str]] = {
        "sparkline--max-color", "sparkline--min-color", "worker-charts--title"}
    # The colours of Textual's Sparkline, and the chart titles' (.chart-title in app.tcss).
    DEFAULT_CSS = """
    WorkerCharts { height: auto; width: 1fr; }
    WorkerCharts > .sparkline--max-color { color: $primary; }
    WorkerCharts > .sparkline--min-color { color: $primary 30%; }
    WorkerCharts > .worker-charts--title { color: $text-muted; }
    """
    #: A sparkline's height (``Sparkline { height: 2 }`` in app.tcss), under its title line.
    CHART_LINES = 2

    def __init__(self, *, id: str) -> None:
        super().__init__(id=id)
        self._charts: list[tuple[str, list[float]]] = []
        #: Each chart's lines as drawn, by its index, for the width they were drawn at.
        self._drawn: dict[int, list[Strip]] = {}
        self._drawn_width = 0

    def show(self, charts: list[tuple[str, list[float]]]) -> None:
        """Show these (title, points): a chart redrawn only if it changed; laid out again
        only if their number did."""
        if charts == self._charts:
            return
        for index, chart in enumerate(charts):
            if index >= len(self._charts) or self._charts[index] != chart:
                self._drawn.pop(index, None)
        for index in range(len(charts), len(self._charts)):
            self._drawn.pop(index, None)
        resized = len(charts) != len(self._charts)
        self._charts = charts
        self.refresh(layout=resized)

    def get_content_height(self, container: Size, viewport: Size, width: int) -> int:
        return len(self._charts) * (1 + self.CHART_LINES)

    def notify_style_update(self) -> None:
        super().notify_style_update()
        self._drawn.clear()  # (a new theme: new colours)

    def render_line(self, y: int) -> Strip:
        width = self.size.width
        if width != self._drawn_width:
            self._drawn.clear()
            self._drawn_width = width
        index, line = divmod(y, 1 + self.CHART_LINES)
        if index >= len(self._charts):
            return Strip.blank(width, self.rich_style)
        if index not in self._drawn:
            self._drawn[index] = self._draw(*self._charts[index], width)
        return self._drawn[index][line]

    def _draw(self, title: str, points: list[float], width: int) -> list[Strip]:
        """A chart's lines: its title, then its sparkline (as Textual's widgets draw them)."""
        console = self.app.console
        options = console.options.update_dimensions(width, 1)
        base = self.rich_style
        title_style = self.get_component_rich_style("worker-charts--title")
        # (As a Static draws it: the text in its style, the rest of the line background.)
        title = set_cell_size(title, min(width, cell_len(title)))
        lines = [Strip([Segment(title, title_style),
                        Segment(" " * (width - cell_len(title)), Style(bgcolor=base.bgcolor))], width)]
        _, background = self.background_colors
        chart = SparklineRenderable(
            points, width=width, height=self.CHART_LINES,
            min_color=(background + self.get_component_styles("sparkline--min-color").color).rich_color,
            max_color=(background + self.get_component_styles("sparkline--max-color").color).rich_color,
            summary_function=max)
        rendered = console.render_lines(chart, options.update_height(self.CHART_LINES), style=base)
        lines += [Strip(segments).adjust_cell_length(width, base).simplify() for segments in rendered]
        return lines


def progress_text(shown: Figures) -> Text:
    """The Throughput pane's headline from the core's figures: the step (with its target
    and ETA only when there is one), the rate in its unit, training loss and accuracy, and
    held-out accuracy apart."""
    text = Text()
    if shown.target is not None:
        text.append(f"global step {shown.step:,} / {shown.target:,}", style="bold")
        text.append(f"  {shown.percent}%")
        text.append(f"  ETA {duration(shown.eta_seconds)}" if shown.eta_seconds is not None else "  ETA -")
    else:
        text.append(f"global step {shown.step:,}", style="bold")
    text.append(f"  │ {shown.rate_text or '- ' + shown.unit.value}")
    if shown.loss is not None:
        text.append(f"  │ loss {shown.loss:.4f}")
    if shown.train_accuracy is not None:
        text.append(f"  │ training accuracy {shown.train_accuracy:.3f}")
    if shown.accuracy is not None:
        text.append(f"  │ held-out accuracy {shown.accuracy:.3f}")
    if shown.eval_loss is not None:
        text.append(f"  │ held-out loss {shown.eval_loss:.4f}")
    return text


def drawable(values: list[float]) -> list[float]:
    """A sparkline's data: none for a line of zeros (Textual draws a flat line at its top,
    full blocks that read as a peak)."""
    return values if any(values) else []


def scaled(title: str, values: Iterable[float], number: str, every: str) -> str:
    """A sparkline's title with its scale: a sparkline has no axis, so its lowest and
    highest values, how many points it shows and how often one comes (``every``: "a second")
    are said in words, in few enough that six-figure rates fit 80 columns (the pane's 78)."""
    points = list(values)
    if not points:
        return title
    low, high = number.format(min(points)), number.format(max(points))
    return f"{title}  (min {low}, max {high}, {len(points)} points, one {every})"
