"""The ``--no-ui`` front end: compose-style prefixed output, or JSON lines with ``--json``.

This module is the only place that formats controller events as text for a terminal or a
CI log. It subscribes to the supervisor like any front end; it also owns the headless
process's policy: signals (Ctrl-C/SIGTERM stop every task, a second one kills), the
``--timeout``, and the exit code.
"""

from __future__ import annotations

import asyncio
import functools
import shlex
import signal
import sys
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, TextIO, cast

from trainer import protocol
from tui.common.exit_codes import ExitCode
from tui.common.paced_loop import paced_loop
from tui.common.streams import BatchedWriter, SurvivingStream, watch_readers
from tui.common.terminal import display_line, display_lines, inert, wants_colour
from tui.common.units import format_bytes
from tui.config.cluster import Job
from tui.core.anatomy import AnatomyBoard, typical_text
from tui.core.describe import describe_event, format_number, reported_at, same_placement
from tui.core.events import (
    ControllerEvent,
    HostsProgress,
    Notice,
    ProgressUpdate,
    RunFinished,
    RunOutcome,
    RunStarted,
    RunSummary,
    TaskHint,
    TaskOutput,
    TaskStateChanged,
    TrainerEvent,
)
from tui.core.exits import ExitInfo, exit_code_for
from tui.core.host_table import StateChanges
from tui.core.hosts import HostBoard
from tui.core.json_lines import JsonPrinter
from tui.core.options import RunOptions
from tui.core.progress import ProgressSnapshot
from tui.core.run_facts import RateUnit, figures
from tui.core.task_state import TaskState

if TYPE_CHECKING:
    # (The session, its launchers and supervisor are loaded once the first line is out.)
    from tui.core.session import Session
    from tui.core.supervisor.lifecycle import Supervisor
    from tui.core.traffic import TrafficUpdate

PROGRESS_INTERVAL = 5.0
CONTROLLER = "tfdist"

_COLOURS = (36, 33, 32, 35, 34, 31, 96, 93, 92, 95, 94, 91)
#: Kept for callers of the old name: every text this printer writes goes through it.
clean_text = inert


class Printer:
    """Formats controller events as prefixed lines (``worker1 | ...``)."""

    def __init__(self, out: TextIO, colour: bool, anatomy: bool = False,
                 board: AnatomyBoard | None = None) -> None:
        # Every write is gathered and goes out at the next flush, in order: a task's lines
        # within a tick (BatchedWriter), anything else at once.
        self._out = BatchedWriter(out)
        self._colour = colour
        self._anatomy = anatomy
        # ``board``: one folded already (the app's, whose summary ends as headless's does).
        self._board = board if board is not None else AnatomyBoard()
        self._width = len(CONTROLLER)
        self._colours: dict[str, int] = {}
        self._progress: ProgressSnapshot | None = None
        self._placement_shown: protocol.Placement | None = None
        self._last_progress: tuple[int, float] | None = None
        self._prefixes: dict[str, str] = {}  # made once per name and run (every line has one)
        self._hosts_line = ""  # the remote hosts' progress as last printed
        self._host_changes = StateChanges()  # each host's state as last printed

    def flush(self) -> None:
        """Write out the task lines still gathered."""
        self._out.flush()

    def handle(self, event: ControllerEvent) -> None:
        """The supervisor's sink."""
        if isinstance(event, RunStarted):
            self._run_started(event)
        elif isinstance(event, TaskOutput):
            if shown := event.shown():
                self._out.write(display_lines(f"{self._prefix(event.task)} ", shown, event.task))
            self._out.flush_soon()  # one write(2) a tick for every task's lines, not one a read
            return
        elif isinstance(event, TaskStateChanged):
            self._state(event)
        elif isinstance(event, TrainerEvent):
            if isinstance(event.event, protocol.Step) and not self._board.fold(event.task, event.event):
                return  # summarised by the progress line: nothing written, nothing to flush
            self._trainer_event(event)
        elif isinstance(event, ProgressUpdate):
            self._progress = event.progress  # printed by progress_line on its timer
            return  # (nothing written: no flush, which a step's every update would pay)
        elif isinstance(event, Notice):
            self._line(event.task or CONTROLLER, f"{event.level.value}: {event.text}")
        elif isinstance(event, TaskHint):
            self._line(event.task, f"hint: {event.hint}")
        elif isinstance(event, HostsProgress):
            if event.line != self._hosts_line:  # (a step within a phase changes no count)
                self._hosts_line = event.line
                self._line(CONTROLLER, event.line)
            for line in self._host_changes.reach_lines(event):
                self._line(CONTROLLER, line)
        elif isinstance(event, RunFinished):
            self.summary(event.summary)
        self._out.flush()

    def progress_line(self) -> None:
        """Print the progress line, unless nothing changed since the last one."""
        snap = self._progress
        if snap is None:
            return
        if not snap.workers or (snap.global_step, snap.examples_per_sec) == self._last_progress:
            return
        self._last_progress = (snap.global_step, snap.examples_per_sec)
        shown = figures(snap)
        percent = f" ({shown.percent}%)" if shown.percent is not None else ""
        target = f"/{shown.target}" if shown.target else ""
        metrics = f"loss {format_number(shown.loss)}"
        if shown.train_accuracy is not None:
            metrics += f"  training accuracy {shown.train_accuracy:.4f}"
        if shown.accuracy is not None:
            metrics += f"  held-out accuracy {shown.accuracy:.4f}"
        if shown.eval_loss is not None:
            metrics += f"  held-out loss {format_number(shown.eval_loss)}"
        self._line(CONTROLLER, f"step {shown.step}{target}{percent}  {_rate(snap)}{metrics}")
        self._out.flush()

    def summary(self, summary: RunSummary) -> None:
        """The final block: outcome, steps, time, loss/accuracy, every task, the run dir,
        and each failed task's last lines."""
        def write(text: str) -> None:
            # Reasons, hints, paths and last lines are the tasks' and hosts' words.
            self._out.write(inert(text, newlines=True))

        title = f"run {summary.outcome.value}"
        if summary.reason:
            title += f": {summary.reason}"
        self._line(CONTROLLER, title)
        target = f" / {summary.target}" if summary.target else ""
        write(f"  steps        {summary.global_step}{target}\n")
        write(f"  wall time    {summary.wall_time:.1f} s\n")
        write(f"  final loss   {format_number(summary.final_loss)}\n")
        write(f"  accuracy     {format_number(summary.final_accuracy)}"
              + (" (held-out)" if summary.final_accuracy is not None else "") + "\n")
        if summary.final_train_accuracy is not None:
            write(f"  training acc {format_number(summary.final_train_accuracy)}\n")
        if summary.final_eval_loss is not None:
            write(f"  held-out loss {format_number(summary.final_eval_loss)}\n")
        for result in summary.tasks:
            code = "not started" if result.exit_code is None else f"exit code {result.exit_code}"
            detail = f" ({result.reason})" if result.reason else ""
            write(f"  {result.name:<{self._width}}  {result.state.value}, {code}{detail}\n")
            if result.hint and result.state is TaskState.FAILED:
                indent = " " * max(self._width, len(result.name))  # under the state column
                write(f"  {indent}  hint: {result.hint}\n")
        for number, incident in enumerate(summary.incidents, 1):
            write(f"  {'restarts' if number == 1 else '':<12} {incident.describe()}\n")
        if (step := self._board.typical()) is not None:
            write(f"  a step       {typical_text(step)}\n")
        write(f"  run dir      {summary.run_dir}\n")
        write(f"  compare      {compare_command(summary)}\n")
        for result in summary.failed_tasks:
            exit_text = ExitInfo(result.exit_code).how("failed")
            write(f"{result.name} {exit_text}; its last {len(result.last_lines)} lines:\n")
            for line in result.last_lines:
                self._out.write(f"  {self._prefix(result.name)} {display_line(line, result.name)}\n")
        self._out.flush()

    def fit(self, names: Sequence[str]) -> None:
        """Size the name column for these tasks (a run's start does it for its tasks)."""
        self._width = max([len(CONTROLLER), *(len(name) for name in names)])

    def traffic(self, update: TrafficUpdate) -> None:
        """The run's measured traffic per ps (or why it was not measured), after the summary."""
        for number, line in enumerate(update.lines()):  # may hold a host's words (ss's stderr)
            self._out.write(f"  {'traffic' if number == 0 else '':<12} {inert(line)}\n")
        self._out.flush()

    # -- pieces -------------------------------------------------------------------------

    def _run_started(self, event: RunStarted) -> None:
        self._progress = None
        self._placement_shown = None
        self._last_progress = None
        self._board = AnatomyBoard()  # this run's steps and stragglers only
        self.fit([t.name for t in event.tasks])
        self._prefixes.clear()
        for number, task in enumerate(event.tasks):
            self._colours[task.name] = _COLOURS[number % len(_COLOURS)]
        ps = [t.address for t in event.tasks if t.job is Job.PS]
        workers = [t.address for t in event.tasks if t.job is Job.WORKER]
        s = event.settings
        chief = [t.address for t in event.tasks if t.job is Job.CHIEF]
        self._line(CONTROLLER, f"run {event.run_id}: ps {', '.join(ps)}; workers {', '.join(workers)}"
                               + (f"; chief {', '.join(chief)}" if chief else ""))
        self._line(CONTROLLER, event.description or
                   f"training {s.model.value} on {s.dataset.value}, {s.mode.value}, "
                   f"{s.steps} steps, {s.partitions} partition(s), {s.placement.value}")
        self._line(CONTROLLER, f"run dir {event.run_dir}")
        if shares := [f"{t.name} {t.share}" for t in event.tasks if t.share]:
            self._line(CONTROLLER, f"shares: {'; '.join(shares)}")

    def _state(self, event: TaskStateChanged) -> None:
        if event.new is TaskState.STOPPING:
            return  # the STOPPED (or FAILED) line follows with the reason
        if event.new is TaskState.STARTING:
            text = f"starting (pid {event.pid}" + (f", {event.reason})" if event.reason else ")")
        elif event.new.is_finished and event.exit_code is not None:
            text = f"{event.new.value}: {ExitInfo(event.exit_code, event.reason).detail()}"
        else:
            text = event.new.value + (f": {event.reason}" if event.reason else "")
        self._line(event.task, f"-- {text}")

    def _trainer_event(self, event: TrainerEvent) -> None:
        inner = event.event
        if isinstance(inner, protocol.StepAnatomy):
            self._board.fold(event.task, inner)
        for line in self._board.news():  # (a step may have named a straggler)
            self._line(CONTROLLER, line)
        if isinstance(inner, protocol.Step):
            return  # summarised by the progress line
        if isinstance(inner, protocol.StepAnatomy) and not self._anatomy:
            return  # one every few hundred steps a worker: on request (--anatomy)
        if isinstance(inner, protocol.Placement):
            before = self._placement_shown
            if before is None or not same_placement(before, inner):
                self._placement_shown = inner
                self._placement(inner, before)
            return
        self._line(event.task, f"-- {describe_event(inner)}")

    def _placement(self, placement: protocol.Placement, before: protocol.Placement | None) -> None:
        """The placement as reported at its time; a later, different report is printed
        whole again as the one that holds now (the app's Placement pane shows the latest)."""
        total = sum(placement.ps_bytes) or 1
        replaces = f", replaces the one of {reported_at(before)}" if before is not None else ""
        self._line(CONTROLLER, f"placement of {placement.model} at {reported_at(placement)}{replaces}: "
                               f"{placement.strategy}, {placement.partitions} partition(s), "
                               f"{placement.num_ps} ps")
        for ps, size in enumerate(placement.ps_bytes):
            shards = sum(1 for v in placement.variables if v.ps == ps)
            self._line(CONTROLLER, f"  ps{ps:<4} {shards:>4} shards  {format_bytes(size):>10}  "
                                   f"{size / total:6.1%}")
        self._line(CONTROLLER, f"  max/mean bytes per ps: {placement.max_mean_ratio:.2f}")

    def _prefix(self, name: str) -> str:
        known = self._prefixes.get(name)
        if known is not None:
            return known
        known = self._prefixes[name] = self._make_prefix(name)
        return known

    def _make_prefix(self, name: str) -> str:
        text = f"{name:<{self._width}} |"
        colour = self._colours.get(name)
        if self._colour and colour is not None:
            return f"\x1b[{colour}m{text}\x1b[0m"
        return text

    def _line(self, name: str, text: str) -> None:
        # Every line but the prefix may quote a task or a host (event fields, hints, stall
        # warnings, notices, reasons): made inert here, at the one place that writes lines.
        self._out.write(f"{self._prefix(name)} {inert(text)}\n")


def compare_command(summary: RunSummary) -> str:
    """How to compare this run with another (other runs of the config are beside it)."""
    return f"tfdist-tui compare {shlex.quote(str(summary.run_dir))} OTHER_RUN_DIR"


def write_summary(summary: RunSummary, out: TextIO, traffic: TrafficUpdate | None = None,
                  board: AnatomyBoard | None = None) -> None:
    """The summary block alone, as a headless run ends with it (``traffic``: the run's, once
    over; ``board``: the run's step anatomy, for its typical step): the app prints it when the
    operator quits, so the terminal keeps how the run ended and where it is."""
    printer = Printer(out, colour=wants_colour(out), board=board)
    printer.fit([task.name for task in summary.tasks])
    printer.summary(summary)
    if traffic is not None and traffic.final:
        printer.traffic(traffic)
    out.flush()


def _rate(snap: ProgressSnapshot) -> str:
    """The run's rate as the core's :func:`~tui.core.run_facts.figures` says it: examples/s
    with each task's, else the global step's rate (a program that never said its batch
    size), else nothing: never a 0.0 that reads as a stall."""
    shown = figures(snap)
    if shown.rate is None:
        return ""
    if shown.unit is RateUnit.EXAMPLES:
        return f"{shown.rate:.1f} {shown.unit.value} [{task_rates(snap)}]  "
    return f"{shown.rate:.1f} {shown.unit.value}  "


def task_rates(snap: ProgressSnapshot) -> str:
    """Each task's examples/s ('-': not known now, no step reported lately); TF2's coordinator
    is named as such (its rate is the cluster's), the workers' parts of it after it."""
    return ", ".join(f"{t.task}{' (coordinator)' if t.coordinates else ''} "
                     + ("-" if t.rate is None else f"{t.rate:.1f}") for t in figures(snap).tasks)


class _Stopper:
    """Turns signals and the timeout into supervisor stops. A request that arrives before
    the run has started (during preflight) is held and carried out once it has."""

    def __init__(self, supervisor: Supervisor, err: TextIO) -> None:
        self._supervisor = supervisor
        self._err = err
        self._started = False
        self._pending: list[tuple[RunOutcome, str]] = []
        self._tasks: set[asyncio.Task[object]] = set()
        self._interrupts = 0
        self._output_gone = False
        self._starting: asyncio.Future[None] | None = None
        #: A signal ended the start (a Slurm allocation pending, a host slow to answer).
        self.gave_up = False

    async def start(self, starting: Awaitable[None]) -> None:
        """Await the run's start; a signal before it has started cancels it (waiting on a
        pending Slurm allocation must not outlast Ctrl-C)."""
        self._starting = asyncio.ensure_future(starting)
        await self._starting

    def run_started(self) -> None:
        self._started = True
        for outcome, reason in self._pending:
            self.request(outcome, reason)
        self._pending.clear()

    def request(self, outcome: RunOutcome, reason: str) -> None:
        if not self._started:
            self._pending.append((outcome, reason))
            if outcome is RunOutcome.INTERRUPTED and self._starting is not None:
                self.gave_up = True
                self._starting.cancel()
            return
        task: asyncio.Task[object] = asyncio.ensure_future(self._supervisor.stop_all(outcome, reason))
        self._tasks.add(task)  # keep a reference until done
        task.add_done_callback(self._tasks.discard)

    def on_signal(self, signum: signal.Signals) -> None:
        """First Ctrl-C/SIGTERM: stop every task gracefully. Second: SIGKILL them now."""
        self._interrupts += 1
        if self._interrupts == 1:
            self._err.write(f"{CONTROLLER}: {signum.name}: stopping every task (again to kill them now)\n")
            self.request(RunOutcome.INTERRUPTED, f"interrupted by {signum.name}")
        else:
            self._err.write(f"{CONTROLLER}: {signum.name}: killing every task\n")
            self._supervisor.kill_all()
        self._err.flush()

    def output_gone(self, stream: SurvivingStream) -> None:
        """What the controller prints can no longer be read (its reader closed the pipe, its
        terminal went): stop every task as interrupted, as the app does when its terminal
        goes, rather than train on unseen; nothing once the run is over."""
        if self._output_gone or (self._started and not self._supervisor.is_running):
            return
        self._output_gone = True
        what = "the terminal is gone" if stream.terminal else "nobody reads the output any more"
        self.request(RunOutcome.INTERRUPTED, f"interrupted: {what}")


async def run_headless(options: RunOptions, *, supervisor: Supervisor | None = None,
                       out: TextIO | None = None, err: TextIO | None = None,
                       handle_signals: bool = True,
                       progress_interval: float = PROGRESS_INTERVAL) -> ExitCode:
    """Run the cluster to the end and return the exit code. ``supervisor`` may be given
    (tests use a fake trainer); by default the session is built from ``options``."""
    # After SIGHUP the terminal is gone: a write fails (EIO), and must not end the run's
    # shutdown, which still has tasks to stop and a summary to write.
    streams = (SurvivingStream(out or sys.stdout), SurvivingStream(err or sys.stderr))
    out_stream, err_stream = (cast(TextIO, stream) for stream in streams)
    printer: Printer | JsonPrinter
    if options.json_output:
        printer = JsonPrinter(out_stream)
    else:
        printer = Printer(out_stream, colour=wants_colour(out_stream), anatomy=options.anatomy)
    session = _session(options, supervisor, printer)
    from tui.plan.preflight import PreflightError  # (loaded with the session)

    supervisor = session.supervisor
    if session.traffic is not None and isinstance(printer, JsonPrinter):
        printer.follow(session.traffic)
    supervisor.subscribe(printer.handle)

    loop = asyncio.get_running_loop()
    stopper = _Stopper(supervisor, err_stream)
    for stream in streams:
        stream.on_lost = functools.partial(stopper.output_gone, stream)
    watch = asyncio.create_task(watch_readers(streams))
    # SIGHUP: the operator's SSH connection dropped, the terminal closed, tmux was killed.
    handled = [signal.SIGINT, signal.SIGTERM, signal.SIGHUP] if handle_signals else []
    for signum in handled:
        loop.add_signal_handler(signum, stopper.on_signal, signum)
    timer: asyncio.TimerHandle | None = None
    progress: asyncio.Task[None] | None = None
    try:
        try:
            await stopper.start(session.start())
        except PreflightError as exc:
            for problem in exc.problems:
                err_stream.write(inert(f"error: {problem}\n", newlines=True))
            err_stream.flush()
            return ExitCode.USAGE
        except asyncio.CancelledError:
            if not stopper.gave_up:
                raise
            err_stream.write(f"{CONTROLLER}: interrupted before the run started\n")
            return ExitCode.INTERRUPTED
        stopper.run_started()
        if options.timeout is not None:
            timer = loop.call_later(options.timeout, stopper.request, RunOutcome.TIMEOUT,
                                    f"timed out after {options.timeout:g} s")
        progress = asyncio.create_task(_every(progress_interval, printer.progress_line))
        summary = await supervisor.wait()
        if session.traffic is not None and isinstance(printer, Printer):
            printer.traffic(session.traffic.final_update)
        return exit_code_for(summary.outcome)
    finally:
        watch.cancel()
        if timer is not None:
            timer.cancel()
        if progress is not None:
            progress.cancel()
        for signum in handled:
            loop.remove_signal_handler(signum)
        await _close_within(session, err_stream)
        if isinstance(printer, Printer):
            printer.flush()  # what tasks said last, after the run's end


def _session(options: RunOptions, supervisor: Supervisor | None, printer: Printer | JsonPrinter) -> Session:
    """The session of ``options`` (or around ``supervisor``). The remote hosts are printed
    first, before the session is made: its launchers and supervisor are most of the
    controller's code, and loading them was most of what it did before that line (a start
    on a loaded machine was silent for seconds), and no host is contacted before it."""
    if supervisor is not None:
        from tui.core.session import Session

        return Session(supervisor)
    hosts = HostBoard(options.config, printer.handle)
    hosts.begin()
    from tui.core.session import Session

    return Session.from_options(options, hosts=hosts)


#: How long closing the session may take once the run is over (every task is stopped by
#: then; what is left is connections and monitors) before the controller ends regardless.
SESSION_CLOSE_LIMIT = 60.0


async def _close_within(session: Session, err: TextIO) -> None:
    """Close the session; a close that hangs (a connection whose peer never answers) is given
    up on after :data:`SESSION_CLOSE_LIMIT`, so the controller always ends."""
    try:
        await asyncio.wait_for(session.close(), SESSION_CLOSE_LIMIT)
    except asyncio.TimeoutError:
        err.write(f"tfdist  | warning: closing took longer than {SESSION_CLOSE_LIMIT:.0f} s; "
                  "ending without waiting for it\n")


async def _every(interval: float, action: Callable[[], None]) -> None:
    while True:
        await asyncio.sleep(interval)
        action()


def main(options: RunOptions) -> int:
    """Run headless in a fresh event loop; return the process exit code."""
    # Paced: hundreds of tasks' lines are handled a tick's worth per wake-up (tui.common.paced_loop).
    with asyncio.Runner(loop_factory=paced_loop) as runner:
        return int(runner.run(run_headless(options)))

