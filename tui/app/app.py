"""The Textual front end: a thin consumer of the core's events and a keyboard for its
actions. The supervisor runs on its own thread (:mod:`tui.app.bridge`); this module only
renders :class:`~tui.app.state.Dashboard` and turns keys into requests."""

from __future__ import annotations

import gc
import os
import time
from collections.abc import Callable, Iterable
from concurrent.futures import Future
from typing import Any

from textual import on, work
from textual.app import ComposeResult, SystemCommand
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import Screen
from textual.widgets import DataTable, Input, Static, TabbedContent, TabPane

from trainer import protocol
from trainer.settings import TrainingSettings
from tui.app import signals
from tui.app.announce import TOAST_SECONDS
from tui.app.bridge import Core, call_on_news
from tui.app.controls import CONTROLS
from tui.app.hostsview import HostsActions, HostsView
from tui.app.logs import LogPane
from tui.app.lostrun import record_lost_run
from tui.app.markup import said
from tui.app.messages import AllTasksRequested, CoreActionFailed, TaskAction, TaskActionRequested
from tui.app.pacing import CorePacing
from tui.app.pending import SettingsActions
from tui.app.process_bridge import ProcessBridge
from tui.app.runs import RunsView, traffic_view
from tui.app.screens import ConfirmScreen, HelpScreen
from tui.app.split import LogSplit, SplitActions
from tui.app.state import Dashboard
from tui.app.tasktable import TaskTable
from tui.app.tensorboard import TensorBoardActions
from tui.app.widgets import (
    HintBar,
    Panes,
    PlacementView,
    QuietFooter,
    StatusBar,
    ThroughputView,
    put,
    set_border_title,
    use_whole_cell_scrollbars,
)
from tui.common.exit_codes import ExitCode
from tui.config.cluster import Job
from tui.core.commands import Command, Relaunch, RestartTask, StartRun, StartTask, StopAll, StopTask
from tui.core.events import (
    ControllerEvent,
    ProgressUpdate,
    RunFinished,
    RunStarted,
    RunSummary,
    TaskOutput,
    TrainerEvent,
)
from tui.core.exits import exit_code_for
from tui.core.inbox import CoreLost
from tui.core.options import RunOptions
from tui.core.supervisor.records import SupervisorOptions
from tui.core.traffic import TrafficUpdate
from tui.core.usage import UsageSample
from tui.program.base import TaskProgram

#: While the core has news, what it sent is folded and drawn at most this often (a frame): a
#: flood's lines are coalesced. With nothing new the refresh timer is paused (a core that says
#: when it has news, :class:`~tui.app.bridge.WakingCore`), so an idle run costs no frames.
REFRESH_SECONDS = 0.1
#: What moves with time alone (the elapsed time, the output ages, the ETA) is redrawn this
#: often, once a run has tasks.
CLOCK_SECONDS = 1.0
#: The task table (and hints) are redrawn at most this often while tasks change, and once a
#: second regardless (ages, rates). A burst (64 tasks starting) is coalesced: redrawing the
#: table each tick held the GIL the core needed to start tasks, 2x slower than headless.
TABLE_REFRESH_SECONDS = 0.4
LOG_TABS = ("logs", "merged")  # the tabs that show log panes
PANES = ("logs", "merged", "placement", "throughput", "runs", "hosts")


class TfdistApp(signals.SignalHandling, SettingsActions, CorePacing, SplitActions, TensorBoardActions,
                HostsActions):
    """``tfdist-tui hosts.yaml``."""

    TITLE = "tfdist-tui"
    CSS_PATH = "app.tcss"
    # Made from the one declaration of the operator's keys (tui.app.controls).
    BINDINGS = [Binding(c.key, c.action, c.name, show=c.footer, priority=c.priority)
                for c in CONTROLS if c.action is not None and c.pane is None]

    def __init__(self, options: RunOptions, *,
                 core_factory: Callable[[TfdistApp], Core] | None = None,
                 autostart: bool = True, clock: Callable[[], float] = time.time,
                 supervisor_options: SupervisorOptions | None = None) -> None:
        super().__init__()
        self._init_toasts()
        if "TEXTUAL_ANIMATIONS" not in os.environ:
            # A controller's screen moves when its tasks do, not in between: every frame of a
            # sliding underline is work on a busy machine and bytes over an SSH link (a tab
            # key drew 20 frames). TEXTUAL_ANIMATIONS=full brings them back.
            self.animation_level = "none"
        self.options = options
        #: How the default core's supervisor runs tasks (None: as the command line says).
        self._supervisor_options = supervisor_options
        self.dashboard = Dashboard(options.config.training, clock=clock)
        self.pending: TrainingSettings = options.config.training
        self.preview: protocol.Placement | None = None
        self.preview_note = ""
        self._previews: dict[TrainingSettings, protocol.Placement] = {}
        #: The operator quit while tasks ran: the run did not end by itself.
        self.quit_mid_run = False
        self.autostart = autostart
        self._core_factory = core_factory or self._default_core
        self.core: Core | None = None
        self.traffic: TrafficUpdate | None = None  # the newest sample from the core
        self.interrupted = False  # a SIGHUP or SIGTERM ended it (exit 130)
        self._last_table_refresh = 0.0
        self._charted_revision = -1  # the progress revision the throughput pane shows
        self._last_chart_refresh = 0.0
        self._last_worker_charts = 0.0
        #: The core says when it has news: the refresh timer sleeps in between.
        self._woken_by_core = False

    # -- wiring ---------------------------------------------------------------------------

    @property
    def _program(self) -> TaskProgram:
        """What the tasks run: it says which toggles mean something."""
        return self.options.program

    def _default_core(self, app: TfdistApp) -> Core:
        return ProcessBridge(self.options, self._supervisor_options)

    def compose(self) -> ComposeResult:
        yield StatusBar(id="status")
        yield TaskTable(id="tasks")
        yield HintBar(id="hints")
        with Panes(id="panes", initial="logs"):
            with TabPane("Logs", id="logs"):
                yield LogSplit(id="log-split")
            with TabPane("All logs", id="merged"):
                yield LogPane(id="merged-log")
            with TabPane("Placement", id="placement"):
                yield PlacementView(id="placement-view")
            with TabPane("Throughput", id="throughput"):
                yield ThroughputView(id="throughput-view")
            with TabPane("Runs", id="runs"):
                yield RunsView(self.options.runs_root, self.options.config.path, id="runs-view",
                               last_finished=lambda: getattr(self.dashboard.finished, "run_id", None))
            with TabPane("Hosts", id="hosts"):
                yield HostsView(id="hosts-view")
        with Vertical(id="fields"):  # (hidden while neither field is open)
            yield Input(placeholder="search the logs (enter: go to a match, then n / N; esc: clear)",
                        id="search")
            yield Input(placeholder="filter logs (enter: keep, esc: clear)", id="filter")
        # Compact and without the palette entry (ctrl+p, in the help): 80 columns hold it all.
        yield QuietFooter(compact=True, show_command_palette=False)

    def on_mount(self) -> None:
        signals.install(self._on_signal)
        use_whole_cell_scrollbars()
        self.core = self._core_factory(self)
        # Everything made so far (modules, widgets, the core) lives as long as the app: out of
        # the collector's sight, a full collection takes half as long (140 ms with 64 tasks was
        # a key press's worst wait, BENCHMARKS.md section 9).
        gc.freeze()
        for field in self.query("#fields Input"):
            field.display = False
        self.query_one(TaskTable).focus()
        self.merged_log.show_log(self.dashboard.merged, "")
        self._refresh_timer = self.set_interval(REFRESH_SECONDS, self._refresh_tick)
        self._clock_timer = self.set_interval(CLOCK_SECONDS, self._clock_tick, pause=True)
        self._woken_by_core = call_on_news(self.core, self._refresh_timer.resume)
        self.refresh_dashboard()
        if self.autostart:
            self._request(StartRun())

    def _request(self, command: Command) -> None:
        """Send the core a command; a failure comes back as a :class:`CoreActionFailed`."""
        assert self.core is not None
        future = self.core.send(command)

        def done(f: Future[None]) -> None:
            error = f.exception()
            if error is not None:
                self.post_message(CoreActionFailed(command, str(error) or type(error).__name__))

        future.add_done_callback(done)

    # -- the refresh loop -----------------------------------------------------------------

    def _refresh_tick(self) -> None:
        news = self.refresh_dashboard()
        if self._woken_by_core and not news and not self.dashboard.tasks_changed:
            # Nothing new and nothing waiting to be drawn: no frames until the core wakes it
            # (the first news after a quiet spell is then drawn at once).
            self._refresh_timer.pause()

    def refresh_dashboard(self, *, force: bool = False) -> bool:
        """Fold what happened since the last tick into the dashboard and redraw; whether the
        core had news. ``force``: redraw the task table now (else at most every
        :data:`TABLE_REFRESH_SECONDS` while tasks change)."""
        # (query_one is cached by Textual; a query walked the whole screen ten times a second)
        status = self.query_one_optional(StatusBar)
        if self.core is None or status is None:
            return False  # not started yet, or closing: the widgets are gone
        events, dropped = self.core.drain()
        folded: list[ControllerEvent | CoreLost] = []
        for event in events:
            if isinstance(event, TrafficUpdate):
                self._take_traffic(event)
            elif isinstance(event, UsageSample):
                self.dashboard.usage = event
            else:
                if isinstance(event, RunStarted):
                    self.traffic = None  # the earlier run's traffic is not this one's
                folded.append(event)
        self.dashboard.apply_all(folded)  # (a frame's output lines together)
        for event in folded:
            if isinstance(event, CoreLost):
                record_lost_run(self.dashboard, event.text)  # the run's record, by the app
            if not isinstance(event, (TaskOutput, TrainerEvent, ProgressUpdate)):
                self._announce(event)
        if dropped:
            self.dashboard.merged.add(f"… {dropped} lines not shown (the UI fell behind); "
                                      "the run directory has every line")
        d = self.dashboard
        if d.rows:
            self._clock_timer.resume()  # the output ages move from now on
        # The elapsed time moves with the clock's tick, as the table's ages do: one frame a
        # second draws both (the status bar alone at its own second was a second frame).
        status.show(d, self.pending, tick=force)
        now = time.monotonic()
        since = now - self._last_table_refresh
        # (Woken by the core, the clock's tick redraws the table once a second: forced.)
        if force or (since >= 1.0 and not self._woken_by_core) or (
                d.tasks_changed and since >= TABLE_REFRESH_SECONDS):
            self.table.show(d)
            self.table.show_totals(d)
            self.query_one(HintBar).show(d)
            d.tasks_changed = False
            self._last_table_refresh = now
            if self.task_log.source is None and self.table.selected:
                self._show_task_log(self.table.selected)
            elif self.task_log.source is None:  # the cursor on a role's header: say what to do
                set_border_title(self.task_log, "select a task (↑↓) to see its log")
        self._show_new_log_lines()
        if d.placement_changed:
            self._show_placement()
            d.placement_changed = False
        if self.traffic is not None and self.query_one(TabbedContent).active == "placement":
            put(self.query_one("#placement-traffic", Static), traffic_view(self.traffic))
        # The charts are the costliest redraw: only while visible, and only when progress
        # moved (or once a second, for the ETA).
        if self.query_one(TabbedContent).active == "throughput" and (
                d.progress_revision != self._charted_revision or now - self._last_chart_refresh >= 1.0):
            # A chart per worker: a point a second, so redrawn once a second (hundreds of
            # them on each frame held the UI thread).
            self._show_throughput(workers=force or now - self._last_worker_charts >= 1.0)
        self.show_hosts(force=force)
        self.watch_screen()
        return bool(events or dropped)

    def _show_throughput(self, *, workers: bool = True) -> None:
        self.query_one(ThroughputView).show(self.dashboard, workers=workers)
        self._charted_revision = self.dashboard.progress_revision
        self._last_chart_refresh = time.monotonic()
        if workers:
            self._last_worker_charts = self._last_chart_refresh

    @on(TabbedContent.TabActivated, "#panes")
    def _pane_shown(self, event: TabbedContent.TabActivated) -> None:
        if event.pane.id == "throughput":
            self._show_throughput()  # now, not at the next tick
        elif event.pane.id == "runs":
            self.query_one(RunsView).action_reload_runs()  # a run may have finished since
        else:
            self._show_new_log_lines()  # what a log pane missed while hidden
        self.show_hosts(force=True)  # (only while shown)
        # Once every focus asked for so far has been given: the operator may have moved on.
        self.call_after_refresh(self._place_focus)
        self.watch_screen()

    def _show_new_log_lines(self) -> None:
        """The log panes on screen take what their sources got since; a hidden pane would take
        a flood's every line for nothing, and catches up when shown."""
        if self.query_one(TabbedContent).active in LOG_TABS:
            for pane in self.shown_log_panes:
                pane.append_unseen()

    def _place_focus(self) -> None:
        """The focus where the shown pane's keys act: the Runs pane's list (space, c) on the
        Runs pane; else where it is, unless that is in a hidden pane (then the task table)."""
        active = self.query_one(TabbedContent).active
        if active in ("runs", "hosts"):  # (their keys act in their lists)
            self.query_one(f"#{active}-view").query_one(DataTable).focus()
            return
        focused = self.focused
        pane = next((a for a in focused.ancestors if isinstance(a, TabPane)), None) if focused else None
        if focused is None or (pane is not None and pane.id != active):
            self.table.focus()

    def _show_task_log(self, name: str | None) -> None:
        source = self.dashboard.logs.get(name) if name else None
        self.task_log.show_log(source, self.task_log.filter_text)
        set_border_title(self.task_log, name or "")
        self.log_task = name
        self.watch_screen()

    def _show_placement(self) -> None:
        self.query_one(PlacementView).show(self.dashboard.placement, self.preview, self.preview_note)

    @on(DataTable.RowHighlighted, "#tasks")
    def _task_selected(self, event: DataTable.RowHighlighted) -> None:
        if self.table.selected is not None:  # (a group's header keeps the log shown)
            self._show_task_log(event.row_key.value)

    @on(DataTable.RowSelected, "#tasks")
    def _row_entered(self) -> None:
        if self.table.toggle_group():  # enter on a role's header folds or unfolds it
            self.refresh_dashboard(force=True)

    # -- task actions ---------------------------------------------------------------------

    def action_start_task(self) -> None:
        if name := self._selected_or_warn():
            self.post_message(TaskActionRequested(TaskAction.START, name))

    def action_stop_task(self) -> None:
        name = self._selected_or_warn()
        if name is None:
            return
        row = self.dashboard.rows[name]
        if row.job is not Job.PS or not row.state.is_active or self.dashboard.finished is not None:
            self.post_message(TaskActionRequested(TaskAction.STOP, name))
            return

        # A ps holds variables every worker needs: stopping it ends the run.
        def confirmed(answer: bool | None) -> None:
            if answer:
                self.post_message(TaskActionRequested(TaskAction.STOP, name))

        self.push_screen(ConfirmScreen(
            f"Stop {name}?", f"{name} holds a share of the model's variables: every worker loses "
            "its session and the run ends (the restart policy does not restart a task you "
            "stopped).\nTo restart it instead, press r."), confirmed)

    def action_restart_task(self) -> None:
        if name := self._selected_or_warn():
            self.post_message(TaskActionRequested(TaskAction.RESTART, name))

    @on(TaskActionRequested)
    def _task_action(self, message: TaskActionRequested) -> None:
        command: Command
        if message.action is TaskAction.START:
            command = StartTask(message.task)
        elif message.action is TaskAction.STOP:
            command = StopTask(message.task)
        else:
            command = RestartTask(message.task)
        self._request(command)

    def action_start_all(self) -> None:
        if self.dashboard.finished is None and self.dashboard.run_id:
            self.post_message(AllTasksRequested(start=True))  # the run's stopped tasks
            return
        # After a run: a new run, from step 0 unless a checkpoint says otherwise. Asked,
        # since it starts over what may have taken hours.
        settings = self.dashboard.settings
        resume = (f"Training resumes from the checkpoints in {settings.checkpoint_dir} where possible."
                  if settings.checkpoint_dir else "Training starts again from step 0.")
        finished = self.dashboard.finished
        ended = f"The last run {finished.outcome.value} at step {finished.global_step}.\n" if finished else ""

        def confirmed(answer: bool | None) -> None:
            if answer:
                self.post_message(AllTasksRequested(start=True))

        self.push_screen(ConfirmScreen("Start a new run?", f"{ended}{resume}"), confirmed)

    def action_stop_all(self) -> None:
        active = self.dashboard.active_tasks
        if not active:
            self.notify("no task is running")
            return

        def confirmed(answer: bool | None) -> None:
            if answer:
                self.post_message(AllTasksRequested(start=False))

        self.push_screen(ConfirmScreen("Stop every task?",
                                       f"{len(active)} running: {', '.join(active)}"), confirmed)

    @on(AllTasksRequested)
    def _all_tasks(self, message: AllTasksRequested) -> None:
        if not message.start:
            self._request(StopAll())
            return
        if self.dashboard.finished is not None or not self.dashboard.run_id:
            self._request(Relaunch(self.dashboard.settings))
            return
        for name, row in self.dashboard.rows.items():
            if not row.state.is_active:
                self._request(StartTask(name))

    @on(CoreActionFailed)
    def _core_action_failed(self, message: CoreActionFailed) -> None:
        if isinstance(message.command, (StartRun, Relaunch)) and not self.dashboard.run_id:
            self.dashboard.refused = message.reason  # kept in the status bar until a run starts
            self.refresh_dashboard(force=True)
        self.notify(said(f"{message.what}: {message.reason}"), title="cannot do that",
                    severity="error", timeout=2 * TOAST_SECONDS)

    # -- views ----------------------------------------------------------------------------

    def _cycle_pane(self, step: int) -> None:
        tabs = self.query_one(TabbedContent)
        index = PANES.index(tabs.active) if tabs.active in PANES else 0
        tabs.active = PANES[(index + step) % len(PANES)]

    def action_next_pane(self) -> None:
        self._cycle_pane(1)

    def action_previous_pane(self) -> None:
        self._cycle_pane(-1)

    def action_help(self) -> None:
        self.push_screen(HelpScreen())

    def get_system_commands(self, screen: Screen[Any]) -> Iterable[SystemCommand]:
        yield from super().get_system_commands(screen)
        for control in CONTROLS:
            if control.in_palette:
                yield SystemCommand(control.name, f"{control.help_line()} (key: {control.display})",
                                    lambda a=control.action: self.run_action(a))

    # -- quitting -------------------------------------------------------------------------

    async def action_quit(self) -> None:
        active = self.dashboard.active_tasks
        if not active:  # a run under way (its tasks waiting for the pool or their turn) is cut short
            self.quit_mid_run = self.dashboard.finished is None
            self._stop_all_and_exit()
            return

        def confirmed(answer: bool | None) -> None:
            if answer:
                self.quit_mid_run = self.dashboard.finished is None
                self._stop_all_and_exit()

        self.push_screen(ConfirmScreen("Quit?", f"{len(active)} running tasks will be stopped: "
                                                f"{', '.join(active)}"), confirmed)

    @work(thread=True, exclusive=True, group="shutdown")
    def _stop_all_and_exit(self, stop: StopAll | None = None) -> None:
        self.call_from_thread(self.notify, "stopping every task…")
        if self.core is not None and stop is not None:
            self.core.send(stop).result(timeout=60.0)  # as interrupted (a signal), before close
        if self.core is not None:
            self.core.close(timeout=15.0)
        code = int(self.exit_code_now())
        self.call_from_thread(self.exit, code, code)

    def last_summary(self) -> RunSummary | None:
        """How the last run ended: as the app showed it, or, quit while it ran, as the core
        said once it had stopped every task (after the app's last look). Call after close."""
        found = self.dashboard.finished
        if self.core is not None:
            events, _ = self.core.drain()
            found = next((e.summary for e in reversed(events) if isinstance(e, RunFinished)), found)
            for event in events:  # the run's traffic, which the summary ends with
                if isinstance(event, TrafficUpdate):
                    self._take_traffic(event)
        return found

    def exit_code_now(self) -> ExitCode:
        """The app's exit status, in the core's terms (:func:`tui.core.exits.exit_code_for`):
        the last run's outcome; quitting while it ran, or a SIGHUP/SIGTERM, is an interruption
        (as Ctrl-C is headless); a run that never started is a usage error."""
        if self.interrupted:
            return ExitCode.INTERRUPTED
        if self.dashboard.refused:  # no run started: the last try was refused
            return ExitCode.USAGE
        if self.quit_mid_run:
            return ExitCode.INTERRUPTED
        finished = self.dashboard.finished
        if finished is None:
            return ExitCode.OK if not self.dashboard.run_id else ExitCode.INTERRUPTED
        return exit_code_for(finished.outcome)
