"""The Hosts pane (tui/app/hostsview.py): one row per host of the core's model, sorted by the
column ``o`` cycles, and ``h`` showing only the selected host's tasks in the task table until
Esc; 40 hosts at once."""

from __future__ import annotations

from textual.widgets import DataTable, Static, TabbedContent

from tests.app.scripted import T0, feed, running_history, scripted
from tui.app.hostsview import HostsView
from tui.app.tasktable import TaskTable
from tui.core.events import HostRow, HostsProgress
from tui.core.host_state import HostState
from tui.core.options import RunOptions
from tui.core.traffic import PsTraffic, TrafficSample, TrafficUpdate
from tui.core.usage import Usage, UsageSample
from tui.launch.host_steps import HostPool

HOSTS = 40


def many_hosts() -> HostsProgress:
    """40 ready hosts; h00 holds the ps, h01 the workers, h07 went out of reach."""
    rows = []
    for i in range(HOSTS):
        tasks = ("ps0", "ps1") if i == 0 else ("worker0", "worker1") if i == 1 else ()
        state = HostState.UNREACHABLE if i == 7 else HostState.READY
        rows.append(HostRow(f"h{i:02}", f"10.0.0.{i + 1}", state, "no answer for 6 s" if i == 7 else "",
                            tasks, HostPool.WARM, T0 + 38 if i != 7 else T0 + 30))
    return HostsProgress(hosts=tuple(rows), t=T0 + 39)


def cell(view: HostsView, row: int, column: str) -> str:
    table = view.query_one(DataTable)
    key = table.coordinate_to_cell_key((row, 0)).row_key
    return str(table.get_cell(key, column))


async def test_the_hosts_pane_sorts_and_filters_the_task_table_by_host(options: RunOptions) -> None:
    usage = UsageSample(t=0.0, hosts={"h01": Usage(180.0, 900 << 20)}, heard={"h01": T0 + 39})
    traffic = TrafficUpdate(sample=TrafficSample(t=T0 + 39, global_step=1, ps=(
        PsTraffic("ps0", 2 << 20, 1 << 20, 0, 0), PsTraffic("ps1", 2 << 20, 1 << 20, 0, 0))),
        expected_per_sec=())
    app, _ = scripted(options, [*running_history(options.config.training), many_hosts(), usage, traffic])
    async with app.run_test(size=(120, 40)) as pilot:
        app.refresh_dashboard(force=True)
        app.query_one(TabbedContent).active = "hosts"
        await pilot.pause()
        view = app.query_one(HostsView)
        table = view.query_one(DataTable)
        assert table.row_count == HOSTS and table.has_focus
        assert [cell(view, 0, c) for c in ("host", "state", "tasks", "in/s", "out/s", "heard", "pool")] == [
            "h00", "ready", "2", "2.0M", "4.0M", "2s", "warm"]  # the ps host's traffic: its two ps'
        assert [cell(view, 1, c) for c in ("cpu%", "mem", "in/s", "heard")] == ["180", "900M", "-", "1s"]
        assert cell(view, 2, "cpu%") == "-"  # no figure known: none shown
        note = str(view.query_one("#hosts-note", Static).render())
        assert "40 hosts: 39 ready, 1 unreachable" in note and "sorted by host" in note

        await pilot.press("o")  # by state: the host that needs a look first
        assert cell(view, 0, "host") == "h07" and cell(view, 0, "state") == "unreachable"
        await pilot.press("o", "o")  # tasks, then CPU: the busiest host first
        assert view.sort.value == "cpu" and cell(view, 0, "host") == "h01"

        assert view.chosen == "h00"  # the cursor follows its host through a new order
        table.move_cursor(row=0)
        await pilot.press("h")  # only h01's tasks in the task table
        await pilot.pause()
        tasks = app.query_one(TaskTable)
        assert [r.value for r in tasks.rows] == ["worker0", "worker1"]
        assert "only host h01's tasks (esc: all)" in str(tasks.border_subtitle)

        tasks.focus()
        await pilot.press("escape")
        await pilot.pause()
        assert [r.value for r in tasks.rows] == ["ps0", "ps1", "worker0", "worker1"]
        assert "only" not in str(tasks.border_subtitle)


async def test_a_new_picture_moves_a_host_in_place(options: RunOptions) -> None:
    """The rows follow the core's picture: a host back in reach is ready again, in its row."""
    app, core = scripted(options, [*running_history(options.config.training), many_hosts()])
    async with app.run_test(size=(80, 24)) as pilot:
        app.refresh_dashboard(force=True)
        app.query_one(TabbedContent).active = "hosts"
        await pilot.pause()
        view = app.query_one(HostsView)
        assert cell(view, 7, "state") == "unreachable"
        rows = list(many_hosts().hosts)
        rows[7] = HostRow("h07", "10.0.0.8", HostState.READY, "answers again after 9 s", (), HostPool.WARM,
                          T0 + 39)
        await feed(app, core, pilot, [HostsProgress(hosts=tuple(rows))])
        assert cell(view, 7, "state") == "ready" and cell(view, 7, "detail") == "answers again after 9 s"


def test_a_detail_is_cut_between_words() -> None:
    from tui.app.hostsview import words_within

    assert words_within("answers again after 9 s", 23) == "answers again after 9 s"
    assert words_within("answers again after 9 s", 22) == "answers again after 9…"
    assert words_within("answers again after 9 s", 20) == "answers again after…"
    assert words_within("no answer: for 6 s", 12) == "no answer…"  # (no dangling colon)
    assert words_within("authentication-refused-by-host", 10) == "authentic…"  # one long word
