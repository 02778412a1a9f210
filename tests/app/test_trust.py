"""What the screen says must be true: the app driven by Pilot over a scripted core (no
processes: these are about what the app shows and asks; tests/ui/test_pilot.py drives real
clusters). Each test fails on the app before issue 24's fixes."""

from __future__ import annotations

from pathlib import Path

from tests.app.scripted import T0, TASKS, feed, lines, running_history, scripted
from tests.support import with_progress
from trainer import protocol
from trainer.settings import TrainingSettings
from tui.app.messages import AllTasksRequested, TaskAction, TaskActionRequested
from tui.app.screens import ConfirmScreen
from tui.common.exit_codes import ExitCode
from tui.core.commands import Relaunch
from tui.core.events import (
    ControllerEvent,
    RunFinished,
    RunOutcome,
    RunStarted,
    RunSummary,
    TaskHint,
    TaskHintCleared,
    TaskStateChanged,
    TrainerEvent,
)
from tui.core.task_state import TaskState

SIZE = (120, 40)


def finished(run_id: str, outcome: RunOutcome, step: int) -> RunFinished:
    return RunFinished(summary=RunSummary(
        run_id=run_id, run_dir=Path("runs/x"), outcome=outcome, reason="", started_at=T0,
        wall_time=60.0, global_step=step, target=3000, final_loss=0.1, final_accuracy=0.9,
        tasks=()), t=T0 + 60)


async def test_the_log_keeps_following_when_a_hint_appears_and_end_follows_again(options) -> None:
    app, core = scripted(options, running_history(options.config.training))
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        await pilot.press("down", "down", "down")  # worker1
        await feed(app, core, pilot, lines("worker1", 0, 200, T0 + 41))
        log = app.task_log
        assert log.follow and log.is_vertical_scroll_end
        # A hint line appears above the panes: the log gets shorter, and must still follow.
        await feed(app, core, pilot, [TaskHint(task="worker1", hint="stalled: no progress", t=T0 + 42)])
        assert app.query_one("#hints").display
        await feed(app, core, pilot, lines("worker1", 200, 50, T0 + 43))
        await pilot.pause()
        assert log.follow and log.is_vertical_scroll_end, (log.scroll_y, log.max_scroll_y)
        assert "following" in str(log.border_subtitle)

        # l focuses the log; scrolling back pauses following (and says so) ...
        await pilot.press("l")
        assert app.focused is log
        await pilot.press("pageup")
        assert not log.follow and "paused" in str(log.border_subtitle)
        await feed(app, core, pilot, lines("worker1", 250, 20, T0 + 44))
        assert not log.is_vertical_scroll_end
        # ... End follows again, from the log and from the task table alike.
        await pilot.press("end")
        await pilot.pause()
        assert log.follow and log.is_vertical_scroll_end
        await pilot.press("l")
        assert app.focused is app.table
        await pilot.press("f")
        assert not log.follow
        await pilot.press("end")
        await pilot.pause()
        assert log.follow and log.is_vertical_scroll_end
        assert app.table.selected == "worker1"  # End did not move the table's cursor

        # Down then Up shows the same log again at its tail, not from the top.
        await pilot.press("up", "down")
        await pilot.pause()
        assert log.border_title == "worker1" and log.is_vertical_scroll_end


async def test_a_hint_taken_back_by_the_core_leaves_the_screen(options) -> None:
    hint = TaskHint(task="worker1", hint="stalled: no progress for 9 s", t=T0 + 41)
    app, core = scripted(options, [*running_history(options.config.training), hint])
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        bar = app.query_one("#hints")
        assert bar.display and "stalled" in str(bar.render())
        await feed(app, core, pilot, [TaskHintCleared(task="worker1", reason="progressing again",
                                                      t=T0 + 45)])
        assert not bar.display


async def test_rst_is_the_cores_restart_count_and_gstep_the_global_step(options) -> None:
    history = running_history(options.config.training)
    app, core = scripted(options, history)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        table = app.table
        assert [c.label.plain for c in table.columns.values()][4:6] == ["rst", "gstep"]
        assert table.get_cell("worker0", "gstep") == "1200"  # not its local step (600)
        assert table.get_cell("worker1", "rst") == "0"
        # A relaunch (R, or S after a run) is a new run: nothing was restarted in it.
        settings = options.config.training
        again: list[ControllerEvent] = [RunStarted(run_id="again", run_dir=Path("runs/y"), tasks=TASKS,
                                                   settings=settings, t=T0 + 50)]
        for info in TASKS:
            again.append(TaskStateChanged(task=info.name, old=TaskState.PENDING, new=TaskState.STARTING,
                                          pid=2000, t=T0 + 51))
        await feed(app, core, pilot, again)
        assert {table.get_cell(name, "rst") for name in app.dashboard.rows} == {"0"}
        # A restart the core counted.
        await feed(app, core, pilot, [
            TaskStateChanged(task="worker1", old=TaskState.STARTING, new=TaskState.BACKOFF, t=T0 + 52),
            TaskStateChanged(task="worker1", old=TaskState.BACKOFF, new=TaskState.STARTING, restarts=1,
                             t=T0 + 53)])
        assert table.get_cell("worker1", "rst") == "1"
        step = protocol.Step(role="worker", index=1, t=T0 + 54, global_step=1300, local_step=3,
                             loss=1.0, examples_per_sec=10.0, step_time=0.1, target=3000)
        await feed(app, core, pilot, with_progress([TrainerEvent(task="worker1", event=step, t=T0 + 54)]))
        app.table.show(app.dashboard)
        assert table.get_cell("worker1", "gstep") == "1300"


async def test_start_all_after_a_finished_run_asks_first(options) -> None:
    history = [*running_history(options.config.training),
               finished("20270115-093000-abc123", RunOutcome.SUCCEEDED, 3000)]
    messages: list = []
    app, core = scripted(options, history)
    async with app.run_test(size=SIZE, message_hook=messages.append) as pilot:
        await pilot.pause()
        await pilot.press("S")
        assert isinstance(app.screen, ConfirmScreen)
        assert "step 0" in app.screen.details and "succeeded at step 3000" in app.screen.details
        await pilot.press("n")
        assert AllTasksRequested(start=True) not in messages and not core.commands
        await pilot.press("S", "y")
        await pilot.pause()
        assert AllTasksRequested(start=True) in messages
        assert isinstance(core.commands[-1], Relaunch)


async def test_stopping_a_ps_asks_first_a_worker_does_not(options) -> None:
    messages: list = []
    app, _core = scripted(options, running_history(options.config.training))
    async with app.run_test(size=SIZE, message_hook=messages.append) as pilot:
        await pilot.pause()
        assert app.table.selected == "ps0"
        await pilot.press("x")
        assert isinstance(app.screen, ConfirmScreen) and "run ends" in app.screen.details
        await pilot.press("n")
        assert not any(isinstance(m, TaskActionRequested) for m in messages)
        await pilot.press("x", "y")
        assert TaskActionRequested(TaskAction.STOP, "ps0") in messages
        await pilot.press("down", "down", "x")
        assert not isinstance(app.screen, ConfirmScreen)
        assert TaskActionRequested(TaskAction.STOP, "worker0") in messages


async def test_quitting_mid_run_is_not_a_clean_exit(options) -> None:
    app, _core = scripted(options, running_history(options.config.training))
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        await pilot.press("q", "y")
        await app.workers.wait_for_complete()
        await pilot.pause()
    assert app.return_code == ExitCode.INTERRUPTED


async def test_the_exit_code_is_the_last_runs_outcome(options) -> None:
    for outcome, code in ((RunOutcome.SUCCEEDED, ExitCode.OK), (RunOutcome.FAILED, ExitCode.TASK_FAILED)):
        ends = [TaskStateChanged(task=info.name, old=TaskState.RUNNING, new=TaskState.SUCCEEDED,
                                 exit_code=0, t=T0 + 59) for info in TASKS]
        history = [*running_history(TrainingSettings()), *ends, finished("r", outcome, 3000)]
        app, _core = scripted(options, history)
        async with app.run_test(size=SIZE) as pilot:
            await pilot.pause()
            await pilot.press("q")  # nothing runs: no question
            await app.workers.wait_for_complete()
            await pilot.pause()
        assert app.return_code == code, outcome


async def test_a_burst_of_warnings_makes_few_toasts_and_all_are_in_the_merged_log(options) -> None:
    from tui.app.announce import MAX_TOASTS
    from tui.core.events import Level, Notice

    app, core = scripted(options, running_history(options.config.training))
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        burst = [Notice(level=Level.WARNING, text=f"stalled: worker{n}", task=f"worker{n}", t=T0 + 41)
                 for n in range(48)]
        await feed(app, core, pilot, burst)
        assert len(app._notifications) <= MAX_TOASTS + 1  # + the one that counts the rest
        merged = list(app.dashboard.merged.lines)
        assert sum("warning: stalled: worker" in line for line in merged) == 48


async def test_a_tab_press_right_after_the_runs_pane_is_not_taken_back(options) -> None:
    """The Runs pane puts its list in focus when shown; Textual shows the pane of whatever
    takes the focus. Two tab presses handled back to back (a busy machine delivers them so)
    had that focus's late message take the screen back to Runs: the second press was lost."""
    from textual.widgets import DataTable, TabbedContent

    app, _ = scripted(options, running_history(options.config.training))
    async with app.run_test(size=SIZE) as pilot:
        tabs = app.query_one(TabbedContent)
        tabs.active = "throughput"
        await pilot.pause()
        app.action_next_pane()  # Runs ...
        app.action_next_pane()  # ... and on, before the Runs pane's focus was handled
        for _ in range(3):
            await pilot.pause()
        assert tabs.active == "hosts"  # the pane after Runs
        assert app.focused is not None and app.focused.id != "runs-table"  # not the hidden runs list
        # Shown and left alone, the Runs pane's keys act on its list.
        app.action_previous_pane()
        await pilot.pause()
        await pilot.pause()
        assert tabs.active == "runs"
        assert isinstance(app.focused, DataTable) and app.focused.id == "runs-table"
        await pilot.press("tab")
        assert tabs.active == "hosts" and app.focused is not None and app.focused.id != "runs-table"
