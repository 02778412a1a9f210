"""The Hosts pane at 64 hosts in the smallest terminals it is made for and a common one (80x24,
120x40): every column's words whole (the detail cut only between words, with an ellipsis),
the host under the cursor in full under the table, and more host rows than the task table
left it before (the table gives the pane its rows while it is shown). The app's own model,
fed the core's real events: a run of 64 hosts x 4 tasks, their picture and their usage."""

from __future__ import annotations

from pathlib import Path

import pytest
from textual.widgets import DataTable, TabbedContent

from tests.app.scripted import T0, scripted
from tui.app.app import TfdistApp
from tui.app.hostsview import HostsView
from tui.app.tasktable import TaskTable
from tui.config.cluster import Job
from tui.core.events import ControllerEvent, HostRow, HostsProgress, RunStarted, TaskStateChanged
from tui.core.host_state import HostState
from tui.core.options import RunOptions
from tui.core.task_state import TaskState
from tui.core.usage import Usage, UsageSample
from tui.launch.host_steps import HostPool
from tui.plan.tasks import TaskInfo

HOSTS, PER_HOST = 64, 4
BACK = "answers again after 9 s (its lease held)"
GONE = "no answer for 26 s since its last beat, past the lease of 20 s"


def name(host: int, slot: int) -> str:
    task = host * PER_HOST + slot
    return f"ps{task}" if task < 16 else f"worker{task - 16}"


def history(options: RunOptions) -> list[ControllerEvent | UsageSample]:
    """A run on 64 hosts of 4 tasks each, every task running; h5 came back, h9 is out of
    reach; the usage of every host."""
    infos = tuple(TaskInfo(name(h, s), Job.PS if name(h, s).startswith("ps") else Job.WORKER,
                           h * PER_HOST + s, f"h{h}", 40000 + s)
                  for h in range(HOSTS) for s in range(PER_HOST))
    events: list[ControllerEvent | UsageSample] = [
        RunStarted(run_id="20270115-093000-abc123", run_dir=Path("runs/x"), tasks=infos,
                   settings=options.config.training, t=T0)]
    for info in infos:
        events.append(TaskStateChanged(task=info.name, old=TaskState.PENDING, new=TaskState.STARTING,
                                       t=T0 + 1))
        events.append(TaskStateChanged(task=info.name, old=TaskState.STARTING, new=TaskState.RUNNING,
                                       pid=1000 + info.index, t=T0 + 2))
    rows = tuple(HostRow(f"h{h}", f"10.207.3.{h + 2}", HostState.UNREACHABLE if h == 9 else HostState.READY,
                         BACK if h == 5 else GONE if h == 9 else "",
                         tuple(name(h, s) for s in range(PER_HOST)), HostPool.COLD, T0 + 38)
                 for h in range(HOSTS))
    events.append(HostsProgress(hosts=rows, t=T0 + 39))
    events.append(UsageSample(t=T0 + 39,
                              hosts={f"h{h}": Usage(12.0 + h, (50 + h % 5) << 20) for h in range(HOSTS)},
                              heard={f"h{h}": T0 + 39 for h in range(HOSTS) if h != 9}))
    return events


def screen_text(app: TfdistApp) -> list[str]:
    return [strip.text for strip in app.screen._compositor.render_strips()]


@pytest.mark.parametrize(("size", "least_rows"), [((80, 24), 8), ((120, 40), 24)])
async def test_the_hosts_pane_fits_64_hosts(options: RunOptions, size: tuple[int, int],
                                            least_rows: int) -> None:
    app, _ = scripted(options, history(options))  # type: ignore[arg-type]
    async with app.run_test(size=size) as pilot:
        app.refresh_dashboard(force=True)
        app.query_one(TabbedContent).active = "hosts"
        await pilot.pause()
        await pilot.pause()
        view = app.query_one(HostsView)
        table = view.query_one(DataTable)
        assert table.row_count == HOSTS
        shown = screen_text(app)
        rows = [line for line in shown
                if line.lstrip().startswith("h") and (" ready " in line or " unreachable " in line)]
        assert len(rows) >= least_rows, "\n".join(shown)
        # Sorted by name as a person counts: h2 before h10.
        hosts = [line.split()[0] for line in rows]
        assert hosts[:3] == ["h0", "h1", "h2"], hosts
        # Whatever of the detail a row shows ends with a whole word (or the ellipsis); at 80
        # columns it is past the screen's edge, whole.
        details = {str(table.get_cell(f"h{h}", "detail")) for h in (5, 9)}
        assert (details == {BACK, GONE}) == (size[0] == 80)
        for text in details - {BACK, GONE}:
            kept = text.removesuffix("…")
            assert kept != text and any(f"{full} ".startswith(f"{kept} ") for full in (BACK, GONE)), text
        for line in shown:  # (as the screen shows them)
            for full in (BACK, GONE):
                seen = line[line.find(full[:12]):].rstrip() if full[:12] in line else full
                assert seen == full or (seen.endswith("…") and f"{full} ".startswith(f"{seen[:-1]} ")), line
        # The host under the cursor, in full under the table.
        table.move_cursor(row=[h.name for h in view.lines].index("h9"))
        await pilot.pause()
        text = " ".join(line.strip() for line in screen_text(app))
        assert f"h9 (10.207.3.11): unreachable: {GONE}" in text
        # Back to a log: the task table has its rows again.
        before = app.query_one(TaskTable).size.height
        app.query_one(TabbedContent).active = "logs"
        await pilot.pause()
        await pilot.pause()
        assert app.query_one(TaskTable).size.height > before
