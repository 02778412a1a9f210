"""The task table: a row per task (and, for a big cluster, a header row per role with the
group's totals, folded and unfolded with enter), in the declared order or sorted (``o``)."""

from __future__ import annotations

from collections.abc import Hashable, Mapping

from rich.style import Style
from rich.text import Text
from textual._types import SegmentLines
from textual.binding import Binding
from textual.cache import LRUCache
from textual.coordinate import Coordinate
from textual.widgets import DataTable

from tui.app.state import Dashboard
from tui.app.widgets import STATE_STYLES, set_border_title
from tui.common.units import short_bytes
from tui.config.cluster import Job
from tui.core.task_state import TaskState
from tui.core.usage import Usage

#: From this many tasks on (the table shows about ten rows), tasks are grouped by role.
GROUP_FROM = 12
#: Rows above and below the visible ones that each refresh brings up to date too.
ROWS_BEYOND = 10
#: A table with fewer rows than this is brought up to date whole.
ALL_ROWS_UNDER = 64
#: Row keys of group headers start with this (never a task name: names are job + index).
GROUP = "group:"
#: Drawn cells kept: several screens' worth of the table's 11 columns.
CELLS_KEPT = 4000


class TaskTable(DataTable[Text | str]):
    """One row per task; the cursor row is the selected task."""

    # End follows the log below (as everywhere else in the app); ctrl+end still goes to the
    # last row.
    BINDINGS = [Binding("end", "app.follow_log", "Follow", show=False),
                Binding("escape", "app.clear_host_filter", "Clear", show=False)]

    # Up to "out" fits 80 columns with the cell padding; the share comes last, seen whole
    # from 106 columns (the widths plus a column of padding each side; at 100 it reads
    # "sha"), or by scrolling right. The reason of a failure is in the log pane.
    # "rst": times started again in this run (the core's count); "gstep": the global step
    # of the worker's latest report (one meaning: never its local step).
    # "cpu%" and "rss": the task's whole process group on its host (tui.core.usage).
    COLUMNS = (("task", 8), ("address", 15), ("state", 12), ("pid", 7), ("rst", 3),
               ("gstep", 7), ("ex/s", 7), ("out", 4), ("cpu%", 5), ("rss", 6), ("share", 10))

    def __init__(self, *, id: str) -> None:
        super().__init__(id=id)
        #: Roles folded to their header row (enter on the header).
        self.collapsed: set[Job] = set()
        #: Cells as drawn, by what they show and where (:meth:`_render_cell`).
        self._drawn_cells: LRUCache[Hashable, SegmentLines] = LRUCache(CELLS_KEPT)
        #: Only these tasks are shown (``h`` on the Hosts pane: a host's), None: every task;
        #: ``only_label`` says whose they are on the border.
        self.only: frozenset[str] | None = None
        self.only_label = ""

    def on_mount(self) -> None:
        self.cursor_type = "row"
        self.zebra_stripes = True
        for column, width in self.COLUMNS:
            self.add_column(column, key=column, width=width)

    #: The orders ``o`` cycles through: (name shown, key of a row; larger first).
    SORTS: tuple[str, ...] = ("declared", "cpu%", "rss", "gstep", "state")
    order = "declared"

    def cycle_sort(self) -> str:
        """The next order (``o``); the table is redrawn in it at the next refresh."""
        self.order = self.SORTS[(self.SORTS.index(self.order) + 1) % len(self.SORTS)]
        self._subtitle()
        return self.order

    def _subtitle(self) -> None:
        said = [] if self.order == "declared" else [f"sorted by {self.order} (o)"]
        if self.only is not None:
            said.append(f"only {self.only_label}'s tasks (esc: all)")
        self.border_subtitle = "  ".join(said)

    def ordered(self, dashboard: Dashboard) -> list[str]:
        """The task names in the chosen order (ties keep the declared order)."""
        names = list(dashboard.rows) if self.only is None else [n for n in dashboard.rows if n in self.only]
        if self.order == "declared":
            return names
        usage = dashboard.usage.tasks if dashboard.usage else {}
        rows = dashboard.rows

        def key(name: str) -> float:
            if self.order == "cpu%":
                return (usage[name].cpu_percent or 0.0) if name in usage else -1.0
            if self.order == "rss":
                return usage[name].rss_bytes if name in usage else -1
            if self.order == "gstep":
                step = rows[name].global_step
                return -1 if step is None else step
            return -list(STATE_STYLES).index(rows[name].state)

        return sorted(names, key=key, reverse=True)

    @property
    def selected(self) -> str | None:
        """The task under the cursor (None on a group's header)."""
        key = self._cursor_key()
        return None if key is None or key.startswith(GROUP) else key

    def show(self, dashboard: Dashboard) -> None:
        now = dashboard.clock()
        self._subtitle()
        keys = self._layout(dashboard)
        if [r.value for r in self.rows] != keys:
            selected = self._cursor_key()
            self.clear()
            for key in keys:
                self.add_row(*self._row(dashboard, key, now), key=key)
            if selected in keys:
                self.move_cursor(row=keys.index(selected))
            return
        # Only the rows on screen (and a few beyond) are brought up to date: 256 tasks are
        # mostly out of sight, and what scrolls into sight is redrawn at the next refresh.
        top = int(self.scroll_y)
        shown = keys if len(keys) < ALL_ROWS_UNDER else \
            keys[max(0, top - ROWS_BEYOND):top + self.size.height + ROWS_BEYOND]
        for key in shown:
            for (column, _), value in zip(self.COLUMNS, self._row(dashboard, key, now), strict=True):
                if self.get_cell(key, column) != value:
                    self.update_cell(key, column, value)

    # -- groups by role ---------------------------------------------------------------------

    def _layout(self, dashboard: Dashboard) -> list[str]:
        """Row keys: the tasks in order, under a header row per role once the cluster is too
        big to see at once (a collapsed role shows its header only)."""
        names = self.ordered(dashboard)
        if len(names) < GROUP_FROM:
            return names
        keys: list[str] = []
        for job in Job:
            members = [n for n in names if dashboard.rows[n].job is job]
            if members:
                keys.append(GROUP + job.value)
                if job not in self.collapsed:
                    keys += members
        return keys

    def toggle_group(self) -> bool:
        """Fold or unfold the group under the cursor (enter on its header); whether the
        cursor was on one."""
        key = self._cursor_key()
        if key is None or not key.startswith(GROUP):
            return False
        job = Job(key[len(GROUP):])
        self.collapsed ^= {job}
        return True

    def _row(self, dashboard: Dashboard, key: str, now: float) -> list[Text | str]:
        if not key.startswith(GROUP):
            return self._cells(dashboard, key, now)
        job = Job(key[len(GROUP):])
        rows = [r for r in dashboard.rows.values() if r.job is job]
        usage = dashboard.usage.tasks if dashboard.usage else {}
        running = sum(r.state is TaskState.RUNNING for r in rows)
        cpu = sum(usage[r.name].cpu_percent or 0.0 for r in rows if r.name in usage)
        rss = sum(usage[r.name].rss_bytes for r in rows if r.name in usage)
        rate = sum(r.examples_per_sec or 0.0 for r in rows if r.state.is_active)
        mark = "▸" if job in self.collapsed else "▾"
        return [Text(f"{mark} {job.value}", style="bold"), Text(f"{len(rows)} tasks", style="bold"),
                Text(f"{running} running", style="bold"), "", str(sum(r.restarts for r in rows)), "",
                f"{rate:,.0f}" if rate else "", "", f"{cpu:.0f}" if usage else "",
                short_bytes(rss) if usage else "", ""]

    def _render_cell(self, row_index: int, column_index: int, base_style: Style, width: int,
                     cursor: bool = False, hover: bool = False) -> SegmentLines:
        """A cell as DataTable draws it, drawn again only when what it shows changed: the
        table's own cache forgets every cell on any update, and a second's ages redrew all of
        them (most of what an idle 256-task run cost the app)."""
        row = self._row_locations.get_key(row_index)
        column = self._column_locations.get_key(column_index)
        if row is None or column is None:  # the header, row labels: as DataTable does
            return super()._render_cell(row_index, column_index, base_style, width, cursor, hover)
        value = self._data[row][column]
        shown = (value.plain, str(value.style), tuple(value.spans)) if isinstance(value, Text) else value
        key = (row_index, column_index, shown, base_style, width, cursor, hover, self._show_hover_cursor,
               self.show_cursor, self.cursor_type, self._pseudo_class_state)
        lines = self._drawn_cells.get(key)
        if lines is None:
            lines = super()._render_cell(row_index, column_index, base_style, width, cursor, hover)
            self._drawn_cells[key] = lines
        return lines

    def notify_style_update(self) -> None:
        super().notify_style_update()
        self._drawn_cells.clear()  # (a new theme: new colours)

    def _cursor_key(self) -> str | None:
        if self.row_count == 0:
            return None
        row_key, _ = self.coordinate_to_cell_key(Coordinate(self.cursor_row, 0))
        return row_key.value

    @staticmethod
    def _cells(dashboard: Dashboard, name: str, now: float) -> list[Text | str]:
        row = dashboard.rows[name]
        state = Text(row.state_text, style=STATE_STYLES[row.state])
        usage = dashboard.usage.tasks.get(name) if dashboard.usage and row.state.is_active else None
        return [
            # "w" after the pid: forked from the host's warm pool.
            short_name(name), row.address, state, f"{row.pid}{'w' if row.warm else ''}" if row.pid else "-",
            str(row.restarts),
            "-" if row.global_step is None else str(row.global_step),
            "-" if row.examples_per_sec is None
            else f"Σ{row.examples_per_sec:,.0f}" if row.coordinates else f"{row.examples_per_sec:,.0f}",
            row.output_age(now),
            "-" if usage is None or usage.cpu_percent is None else f"{usage.cpu_percent:.0f}",
            "-" if usage is None else short_bytes(usage.rss_bytes),
            row.share or "-",
        ]

    def show_totals(self, dashboard: Dashboard) -> None:
        """Each host's total CPU and memory over its running tasks, on the table's border;
        nothing once none runs (the last sample is no longer true). Said as its tasks' (the
        host's own load is not measured: ``localhost: cpu 6%`` read as the machine's at a load
        average of 114)."""
        hosts = dashboard.usage.hosts if dashboard.usage and dashboard.active_tasks else {}
        set_border_title(self, usage_title(hosts))


#: Hosts whose tasks' totals the table's border names one by one; past that it gives all of
#: them together (at 64 hosts the list ran off the border after four, unreadable; each host's
#: figures are in the Hosts pane).
BORDER_HOSTS = 3


def usage_title(hosts: Mapping[str, Usage]) -> str:
    """The task table's border: each host's tasks' total CPU and memory, or with more than
    :data:`BORDER_HOSTS` hosts the total over all of them; empty with none."""
    if len(hosts) <= BORDER_HOSTS:
        return "  ".join(f"{host} tasks: cpu {usage.cpu_percent or 0:.0f}% mem {short_bytes(usage.rss_bytes)}"
                         for host, usage in sorted(hosts.items()))
    cpu = sum(usage.cpu_percent or 0 for usage in hosts.values())
    rss = sum(usage.rss_bytes for usage in hosts.values())
    return f"tasks on {len(hosts)} hosts: cpu {cpu:.0f}% mem {short_bytes(rss)} (each host: Hosts pane)"


def short_name(name: str) -> str:
    """A task's name in the task column's 8 characters: ``evaluator0`` as ``eval0`` (cut,
    it would read ``evaluato``); the others fit."""
    return "eval" + name[len("evaluator"):] if name.startswith("evaluator") else name
