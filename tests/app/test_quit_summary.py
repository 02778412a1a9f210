"""What the terminal keeps once the app is gone is what headless ends with: the run's
summary, its typical step and its traffic (measured, or why not), from one printer."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from tests.app.scripted import T0, TASKS, ScriptedCore, running_history
from tests.support.fakes import make_config
from trainer.settings import TrainingSettings
from tui.app.app import TfdistApp
from tui.app.main import write_last_summary
from tui.config.cluster import HostSpec
from tui.core.anatomy import AnatomyBoard
from tui.core.events import RunFinished, RunOutcome, RunStarted, RunSummary, TrainerEvent
from tui.core.inbox import Happening
from tui.core.options import RunOptions
from tui.core.traffic import PsTraffic, TrafficMonitor, TrafficSample, TrafficUpdate
from tui.headless import Printer


def finished(run_dir: Path) -> RunFinished:
    return RunFinished(summary=RunSummary(
        run_id="20270115-093000-abc123", run_dir=run_dir, outcome=RunOutcome.STOPPED, reason="stopped by you",
        started_at=T0, wall_time=40.0, global_step=1200, target=3000, final_loss=0.33, final_accuracy=None,
        tasks=()), t=T0 + 41)


async def the_runs_traffic(tmp_path: Path, measured: bool) -> tuple[TrafficMonitor, list[TrafficUpdate]]:
    """A traffic monitor through a run's end, as the core's, and what it told its listeners."""
    async def ss(host: HostSpec, argv: object) -> str:
        return ""

    monitor = TrafficMonitor(make_config(tmp_path, num_workers=1), ss, interval=60)
    published: list[TrafficUpdate] = []
    monitor.subscribe(published.append)
    monitor.handle(RunStarted(run_id="r", run_dir=tmp_path, tasks=TASKS,
                              settings=TrainingSettings(steps=3000)))
    for t, step in ((0, 0), (1, 10), (2, 30)) if measured else ((0, 0),):
        monitor.record_sample(TrafficSample(float(t), step, (PsTraffic("ps0", 100.0, 100.0, 100 * t, 100 * t),
                                                            PsTraffic("ps1", 50.0, 50.0, 50 * t, 50 * t))))
    monitor.handle(finished(tmp_path))
    await monitor.close()
    return monitor, published


@pytest.mark.parametrize("measured", [True, False], ids=["measured", "not measured"])
async def test_the_app_leaves_the_summary_headless_prints_traffic_included(
        options: RunOptions, tmp_path: Path, measured: bool) -> None:
    monitor, published = await the_runs_traffic(tmp_path, measured)
    history = running_history(options.config.training)
    board = AnatomyBoard()  # the sampled steps headless folds as they come
    for event in history:
        if isinstance(event, TrainerEvent):
            board.fold(event.task, event.event)
    headless = io.StringIO()
    printer = Printer(headless, colour=False, board=board)
    printer.fit([])
    printer.summary(finished(tmp_path).summary)
    printer.traffic(monitor.final_update)  # as tui.headless ends a run
    assert "  traffic      " in headless.getvalue()
    # The run's typical step, which the app's quit summary had left out.
    assert "  a step       12.00 ms a step; traced 12.00 ms" in headless.getvalue()

    core = ScriptedCore(history)
    app = TfdistApp(options, core_factory=lambda app: core, autostart=False, clock=lambda: T0 + 40)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        app.refresh_dashboard(force=True)
        live: list[Happening] = [u for u in published if not u.final]
        core.pending.extend(live)
        app.refresh_dashboard(force=True)
    # Quit mid-run: the core said how the run ended (and its traffic) after the app's last look;
    # a late idle sample does not replace the run's traffic.
    ending: list[Happening] = [finished(tmp_path), *[u for u in published if u.final], *live[-1:]]
    core.pending.extend(ending)
    shown = io.StringIO()
    write_last_summary(app, shown)
    assert shown.getvalue() == headless.getvalue()
