"""What a new operator sees at 80x24 and 100x32 (the smallest terminals the app is made
for): every key of the help can be reached, and the charts' titles are whole."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from textual.pilot import Pilot
from textual.widgets import TabbedContent

from tests.app.scripted import T0, ScriptedCore, placement, running_history
from tests.support import with_progress
from tests.support.runfixtures import write_run
from trainer import protocol
from tui.app.app import TfdistApp
from tui.app.runs import RunsView
from tui.config.cluster import Job
from tui.core.commands import StartTask
from tui.core.events import (
    ControllerEvent,
    RunFinished,
    RunOutcome,
    RunStarted,
    RunSummary,
    TaskStateChanged,
    TrainerEvent,
)
from tui.core.options import RunOptions
from tui.core.task_state import TaskState
from tui.core.traffic import PsTraffic, TrafficSample, TrafficUpdate
from tui.headless import Printer
from tui.plan.tasks import TaskInfo


def screen_text(app: TfdistApp) -> list[str]:
    """The screen as a terminal shows it, a line per row (as ``tmux capture-pane`` reads it)."""
    return [strip.text for strip in app.screen._compositor.render_strips()]


@pytest.mark.parametrize("size", [(80, 24), (100, 32)])
async def test_every_line_of_the_help_can_be_scrolled_into_sight_by_keys(options: RunOptions, size) -> None:
    # At 80x24 the help is 11 lines taller than the screen; its last lines (q, Esc, where the
    # full logs are) were out of sight with no key to reach them (the box had no focus).
    core = ScriptedCore(running_history(options.config.training))
    app = TfdistApp(options, core_factory=lambda app: core, autostart=False, clock=lambda: T0 + 40)
    async with app.run_test(size=size) as pilot:
        await pilot.pause()
        await pilot.press("question_mark")
        await pilot.pause()
        last = "Full logs, events and the summary of every run are in its run directory."
        quit_line = "q  quit (stops every task"
        assert "pgup/pgdn: scroll" in "\n".join(screen_text(app))  # the title says how
        for _ in range(20):  # pgdn until the end shows (at most a screen at a time)
            if any(last in line for line in screen_text(app)):
                break
            await pilot.press("pagedown")
            await pilot.pause()
        shown = "\n".join(screen_text(app))
        assert last in shown and quit_line in shown, shown
        await pilot.press("escape")  # and it still closes
        await pilot.pause()
        assert last not in "\n".join(screen_text(app))


async def open_pane(pilot: Pilot, tabs: int) -> None:
    """Tab ``tabs`` times to a pane, drawn as the refresh timer would before and after (the
    picture must not depend on when it fires)."""
    app = pilot.app
    assert isinstance(app, TfdistApp)
    await pilot.pause()
    app.refresh_dashboard(force=True)
    await pilot.press(*["tab"] * tabs)
    app.refresh_dashboard(force=True)
    await pilot.pause()


def long_run(options: RunOptions) -> list[ControllerEvent]:
    """Two workers 130 s into a fast run: six-figure rates, four-digit losses, full charts."""
    tasks = (TaskInfo("ps0", Job.PS, 0, "localhost", 41000),
             TaskInfo("worker0", Job.WORKER, 0, "localhost", 42000),
             TaskInfo("worker1", Job.WORKER, 1, "localhost", 42001))
    events: list[ControllerEvent] = [RunStarted(run_id="long", run_dir=Path("runs/long"), tasks=tasks,
                                                settings=options.config.training, t=T0)]
    events += [TaskStateChanged(task=t.name, old=TaskState.PENDING, new=TaskState.RUNNING, pid=100 + n,
                                t=T0 + 1) for n, t in enumerate(tasks)]
    for second in range(1, 131):
        t = T0 + 2 + second
        events += [TrainerEvent(task=f"worker{i}", t=t, event=protocol.Step(
            role="worker", index=i, t=t, global_step=2 * 1000 * second + i, local_step=1000 * second,
            loss=0.04226 + 2.4 / second, examples_per_sec=123_456.0 + 987 * (second % 7) + 10 * i,
            step_time=0.001, target=2 * 1000 * 200)) for i in range(2)]
    return with_progress(events)


async def test_the_chart_titles_are_whole_at_80_columns(options: RunOptions) -> None:
    app = TfdistApp(options, core_factory=lambda app: ScriptedCore(long_run(options)), autostart=False,
                    clock=lambda: T0 + 140)
    async with app.run_test(size=(80, 24)) as pilot:
        await open_pane(pilot, tabs=3)
        shown = screen_text(app)
        titles = [str(app.query_one(f"#{name}-title").render()) for name in ("rate", "loss")]
        assert "min 246,922" in titles[0] and "min 0.06072" in titles[1]  # (the figures are in)
        for title in titles:
            assert any(title in line for line in shown), (title, shown)
        # A worker's chart (drawn a line at a time) has its whole title too.
        worker = next(line for line in shown if "worker0 examples/sec" in line)
        assert worker.rstrip().endswith(")"), worker


async def test_the_traffic_bars_line_up_with_the_placement_bars(options: RunOptions) -> None:
    # The measured traffic (and, after the run, its summary) sat at the pane's left edge, a
    # column left of the placement's bars and the shard table above and below it, its bars a
    # column right of the placement's, and each ps's line wrapped at 80 columns.
    sample = TrafficSample(t=T0 + 30, global_step=900, ps=tuple(
        PsTraffic(f"ps{i}", 1e6 * (i + 1), 1e6, 10**8, 10**8) for i in range(2)))
    events = [*running_history(options.config.training), TrafficUpdate(sample, (2e6, 3e6))]
    app = TfdistApp(options, core_factory=lambda app: ScriptedCore(events), autostart=False,
                    clock=lambda: T0 + 40)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        await pilot.press("tab", "tab")
        app.refresh_dashboard(force=True)
        await pilot.pause()
        shown = screen_text(app)
        placed = next(line for line in shown if "current placement" in line)
        measured = next(line for line in shown if "measured traffic per ps" in line)
        bars = [line for line in shown if line.lstrip().startswith("ps0 ") and "█" in line]
        assert len(bars) == 2, shown  # the placement's bar for ps0 and its traffic's
        assert measured.index("measured") == placed.index("current"), shown
        assert bars[0].index("ps0") == bars[1].index("ps0"), shown
        assert bars[0].index("█") == bars[1].index("█"), shown
        # Each ps's measured rate and its expectation on one line (it wrapped at 80 columns).
        assert "(expected" in bars[1] and bars[1].rstrip().endswith("MiB/s)"), shown


async def test_the_runs_pane_footer_still_shows_help_and_quit_at_80_columns(options: RunOptions) -> None:
    # The Runs pane's own keys (space, c, g) came first and pushed "? Help q Quit" off an
    # 80-column footer. The task keys make room there; they still work (and are in the help).
    core = ScriptedCore(running_history(options.config.training))
    app = TfdistApp(options, core_factory=lambda app: core, autostart=False, clock=lambda: T0 + 40)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        app.refresh_dashboard(force=True)
        await pilot.press("tab", "tab", "tab", "tab")
        for _ in range(50):  # the footer is recomposed after the focus moved
            await pilot.pause(0.05)
            footer_keys = {k.key: k for k in app.query("FooterKey").results()}
            if "space" in footer_keys:
                break
        shown = {key: k for key, k in footer_keys.items() if k.region.width}  # type: ignore[attr-defined]
        for key in ("space", "c", "g", "question_mark", "q"):
            assert key in shown and shown[key].region.right <= 80, (key, footer_keys)
        assert "s" not in shown
        await pilot.press("s")  # still starts the selected task
        await pilot.pause()
        assert StartTask("ps0") in core.commands, core.commands


async def test_the_runs_list_shows_each_runs_results_at_80_columns(options: RunOptions) -> None:
    # The results came last, after the settings: "accuracy" was cut at 100 columns and the
    # loss out of sight at 80 (the list read "... workers  wal").
    write_run(options.runs_root, "20240101-000001-aaaaaa", "async", (100.0, 300.0), 0.25, 0.9, None,
              options.config.path)
    core = ScriptedCore(running_history(options.config.training))
    app = TfdistApp(options, core_factory=lambda app: core, autostart=False, clock=lambda: T0 + 40)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        await pilot.press("tab", "tab", "tab", "tab")
        view = app.query_one(RunsView)
        for _ in range(100):  # the list is read on a worker thread
            await pilot.pause(0.05)
            if view.listed:
                break
        await pilot.pause()
        shown = screen_text(app)
        header = next(line for line in shown if " run " in line and "outcome" in line)
        row = next(line for line in shown if "20240101-000001-aaaaaa" in line)
        for name in ("outcome", "wall s", "loss", "accuracy"):
            assert f" {name} " in header, header
        assert "succeeded" in row and "12.3" in row and "0.2500" in row and "0.9000" in row, row
        # space selects it, and says so: the mark's column was 0 wide (its "●" never shown).
        assert "●" not in row
        await pilot.press("space")
        await pilot.pause()
        assert view.selected == ["20240101-000001-aaaaaa"]
        row = next(line for line in screen_text(app) if "20240101-000001-aaaaaa" in line)
        assert "●" in row, row


@pytest.mark.parametrize(("step", "target", "said"), [(512, 0, "step 512 in 40 s"),
                                                       (3001, 3000, "step 3001/3000 in 40 s")])
async def test_the_runs_end_says_its_step_as_headless_does(options: RunOptions, step: int, target: int,
                                                           said: str) -> None:
    # A run without a target (0: a user's program that never said one) ended with the toast
    # "step 512/0"; headless says "steps 512". Past its target (async), the true step.
    summary = RunSummary(run_id="20270115-093000-abc123", run_dir=Path("runs/x"),
                         outcome=RunOutcome.SUCCEEDED,
                         reason="", started_at=T0, wall_time=40.0, global_step=step, target=target,
                         final_loss=0.3, final_accuracy=None, tasks=())
    events = [*running_history(options.config.training), RunFinished(summary=summary, t=T0 + 41)]
    app = TfdistApp(options, core_factory=lambda app: ScriptedCore(events), autostart=False,
                    clock=lambda: T0 + 41)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        app.refresh_dashboard(force=True)
        await pilot.pause()
        toasts = [str(n.message) for n in app._notifications]
        assert f"run succeeded: {said}" in toasts, toasts
    out = io.StringIO()
    Printer(out, colour=False).summary(summary)
    headless = next(line for line in out.getvalue().splitlines() if line.startswith("  steps"))
    assert headless.split()[1:] == ([str(step)] if not target else [str(step), "/", str(target)]), headless


async def test_the_rate_keeps_its_unit_when_the_workers_are_done(options: RunOptions) -> None:
    # Once the last worker exited, its examples/sec went with it: the headline read
    # "267.0 steps/s" for a finished run, and the examples/sec chart became a steps/sec one;
    # a run that stopped short kept its last ETA.
    events = long_run(options)
    events += [TaskStateChanged(task=f"worker{i}", old=TaskState.RUNNING, new=TaskState.SUCCEEDED,
                                t=T0 + 135) for i in range(2)]
    app = TfdistApp(options, core_factory=lambda app: ScriptedCore(with_progress(events)), autostart=False,
                    clock=lambda: T0 + 140)
    async with app.run_test(size=(100, 32)) as pilot:
        await open_pane(pilot, tabs=3)
        assert not app.dashboard.progress.workers  # (both gone)
        headline = str(app.query_one("#progress-text").render())
        assert "- ex/s" in headline and "steps/s" not in headline, headline
        assert "ETA -" in headline, headline  # (it read "ETA 0:01:09" with nothing training)
        title = str(app.query_one("#rate-title").render())
        # (The chart of what was trained: its last second, the workers' end, keeps its rate.)
        assert title.startswith("aggregate examples/sec") and "min 0," not in title, title


@pytest.mark.parametrize("pane", ["throughput", "placement"])
async def test_l_goes_into_the_pane_shown_and_its_keys_scroll_it(options: RunOptions, pane: str) -> None:
    # At 80x24 the second worker's chart (and a model's last shards) are below the pane's
    # end; no key reached them (the focus is on the task table; l went to the Logs tab).
    tasks = (TaskInfo("ps0", Job.PS, 0, "localhost", 41000),
             *(TaskInfo(f"worker{i}", Job.WORKER, i, "localhost", 42000 + i) for i in range(4)))
    events: list[ControllerEvent] = [RunStarted(run_id="r", run_dir=Path("runs/r"), tasks=tasks,
                                                settings=options.config.training, t=T0)]
    events += [TaskStateChanged(task=t.name, old=TaskState.PENDING, new=TaskState.RUNNING, pid=100 + n,
                                t=T0 + 1) for n, t in enumerate(tasks)]
    events.append(TrainerEvent(task="worker0", event=placement(num_ps=1), t=T0 + 2))
    for second in range(1, 20):
        events += [TrainerEvent(task=f"worker{i}", t=T0 + 2 + second, event=protocol.Step(
            role="worker", index=i, t=T0 + 2 + second, global_step=8 * second + i, local_step=2 * second,
            loss=1.0 / second, examples_per_sec=1000.0 + i, step_time=0.01, target=2000)) for i in range(4)]
    app = TfdistApp(options, core_factory=lambda app: ScriptedCore(with_progress(events)), autostart=False,
                    clock=lambda: T0 + 30)
    async with app.run_test(size=(80, 24)) as pilot:
        await open_pane(pilot, tabs=3 if pane == "throughput" else 2)
        view = app.query_one(f"#{pane}-view")
        assert view.max_scroll_y > 0  # more than the screen holds
        await pilot.press("l")
        await pilot.pause()
        assert app.focused is view and app.query_one(TabbedContent).active == pane
        await pilot.press("end")
        await pilot.pause()
        assert view.scroll_y == view.max_scroll_y
        last = "worker3 examples/sec" if pane == "throughput" else "fc2/biases"
        assert any(last in line for line in screen_text(app)), screen_text(app)
        await pilot.press("l")  # and back to the table, whose keys act again
        assert app.focused is app.table
