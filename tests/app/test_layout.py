"""Layout at 120x40 and 80x24: nothing the operator needs is cut."""

from __future__ import annotations

import io
from pathlib import Path

from tests.app.scripted import T0, ScriptedCore, running_history
from tests.support import with_progress
from tests.support.runfixtures import write_run
from trainer import protocol
from trainer.settings import Mode, PlacementStrategy
from tui.app.app import TfdistApp
from tui.app.widgets import ThroughputView
from tui.core.inbox import Happening
from tui.core.options import RunOptions
from tui.core.task_state import TaskState
from tui.experiments.compare import compare, render_text
from tui.experiments.finished_runs import read_run


def scripted(options: RunOptions) -> TfdistApp:
    core = ScriptedCore(running_history(options.config.training))
    return TfdistApp(options, core_factory=lambda app: core, autostart=False, clock=lambda: T0 + 40)


def test_the_comparison_is_readable_at_120_columns(tmp_path: Path) -> None:
    runs = [read_run(write_run(tmp_path, f"20240101-00000{n}-aaaaaa", mode, (100.0, 300.0), 0.25, 0.9,
                               (1000.0, 3000.0))) for n, mode in enumerate(("async", "sync", "async"))]
    out = io.StringIO()
    render_text(compare(runs), out, width=120)
    table = out.getvalue().split("loss by step")[0]
    assert "…" not in table  # not one header or cell cut ("outc…", "w…")
    assert "ex/s median (min-max)" in table and "20240101-000002-aaaaaa" in table
    assert max(len(line) for line in table.splitlines()) <= 120


async def test_80x24_footer_status_and_scales(options: RunOptions) -> None:
    app = scripted(options)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        footer = app.query_one("QuietFooter")
        keys = [(b.key, b.description) for b in footer.query("FooterKey").results()]  # type: ignore[attr-defined]
        assert ("q", "Quit") in keys
        right = max(k.region.right for k in footer.query("FooterKey"))
        assert right <= 80
        # Three pending settings: the elapsed time and the note stay on screen.
        app._set_pending(app.pending.replace(mode=Mode.SYNC, partitions=3,
                                             placement=PlacementStrategy.ROUND_ROBIN), preview=False)
        await pilot.pause()
        status = app.query_one("#status")
        shown = status.render_lines(status.region.reset_offset)
        text = "".join(strip.text for strip in shown)
        assert "0:00:40" in text and "3 pending, R applies" in text and "greedy→round_robin" in text
        # A sparkline says its scale.
        await pilot.press("tab", "tab", "tab")
        assert "min 9,865" in str(app.query_one("#rate-title").render())


async def test_o_sorts_the_tasks_by_cpu_and_back(options: RunOptions) -> None:
    from tui.core.usage import Usage, UsageSample

    # A sample reaches the app as the core's monitor publishes it, among the events.
    sample = UsageSample(t=T0, tasks={"ps0": Usage(5.0, 1 << 20), "ps1": Usage(1.0, 9 << 20),
                                      "worker0": Usage(90.0, 2 << 20), "worker1": Usage(150.0, 3 << 20)},
                         hosts={"localhost": Usage(246.0, 15 << 20)})
    core = ScriptedCore([*running_history(options.config.training), sample])
    app = TfdistApp(options, core_factory=lambda app: core, autostart=False, clock=lambda: T0 + 40)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        app.refresh_dashboard(force=True)
        assert [r.value for r in app.table.rows] == ["ps0", "ps1", "worker0", "worker1"]
        assert app.table.border_title == "localhost tasks: cpu 246% mem 15M"
        # Once no task runs, the last sample is no longer true: no totals are shown.
        states = {name: row.state for name, row in app.dashboard.rows.items()}
        for row in app.dashboard.rows.values():
            row.state = TaskState.SUCCEEDED
        app.refresh_dashboard(force=True)
        assert app.table.border_title == ""
        for name, row in app.dashboard.rows.items():
            row.state = states[name]
        app.refresh_dashboard(force=True)
        await pilot.press("o")
        assert [r.value for r in app.table.rows] == ["worker1", "worker0", "ps0", "ps1"]
        assert "sorted by cpu%" in str(app.table.border_subtitle)
        await pilot.press("o")  # memory
        assert next(r.value for r in app.table.rows) == "ps1"
        await pilot.press("o", "o", "o")  # global step, state, then as declared again
        assert [r.value for r in app.table.rows] == ["ps0", "ps1", "worker0", "worker1"]


def test_log_lines_are_coloured_by_role_and_matches_highlighted() -> None:
    from rich.text import Text

    from tui.app.logs import LogHighlighter, LogPane

    pane = LogPane(id="x")
    pane.filter_text = "STEP"
    text = Text("worker1 | step 40 of 100")
    LogHighlighter(pane).highlight(text)
    styles = {(span.start, span.end, str(span.style)) for span in text.spans}
    assert (0, 9, "cyan") in styles and (10, 14, "reverse bold") in styles
    ps = Text("ps0     | listening")
    LogHighlighter(pane).highlight(ps)
    assert str(ps.spans[0].style) == "magenta"


async def test_a_big_cluster_is_grouped_by_role_with_totals_and_folds(options: RunOptions) -> None:
    from tui.config.cluster import Job
    from tui.core.events import RunStarted, TaskStateChanged
    from tui.core.task_state import TaskState
    from tui.plan.tasks import TaskInfo

    tasks = tuple(TaskInfo(f"ps{i}", Job.PS, i, "localhost", 41000 + i) for i in range(4)) + tuple(
        TaskInfo(f"worker{i}", Job.WORKER, i, "localhost", 42000 + i) for i in range(16))
    events = [RunStarted(run_id="big", run_dir=Path("runs/big"), tasks=tasks,
                         settings=options.config.training, t=T0)]
    events += [TaskStateChanged(task=t.name, old=TaskState.PENDING, new=TaskState.RUNNING, pid=100 + n,
                                t=T0 + 1) for n, t in enumerate(tasks)]
    core = ScriptedCore(events)
    app = TfdistApp(options, core_factory=lambda app: core, autostart=False, clock=lambda: T0 + 40)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        app.refresh_dashboard(force=True)
        keys = [r.value for r in app.table.rows]
        assert keys[0] == "group:ps" and keys[5] == "group:worker" and len(keys) == 22
        assert str(app.table.get_cell("group:worker", "address")) == "16 tasks"
        assert str(app.table.get_cell("group:worker", "state")) == "16 running"
        assert app.table.selected is None  # a header is no task: s/x/r say so
        assert "select a task" in str(app.task_log.border_title)  # not a blank pane without a title
        await pilot.press("enter")  # fold the ps
        keys = [r.value for r in app.table.rows]
        assert keys[:2] == ["group:ps", "group:worker"] and len(keys) == 18
        assert str(app.table.get_cell("group:ps", "task")).startswith("▸")
        await pilot.press("down", "down")
        assert app.table.selected == "worker0"


def test_a_line_of_zeros_is_no_peak_and_evaluator0_fits_its_column() -> None:
    from tui.app.tasktable import TaskTable, short_name
    from tui.app.widgets import drawable

    assert drawable([0.0, 0.0, 0.0]) == []  # Textual would draw full blocks
    assert drawable([0.0, 2.0]) == [0.0, 2.0]
    width = dict(TaskTable.COLUMNS)["task"]
    assert short_name("evaluator0") == "eval0" and len(short_name("evaluator12")) <= width
    assert short_name("worker10") == "worker10"


#: The glyphs Textual draws a scrollbar thumb's ends with (and that a sparkline draws with).
EIGHTHS = set("▁▂▃▄▅▆▇█▉▊▋▌▍▎▏")


def screen_text(app: TfdistApp) -> list[str]:
    """The screen as a terminal shows it, a line per row (as ``tmux capture-pane`` reads it)."""
    return [strip.text for strip in app.screen._compositor.render_strips()]


async def test_at_80_columns_no_stray_glyph_sits_beside_the_table_or_the_charts(options: RunOptions) -> None:
    from tui.config.cluster import Job
    from tui.core.events import RunStarted, TaskStateChanged, TrainerEvent
    from tui.plan.tasks import TaskInfo

    tasks = tuple(TaskInfo(f"ps{i}", Job.PS, i, "localhost", 41000 + i) for i in range(2)) + tuple(
        TaskInfo(f"worker{i}", Job.WORKER, i, "localhost", 42000 + i) for i in range(14))
    events: list[Happening] = [RunStarted(run_id="big", run_dir=Path("runs/big"), tasks=tasks,
                                          settings=options.config.training, t=T0)]
    events += [TaskStateChanged(task=t.name, old=TaskState.PENDING, new=TaskState.RUNNING, pid=100 + n,
                                t=T0 + 1) for n, t in enumerate(tasks)]
    for step in range(1, 31):
        events += [TrainerEvent(task=f"worker{i}", t=T0 + 5 + step, event=protocol.Step(
            role="worker", index=i, t=T0 + 5 + step, global_step=40 * step, local_step=20 * step,
            loss=2.3 / (1 + step / 5), examples_per_sec=5000.0 + 40 * step + 10 * i, step_time=0.012,
            target=3000)) for i in range(14)]
    app = TfdistApp(options, core_factory=lambda app: ScriptedCore(with_progress(events)), autostart=False,
                    clock=lambda: T0 + 40)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        app.refresh_dashboard(force=True)
        await pilot.pause()
        table = app.table.region
        assert app.table.max_scroll_y > 0  # 18 rows in fewer: it scrolls (its scrollbar is up)
        rows = screen_text(app)[table.y + 1:table.bottom - 1]  # inside the table's border
        assert "out" in rows[0].split()  # the last column shown at 80 columns is not cut
        # Textual draws a thumb's ends with eighth blocks: beside the table they read as stray
        # glyphs ("▅▅" after the ex/s column, "▌" under the pids). Nothing is drawn in them.
        assert not EIGHTHS & set("".join(rows)), "\n".join(rows)
        await pilot.press("tab", "tab", "tab")
        view = app.query_one(ThroughputView)
        assert view.max_scroll_y > 0  # 14 workers' charts: the pane scrolls
        for y in (1, view.max_scroll_y // 2, view.max_scroll_y):
            view.scroll_to(y=y, animate=False)
            await pilot.pause()
            pane = screen_text(app)[view.region.y:view.region.bottom]
            # A sparkline's blocks stay in its cells; the scrollbar's column holds none.
            bar = "".join(line[view.region.right - view.scrollbar_size_vertical:view.region.right]
                          for line in pane)
            assert bar.strip() == "" and len(bar) == len(pane) * view.scrollbar_size_vertical, "\n".join(pane)


def test_past_three_hosts_the_border_gives_their_tasks_total() -> None:
    """Up to three hosts the table's border names each host's tasks' totals; past that (64
    hosts ran off the border, unreadable) the total over all, each host's in the Hosts pane."""
    from tui.app.tasktable import usage_title
    from tui.core.usage import Usage

    few = {"h1": Usage(20.0, 2 << 20), "h0": Usage(None, 1 << 20)}
    assert usage_title(few) == "h0 tasks: cpu 0% mem 1.0M  h1 tasks: cpu 20% mem 2.0M"
    many = {f"h{i}": Usage(5.0, 50 << 20) for i in range(64)}
    assert usage_title(many) == "tasks on 64 hosts: cpu 320% mem 3.1G (each host: Hosts pane)"
    assert usage_title({}) == ""
