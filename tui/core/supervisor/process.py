"""One task's process: launch it, read its output, and record its exit.

What a line of output means (a protocol event, a hint, progress) is decided in
:func:`on_output`; how an exit is recorded (which state, which reason) in :func:`record_exit`.
A failure is then handed to the run's :attr:`~tui.core.supervisor.records.RunRecord.on_failure`
(the restart policy, :mod:`tui.core.supervisor.recovery`).
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import logging
from collections.abc import Mapping, Sequence

from trainer import protocol
from tui.common.quick import maker
from tui.config.cluster import Job
from tui.core.clock import Wake, first_completed
from tui.core.describe import describe_event
from tui.core.events import Level, TaskHint, TaskHintCleared, TaskOutput, TrainerEvent
from tui.core.exits import describe_exit, last_error
from tui.core.hints import CREATE_SESSION, hint_for_exit, hints_in
from tui.core.supervisor.records import RunRecord, TaskRecord
from tui.core.supervisor.unreachable import lease_ran_out, out_of_reach_note, task_lost
from tui.core.task_state import TaskState
from tui.launch.base import WARM_REASON, HandsOutput, LaunchError, PortProber, RunningTask
from tui.launch.lines import OutputBatch, Stream
from tui.program.base import Readiness
from tui.program.end_rules import PORT_PROBE_INTERVAL, port_open

log = logging.getLogger(__name__)

#: After a process exits, how long its remaining output may take to arrive. A grandchild
#: that inherited the pipe could hold it open forever; we stop reading then.
DRAIN_TIMEOUT = 2.0
TAIL_LINE_CHARS = 2000
#: A hint read from a task's output is taken back once the task has trained on this many
#: seconds with no new line showing that failure.
HINT_OUTLIVED = 10.0


async def launch(run: RunRecord, task: TaskRecord) -> str | None:
    """Start the task's process; return why it could not start, or None."""
    finished = asyncio.Event()
    run.launching.add(finished)
    task.launched = finished
    try:
        return await _launch(run, task)
    finally:
        run.launching.discard(finished)
        finished.set()


async def _launch(run: RunRecord, task: TaskRecord) -> str | None:
    task.new_launch()
    plan = task.plan
    starting = asyncio.ensure_future(run.launcher.start(plan.spec, plan.host, plan.argv, plan.env, plan.cwd))
    ending = asyncio.ensure_future(run.entered_ending())
    try:
        await asyncio.wait({starting, ending}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        ending.cancel()
    if not starting.done():
        # Stopped while it was starting (a warm pool importing TensorFlow takes 5-180 s):
        # the stop does not wait for that (a core asked to close did, and outlived its app). The task
        # stays not started; what the launcher still makes is killed when it comes.
        _ABANDONED.add(starting)
        starting.add_done_callback(_kill_abandoned)
        for event in (task.loaded, task.settled, task.exited):
            event.set()
        return None
    try:
        process = starting.result()
    except (LaunchError, OSError) as exc:
        task.exit_code = None
        run.set_state(task, TaskState.FAILED, reason=f"could not start: {exc}")
        task.exited.set()
        task.settled.set()
        task.loaded.set()
        return f"{task.name} could not start: {exc}"
    task.process = process
    task.pid = process.pid
    task.launches += 1
    task.launched_at = run.clock.monotonic()
    task.last_activity = run.clock.monotonic()
    # A launcher may say more than the protocol asks: forked warm, or a notice (its warm
    # pool failed, so this task started cold).
    run.set_state(task, TaskState.STARTING, reason=WARM_REASON if getattr(process, "warm", False) else "")
    notice = getattr(process, "launch_notice", "")
    if notice:  # the controller's (its warm pools'), not the task's: said once, as tfdist
        run.notify(Level.WARNING, notice)
    run.spawn(_watch(run, task, process))
    if task.job is Job.EVALUATOR:
        # TensorFlow starts no server for an evaluator and no task waits for it: it is up
        # once it runs (what it evaluates comes as eval events).
        became_ready(run, task)
    if run.trains(task):
        run.hangs.started(task.name, run.clock.monotonic())
    probes = plan.host.is_local or isinstance(run.launcher, PortProber)
    if run.program.readiness is Readiness.SERVER and probes:
        run.spawn(_probe_port(run, task))
    return None


#: Launches a stop left behind, kept until they end (the loop holds tasks weakly).
_ABANDONED: set[asyncio.Future[RunningTask]] = set()
_KILLING: set[asyncio.Future[None]] = set()


def _kill_abandoned(starting: asyncio.Future[RunningTask]) -> None:
    _ABANDONED.discard(starting)
    if starting.cancelled() or starting.exception() is not None:
        return  # nothing started (the launcher closed under it, or it failed)
    process = starting.result()

    async def kill() -> None:
        await process.kill()
        await process.wait()

    def forget(future: asyncio.Future[None]) -> None:
        _KILLING.discard(future)
        if not future.cancelled():
            future.exception()  # retrieved: a task already gone is not worth a warning

    future = asyncio.ensure_future(kill())
    _KILLING.add(future)
    future.add_done_callback(forget)


async def _probe_port(run: RunRecord, task: TaskRecord) -> None:
    """A program that says nothing when its server is up is ready once its port accepts
    connections: on this machine, tried from here; on a remote host, from that host through
    its launcher (an SSH host's sshd), where it can tell (else TensorFlow's log line says so)."""
    exited = task.exited
    host, port = task.plan.host, task.plan.port
    while task.state is TaskState.STARTING and not exited.is_set():
        if host.is_local:
            accepting: bool | None = await port_open(host.address, port, timeout=PORT_PROBE_INTERVAL)
        elif isinstance(run.launcher, PortProber):
            accepting = await run.launcher.port_open(host, port, PORT_PROBE_INTERVAL)
        else:
            accepting = None
        if accepting is None:
            return  # this launcher cannot tell: the task's own lines must say it
        if accepting:
            became_ready(run, task)
            return
        await first_completed({Wake.DONE: exited.wait(), Wake.TIMEOUT: run.clock.sleep(PORT_PROBE_INTERVAL)})


def became_ready(run: RunRecord, task: TaskRecord) -> None:
    """The task's server is up (its ``ready`` event, TensorFlow's line, or its port)."""
    if task.state is TaskState.UNREACHABLE and task.before_unreachable is TaskState.STARTING:
        # Said while its host was out of reach (the line came late): up once it is back.
        task.up_at = run.clock.monotonic()
        task.before_unreachable = TaskState.RUNNING
        task.settled.set()
    elif task.state is TaskState.STARTING:
        task.up_at = run.clock.monotonic()
        run.set_state(task, TaskState.RUNNING)
        task.settled.set()


async def _watch(run: RunRecord, task: TaskRecord, process: RunningTask) -> None:
    """Pump the task's output until it exits, then record the exit."""
    pump = asyncio.create_task(_pump(run, task, process))
    code: int | None = None
    lost = ""
    try:
        code = await process.wait()
    except LaunchError as exc:  # the connection to its host was lost: no exit code
        # Not a failure of the task: its host is out of reach. Wait for it (or the run's
        # limit), then judge what became of the task (tui.core.supervisor.unreachable).
        lost = await task_lost(run, task, str(exc))
    except Exception as exc:  # a bug in a launcher: keep the traceback in the log
        log.exception("%s: waiting for the process failed", task.name)
        run.notify(Level.ERROR, f"lost track of the process: {exc}", task.name)
        lost = f"lost track of the process: {exc}"
    if not pump.done():
        await first_completed({Wake.DONE: pump, Wake.TIMEOUT: run.clock.sleep(DRAIN_TIMEOUT)})
    record_exit(run, task, code, lost)


async def _pump(run: RunRecord, task: TaskRecord, process: RunningTask) -> None:
    try:
        if isinstance(process, HandsOutput):
            # Each batch acted on from the read that completed it: a task's wake-up, a future
            # and two generators' resumptions per line were a tenth of the CPU that 256 tasks
            # stepping five times a second cost.
            await process.hand_output(functools.partial(on_output, run, task))
            return
        async for batch in process.output():
            on_output(run, task, batch)
    except Exception as exc:
        log.exception("%s: reading output failed", task.name)
        run.notify(Level.WARNING, f"stopped reading output: {exc}", task.name)


#: A task in one of these states has no server up (yet).
_NOT_UP = frozenset({TaskState.PENDING, TaskState.STARTING, TaskState.BACKOFF})
#: Seconds every task must have been up before "CreateSession still waiting" means a peer is
#: missing rather than one that has just come up.
CREATE_SESSION_GRACE = 10.0


def _all_up_for(run: RunRecord, seconds: float) -> bool:
    if any(t.state in _NOT_UP for t in run.tasks.values()):
        return False
    last_up = max((t.up_at for t in run.tasks.values() if t.up_at is not None), default=None)
    return last_up is None or run.clock.monotonic() - last_up >= seconds


def on_output(run: RunRecord, task: TaskRecord, batch: OutputBatch) -> None:
    """A batch of the task's output lines: publish them, keep the last ones for the tail,
    offer the hint a line shows, and act on the protocol events lines carry, in the order of
    the lines. The work per line is a few searches of the whole batch: a flood's plain lines
    cost no Python call each, so a task that prints fast is not slowed by its pipe."""
    now = run.clock.time()
    task.last_activity = run.clock.monotonic()
    lines = batch.lines
    joined = "\n".join(lines)
    pieces = _pieces(batch)
    # Events come as whole lines, on stdout (and, for a program whose own log lines mean
    # something, on stderr); a piece of an over-long line never counts.
    reads = batch.stream is Stream.STDOUT or run.program.reads_stderr
    found = task.reader.read_batch(lines, joined, now, pieces) if reads else {}
    noise = task.reader.noise_in(lines, joined, pieces)
    # Only a protocol line is shown as an event; metrics read from log text stay text.
    shown_as_event = {index: events[0] for index, events in found.items()
                      if len(events) == 1 and protocol.parse_event(lines[index]) is not None} if found else {}
    _keep_tail(task, lines, shown_as_event)
    # (Read on after a hint from output: a repeat keeps it standing, see _stepped.)
    hints = {} if task.hint and task.hint_seen is None else hints_in(lines, joined)
    start = 0
    # Cut where a line means something, so that what it means follows the lines before it.
    for index in sorted({*found, *hints}):
        _publish_lines(run, task, batch, start, index + 1, shown_as_event, noise, now)
        start = index + 1
        if index in hints:
            _on_hint(run, task, hints[index])
        for each in found.get(index, ()):
            on_event(run, task, each, now)
    if start < len(lines):
        _publish_lines(run, task, batch, start, len(lines), shown_as_event, noise, now)


#: What every output line and step makes, made at once (tui.common.quick).
_make_output = maker(TaskOutput)
_make_trainer_event = maker(TrainerEvent)
#: No line's index (what most batches' pieces, events and noise are).
_NONE: frozenset[int] = frozenset()


def _pieces(batch: OutputBatch) -> frozenset[int]:
    """Indices of the batch's lines that are pieces of an over-long line."""
    if not batch.continued and not batch.partial:
        return _NONE
    last = len(batch.lines) - 1
    return frozenset(index for index, piece in ((0, batch.continued), (last, batch.partial)) if piece)


def _publish_lines(run: RunRecord, task: TaskRecord, batch: OutputBatch, start: int, end: int,
                   events: Mapping[int, protocol.Event], noise: frozenset[int], now: float) -> None:
    """Publish lines ``start`` to ``end`` of ``batch`` as one :class:`TaskOutput`."""
    whole = start == 0 and end == len(batch.lines)
    run.publish(_make_output(
        task=task.name, stream=batch.stream, lines=batch.lines if whole else batch.lines[start:end],
        events=frozenset(index - start for index in events if start <= index < end) if events else _NONE,
        noise=frozenset(index - start for index in noise if start <= index < end) if noise else _NONE,
        continued=batch.continued and start == 0, partial=batch.partial and end == len(batch.lines), t=now))


def _keep_tail(task: TaskRecord, lines: Sequence[str], events: Mapping[int, protocol.Event]) -> None:
    """The batch's last lines into the task's tail (an event line in its described form)."""
    task.launch_lines += len(lines)
    first = max(0, len(lines) - (task.tail.maxlen or len(lines)))
    for index in range(first, len(lines)):
        event = events.get(index)
        text = describe_event(event) if event is not None else lines[index]
        if len(text) > TAIL_LINE_CHARS:
            text = text[:TAIL_LINE_CHARS] + f"... ({len(text) - TAIL_LINE_CHARS} more characters)"
        task.tail.append(text)


def _on_hint(run: RunRecord, task: TaskRecord, hint: str) -> None:
    if task.hint:
        if hint == task.hint and task.hint_seen is not None:
            task.hint_seen = run.clock.monotonic()  # the failure goes on
        return
    # Waiting for a session while a peer is still starting is what a session does on a busy
    # machine, not a failure: the hint waits until every task has been up for a while
    # (TensorFlow repeats the line every 10 s; one in flight as the last peer came up says
    # nothing).
    if hint != CREATE_SESSION or _all_up_for(run, CREATE_SESSION_GRACE):
        offer_hint(run, task, hint, from_output=True)
    elif not task.withheld_hint:
        task.withheld_hint = hint  # given after all if the task then fails


def on_event(run: RunRecord, task: TaskRecord, event: protocol.Event, now: float) -> None:
    """Act on one event of the task's (from the protocol, or read from its log)."""
    if type(event) is protocol.Step:  # nearly every event: what a step does, without the others' checks
        _on_step(run, task, event, now)
        return
    if isinstance(event, protocol.Ready) and not event.pid and task.pid:
        event = dataclasses.replace(event, pid=task.pid)  # read from TensorFlow's log line
    elif isinstance(event, protocol.Eval) and not event.global_step:
        # An evaluator's line names no step: it evaluated what training had reached.
        event = dataclasses.replace(event, global_step=run.progress.global_step)
    progressed = run.progress.update(task.name, event, now)
    run.publish(TrainerEvent(task=task.name, event=event, t=now))
    if progressed:
        run.publish_progress()
    if isinstance(event, protocol.Initialized) and task.name in run.awaiting_resume:
        index = run.awaiting_resume.pop(task.name)
        run.incidents[index] = dataclasses.replace(run.incidents[index],
                                                   resumed_step=event.global_step)
    elif isinstance(event, protocol.Done):
        task.last_step = event.global_step
    # Readiness: with --hold, `loaded` means the graph is built and `go` may be sent;
    # `ready` means its server is up.
    if isinstance(event, protocol.Loaded):
        task.loaded.set()
    elif isinstance(event, protocol.Ready):
        task.tf_server = task.tf_server or bool(event.tf_version)
        became_ready(run, task)
    elif isinstance(event, protocol.Step) and run.trains(task):
        _stepped(run, task, event)


def _on_step(run: RunRecord, task: TaskRecord, event: protocol.Step, now: float) -> None:
    """:func:`on_event` for a step."""
    task.last_step = event.global_step
    if event.coordinator and event.by_worker:
        _functions_finished(run, event)
    progressed = run.progress.update(task.name, event, now)
    run.publish(_make_trainer_event(task=task.name, event=event, t=now))
    if progressed:
        run.publish_progress()
    if run.trains(task):
        _stepped(run, task, event)


def _functions_finished(run: RunRecord, event: protocol.Step) -> None:
    """The coordinator's count of each worker's finished functions: a restarted worker
    whose count grows past what it was at its restart has rejoined (it reports nothing
    itself), at the coordinator's step."""
    run.worker_functions = event.by_worker
    for name, baseline in list(run.resume_baseline.items()):
        index = run.tasks[name].plan.spec.index
        if index < len(event.by_worker) and event.by_worker[index] > baseline:
            del run.resume_baseline[name]
            number = run.awaiting_resume.pop(name, None)
            if number is not None:
                run.incidents[number] = dataclasses.replace(run.incidents[number],
                                                            resumed_step=event.global_step)


def _stepped(run: RunRecord, task: TaskRecord, event: protocol.Step) -> None:
    """A task that trains reported a step."""
    task.stepped = True
    if task.hint and task.hint_seen is not None and run.clock.monotonic() - task.hint_seen >= HINT_OUTLIVED:
        # It trains on past the failure its hint named (TF2's coordinator after a worker went):
        # the hint is no longer true. A line showing the failure again gives it again.
        task.hint, task.hint_seen = "", None
        run.publish(TaskHintCleared(task=task.name, reason=f"training on, no such failure for "
                                                           f"{HINT_OUTLIVED:.0f} s", t=run.clock.time()))
    run.hangs.step(task.name, event.global_step, event.target, run.clock.monotonic())
    if run.hangs.reached:  # (before the target nobody can hang: no wake-up per step)
        run.hang_check.set()


def record_exit(run: RunRecord, task: TaskRecord, code: int | None, lost: str = "") -> None:
    """The task's process exited with ``code``, or (None) was lost with its connection, for
    the reason ``lost``: record its final state and judge a failure."""
    task.exit_code = code
    settled = task.settled_state
    was_running = settled is TaskState.RUNNING
    verdict = task.verdict
    if verdict is not None:
        state, reason = verdict.state, verdict.reason
        if code is None:
            reason = f"{reason} ({lost})" if lost else reason
    elif code is None:
        state, reason = TaskState.FAILED, lost or "lost: no exit status came"
    elif code == 0:
        state, reason = TaskState.SUCCEEDED, ""
    else:
        before = " before reporting ready" if settled is TaskState.STARTING else ""
        # Why, where known: the controller's own kill (a stall), or the error it died of (an
        # exit code of its own: a signal's kill is no sign of an error it printed).
        why = task.killed_for or (last_error(task.launch_tail()) if code > 0 else "")
        state, reason = TaskState.FAILED, describe_exit(code) + before + (f" ({why})" if why else "") \
            + out_of_reach_note(run, task)
        if not task.hint:  # what it said while waiting for its peers, if it then died of it
            offer_hint(run, task, task.withheld_hint or None)
        # It died by itself: the exit code alone may tell why. (Not when its lease ran out:
        # its watcher's KILL is no sign of memory running out.)
        if not task.hint and not lease_ran_out(run, task):
            offer_hint(run, task, hint_for_exit(code))
    if state is TaskState.SUCCEEDED and task.hint:
        # A task that ended well did not die of the failure its hint named (a TF2 chief whose
        # coordinator logged UNAVAILABLE for a lost worker, then finished within the hint's 10 s).
        task.hint, task.hint_seen = "", None
        run.publish(TaskHintCleared(task=task.name, reason="succeeded", t=run.clock.time()))
    run.set_state(task, state, reason=reason)
    task.last_exit = (state, reason)
    task.exited.set()
    task.settled.set()
    task.loaded.set()
    # (Any task that reported steps: with a chief job, a worker may have too.)
    run.hangs.exited(task.name)
    if task is run.chief and code == 0 and state is TaskState.SUCCEEDED and run.program.ends_left_behind:
        run.hangs.chief_done(task.name, run.clock.monotonic())
        run.hang_check.set()
    run.flush_progress()
    if run.progress.worker_exited(task.name):
        run.publish_progress()
    if verdict is not None and verdict.then_restart:
        run.set_state(task, TaskState.BACKOFF, reason="restarting")
    elif state is TaskState.FAILED and not run.recovering and not run.stop_requested:
        # (During a cluster restart every failure is a casualty of the one being recovered
        # from.)
        run.on_failure(task, was_running, reason)
    run.check_workers_done()


def offer_hint(run: RunRecord, task: TaskRecord, hint: str | None, *, from_output: bool = False) -> None:
    """Keep the first hint of a launch and tell the front ends, once per launch."""
    if hint and not task.hint:
        task.hint = hint
        task.hint_seen = run.clock.monotonic() if from_output else None
        run.publish(TaskHint(task=task.name, hint=hint, t=run.clock.time()))
