"""The Hosts pane: one row per remote host from the core's model of the hosts
(:mod:`tui.core.host_table`: state, tasks, CPU and memory, ps traffic, last heard, pool),
sorted by a column ``o`` cycles; ``h`` on a host shows only its tasks in the task table (the
filter is on the table's border; Esc clears it). Redrawn only while the pane is shown."""

from __future__ import annotations

import time
from typing import Any

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
from tui.core.host_table import HostLine, HostSort, host_lines, sort_lines
from tui.core.traffic import TrafficUpdate

#: Colours of the states that need a look; the others are plain.
STATE_STYLES = {HostState.READY: "green", HostState.FAILED: "bold red", HostState.LOST: "bold red",
                HostState.UNREACHABLE: "bold yellow", HostState.CONNECTING: "cyan",
                HostState.PREPARING: "cyan"}
#: The pane is redrawn at least this often while shown (the last-heard ages move).
AGES_SECONDS = 1.0


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
    # step, or why a host failed or is out of reach) come after, seen by scrolling right.
    COLUMNS = (("host", 10), ("state", 11), ("tasks", 5), ("cpu%", 5), ("mem", 6), ("in/s", 7),
               ("out/s", 7), ("heard", 5), ("pool", 4), ("address", 21), ("detail", 60))

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

    def compose(self) -> ComposeResult:
        yield Static("no remote hosts", id="hosts-note")
        yield DataTable(id="hosts-table", cursor_type="row", zebra_stripes=True)

    def on_mount(self) -> None:
        table = self.query_one(DataTable)
        for column, width in self.COLUMNS:
            table.add_column(column, key=column, width=width)

    def show(self, lines: list[HostLine], now: float) -> None:
        """Show ``lines`` in the chosen order; rows are rebuilt only when the order changed."""
        self.lines = sort_lines(lines, self.sort)
        table = self.query_one(DataTable)
        keys = [h.name for h in self.lines]
        if [r.value for r in table.rows] != keys:
            chosen = self.chosen
            table.clear()
            for line in self.lines:
                table.add_row(*cells(line, now), key=line.name)
            if chosen in keys:
                table.move_cursor(row=keys.index(chosen))
        else:
            for line in self.lines:
                for (column, _), value in zip(self.COLUMNS, cells(line, now), strict=True):
                    if table.get_cell(line.name, column) != value:
                        table.update_cell(line.name, column, value)
        counts = {state: sum(1 for h in lines if h.state is state) for state in HostState}
        said = ", ".join(f"{n} {state.value}" for state, n in counts.items() if n)
        self.query_one("#hosts-note", Static).update(
            f"{len(lines)} hosts: {said}   sorted by {self.sort.value} (o)   h: only its tasks"
            if lines else "no remote hosts")

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


def cells(line: HostLine, now: float) -> list[Text | str]:
    """One host's cells; a figure not known is ``-``."""
    return [line.name, Text(line.state.value, style=STATE_STYLES.get(line.state, "")), str(len(line.tasks)),
            "-" if line.cpu_percent is None else f"{line.cpu_percent:.0f}",
            "-" if line.rss_bytes is None else short_bytes(line.rss_bytes),
            "-" if line.in_per_sec is None else short_bytes(line.in_per_sec),
            "-" if line.out_per_sec is None else short_bytes(line.out_per_sec),
            age(line.heard, now), line.pool.value if line.pool is not None else "-",
            line.address, line.detail]


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
        if self.query_one(TabbedContent).active != "hosts":
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
