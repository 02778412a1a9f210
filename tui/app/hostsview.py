"""The Hosts pane: one row per remote host from the core's model of the hosts
(:mod:`tui.core.host_table`: state, tasks, CPU and memory, ps traffic, last heard, pool),
sorted by a column ``o`` cycles; ``h`` on a host shows only its tasks in the task table (the
filter is on the table's border; Esc clears it). Redrawn only while the pane is shown. The
columns fit the pane: the detail takes the width the others leave, cut only between words,
and the line under the table gives the host under the cursor in full; while the pane is
shown, the task table above it gives it rows (a few of its own are left for a host's tasks)."""

from __future__ import annotations

import time
from typing import Any

from rich.cells import cell_len
from rich.text import Text
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.message import Message
from textual.widgets import DataTable, Static, TabbedContent

from tui.app.controls import CONTROLS
from tui.app.state import Dashboard
from tui.app.tasktable import TaskTable
from tui.common.units import short_bytes
from tui.core.host_state import HostState
from tui.core.host_table import HostLine, HostSort, host_lines, line_text, sort_lines
from tui.core.traffic import TrafficUpdate

#: Colours of the states that need a look; the others are plain.
STATE_STYLES = {HostState.READY: "green", HostState.FAILED: "bold red", HostState.LOST: "bold red",
                HostState.UNREACHABLE: "bold yellow", HostState.CONNECTING: "cyan",
                HostState.PREPARING: "cyan"}
#: The pane is redrawn at least this often while shown (the last-heard ages move).
AGES_SECONDS = 1.0
#: The detail column is cut to fit the pane only down to this width; in a narrower pane it is
#: whole, seen by scrolling right (and the line under the table has the chosen host's).
MIN_DETAIL = 20
#: What each cell is padded with, left and right (the table's ``cell_padding``).
PADDING = 1
#: The table's vertical scrollbar's width (app.tcss).
SCROLLBAR = 1


def age(heard: float | None, now: float) -> str:
    """How long ago a host was last heard, in whole seconds (``-``: never)."""
    if heard is None:
        return "-"
    seconds = max(0, int(now - heard))
    return f"{seconds}s" if seconds < 120 else f"{seconds // 60}m"


class HostsView(Vertical):
    """The Hosts pane's table and the line above it (the sort, the count, the filter)."""

    BINDINGS = [Binding(c.key, c.action, c.name, show=c.footer) for c in CONTROLS
                if c.action is not None and c.pane == "hosts"]
    # Up to "pool" fits 80 columns with the cell padding; the address and the detail (a
    # step, or why a host failed or is out of reach) come after. The host's and the
    # address's widths are their longest (up to this), the detail's what is left.
    COLUMNS = (("host", 10), ("state", 11), ("tasks", 5), ("cpu%", 5), ("mem", 6), ("in/s", 7),
               ("out/s", 7), ("heard", 5), ("pool", 4), ("address", 21), ("detail", 60))
    FITTED = ("host", "address")

    class HostChosen(Message):
        """``h`` on a host: show only its tasks in the task table."""

        def __init__(self, host: str, tasks: frozenset[str]) -> None:
            super().__init__()
            self.host = host
            self.tasks = tasks

    def __init__(self, *, id: str) -> None:
        super().__init__(id=id)
        self.sort = HostSort.NAME
        self.lines: list[HostLine] = []
        self._now = 0.0
        #: The columns' widths the table has now.
        self.widths: tuple[int, ...] = ()

    def compose(self) -> ComposeResult:
        yield Static("no remote hosts", id="hosts-note")
        yield DataTable(id="hosts-table", cursor_type="row", zebra_stripes=True, cell_padding=PADDING)
        yield Static("", id="hosts-chosen")

    def show(self, lines: list[HostLine], now: float) -> None:
        """Show ``lines`` in the chosen order; rows are rebuilt only when the order or the
        columns' widths changed, else only the cells that changed are written."""
        self.lines = sort_lines(lines, self.sort)
        self._now = now
        table = self.query_one(DataTable)
        keys = [h.name for h in self.lines]
        # (less the vertical scrollbar's column, there once the rows are more than fit)
        widths = self.fit(self.size.width - SCROLLBAR)
        detail = widths[-1]
        if widths != self.widths or [r.value for r in table.rows] != keys:
            chosen = self.chosen
            table.clear(columns=widths != self.widths)
            if widths != self.widths:
                for (column, _), width in zip(self.COLUMNS, widths, strict=True):
                    table.add_column(column, key=column, width=width)
                self.widths = widths
            for line in self.lines:
                table.add_row(*cells(line, now, detail), key=line.name)
            if chosen in keys:
                table.move_cursor(row=keys.index(chosen))
        else:
            for line in self.lines:
                for (column, _), value in zip(self.COLUMNS, cells(line, now, detail), strict=True):
                    if table.get_cell(line.name, column) != value:
                        table.update_cell(line.name, column, value)
        counts = {state: sum(1 for h in lines if h.state is state) for state in HostState}
        said = ", ".join(f"{n} {state.value}" for state, n in counts.items() if n)
        self.query_one("#hosts-note", Static).update(
            f"{len(lines)} hosts: {said}   sorted by {self.sort.value} (o)   h: only its tasks"
            if lines else "no remote hosts")
        self._show_chosen()

    def fit(self, width: int) -> tuple[int, ...]:
        """Each column's width in a pane ``width`` cells wide: the fitted ones their longest
        value's, the detail what the others leave, or where that is under
        :data:`MIN_DETAIL`, its longest (and its usual width at least). Not the detail's
        longest where it fits: a host's next step would change the widths, and every row
        would be written again."""
        longest = {"host": max((cell_len(h.name) for h in self.lines), default=0),
                   "address": max((cell_len(h.address) for h in self.lines), default=0)}
        widths = [min(most, max(len(column), longest[column])) if column in self.FITTED else most
                  for column, most in self.COLUMNS[:-1]]
        left = width - sum(widths) - 2 * PADDING * len(self.COLUMNS)
        if left >= MIN_DETAIL:
            return (*widths, left)
        # Too narrow a pane for a useful detail: whole, seen by scrolling right.
        return (*widths, max([self.COLUMNS[-1][1], *(cell_len(h.detail) for h in self.lines)]))

    def on_resize(self) -> None:
        if self.lines:
            self.show(self.lines, self._now)

    def on_data_table_row_highlighted(self) -> None:
        self._show_chosen()

    def _show_chosen(self) -> None:
        """The host under the cursor in full (its detail may be cut in its column)."""
        name = self.chosen
        line = next((h for h in self.lines if h.name == name), None)
        self.query_one("#hosts-chosen", Static).update(Text(line_text(line)) if line is not None else "")

    @property
    def chosen(self) -> str | None:
        """The host under the cursor."""
        table = self.query_one(DataTable)
        if table.row_count == 0:
            return None
        return str(table.coordinate_to_cell_key(table.cursor_coordinate).row_key.value)

    def action_sort_hosts(self) -> None:
        self.sort = self.sort.next()
        self.show(self.lines, time.time())

    def action_filter_by_host(self) -> None:
        name = self.chosen
        line = next((h for h in self.lines if h.name == name), None)
        if line is not None:
            self.post_message(self.HostChosen(line.name, frozenset(line.tasks)))


def cells(line: HostLine, now: float, detail: int = 60) -> list[Text | str]:
    """One host's cells, the detail cut to ``detail`` cells between words; a figure not
    known is ``-``."""
    return [line.name, Text(line.state.value, style=STATE_STYLES.get(line.state, "")), str(len(line.tasks)),
            "-" if line.cpu_percent is None else f"{line.cpu_percent:.0f}",
            "-" if line.rss_bytes is None else short_bytes(line.rss_bytes),
            "-" if line.in_per_sec is None else short_bytes(line.in_per_sec),
            "-" if line.out_per_sec is None else short_bytes(line.out_per_sec),
            age(line.heard, now), line.pool.value if line.pool is not None else "-",
            line.address, words_within(line.detail, detail)]


def words_within(text: str, width: int) -> str:
    """``text`` if it fits ``width`` cells, else as many of its first words as fit with an
    ellipsis (a word longer than the whole width is cut, with the ellipsis)."""
    if cell_len(text) <= width:
        return text
    cut = text[:width - 1]
    if " " in cut and text[width - 1] != " ":
        cut = cut[:cut.rindex(" ")]
    return cut.rstrip(" ,:;") + "…"


class HostsActions(App[int]):
    """The app's side of the Hosts pane (redrawn while shown) and of the views of the task
    table (its sort, its filter by host) and of the traffic both panes show."""

    dashboard: Dashboard
    traffic: TrafficUpdate | None
    _hosts_drawn: tuple[Any, ...] = ()

    @property
    def table(self) -> TaskTable:
        raise NotImplementedError

    def refresh_dashboard(self, *, force: bool = False) -> bool:
        raise NotImplementedError

    def show_hosts(self, *, force: bool = False) -> None:
        """Redraw the Hosts pane if it is shown and something it shows changed (or a second
        passed: the ages)."""
        shown = self.query_one(TabbedContent).active == "hosts"
        self.table.set_class(shown, "-beside-hosts")  # (it gives the pane its rows)
        if not shown:
            return
        d = self.dashboard
        now = d.clock()
        drawn = (d.hosts, d.usage, self.traffic, int(now / AGES_SECONDS))
        if force or drawn != self._hosts_drawn:
            self._hosts_drawn = drawn
            self.query_one(HostsView).show(host_lines(d.hosts, d.usage, self.traffic), now)

    def _take_traffic(self, update: TrafficUpdate) -> None:
        # Once the run's own traffic came (or why there is none), a late idle sample does not
        # replace it.
        if self.traffic is None or not self.traffic.final or update.final:
            self.traffic = update

    def action_sort_tasks(self) -> None:
        self.notify(f"tasks sorted by {self.table.cycle_sort()}", timeout=2)
        self.refresh_dashboard(force=True)

    def on_hosts_view_host_chosen(self, message: HostsView.HostChosen) -> None:
        self.table.only = message.tasks
        self.table.only_label = f"host {message.host}"
        self.refresh_dashboard(force=True)

    def action_clear_host_filter(self) -> None:
        if self.table.only is not None:
            self.table.only = None
            self.refresh_dashboard(force=True)
