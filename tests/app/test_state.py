"""The dashboard's bookkeeping, without Textual."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from tests.app.scripted import T0, TASKS, failed_history, running_history
from tests.support import with_progress
from trainer import protocol
from trainer.settings import TrainingSettings
from tui.app.state import LOG_LINES_PER_TASK, MAX_LINE_CHARS, MERGED_LOG_LINES, Dashboard, TaskLog
from tui.core import hints
from tui.core.events import (
    ControllerEvent,
    ProgressUpdate,
    RunStarted,
    TaskHint,
    TaskHintCleared,
    TaskOutput,
    TaskStateChanged,
    TrainerEvent,
)
from tui.core.progress import ProgressSnapshot, ProgressTracker, WorkerProgress
from tui.core.run_facts import RunFacts
from tui.core.task_state import TaskState
from tui.launch.lines import Stream


def folded(events) -> Dashboard:
    d = Dashboard(TrainingSettings(), clock=lambda: T0 + 40)
    for e in with_progress(events):
        d.apply(e)
    return d


def test_rows_follow_states_steps_and_rates() -> None:
    d = folded(running_history(TrainingSettings()))
    assert [r.state for r in d.rows.values()] == [TaskState.RUNNING] * 4
    assert d.rows["worker0"].global_step == 1200 and d.rows["worker1"].examples_per_sec == 4800 + 25 * 30
    assert d.global_step == 1200 and d.target == 3000
    assert d.aggregate_rate == (5000 + 40 * 30) + (4800 + 25 * 30)
    assert d.rows["ps0"].output_age(T0 + 40) == "36s"
    assert d.placement is not None and d.placement.max_mean_ratio > 1.9
    # one throughput point per second of event time, per worker too
    assert len(d.rate_history) == 30 and len(d.worker_history["worker0"]) == 30
    # 1200 steps in the last 29 s of events: (3000 - 1200) / (1160 / 29) s to go
    assert d.eta_seconds() == (3000 - 1200) / ((1200 - 40) / 29)


def test_failure_is_in_the_row_and_the_log() -> None:
    d = folded(failed_history(TrainingSettings()))
    row = d.rows["worker1"]
    assert row.state is TaskState.FAILED and row.exit_code == 1 and row.state_text == "failed (1)"
    assert "worker1" not in d.worker_rates
    assert list(d.logs["worker1"].lines)[-3:] == ["trainer: worker1: UnavailableError: Socket closed",
                                                   f"── hint: {hints.UNAVAILABLE}",
                                                   "── failed: exited with code 1"]


def test_the_hosts_line_is_the_cores_in_the_merged_log_once_per_change() -> None:
    from tui.core.events import HostRow, HostsProgress
    from tui.core.host_state import HostState

    d = Dashboard(TrainingSettings(), clock=lambda: T0)
    waiting = HostsProgress(hosts=(HostRow("h0", "10.0.0.1", HostState.WAITING),))
    connecting = HostsProgress(hosts=(HostRow("h0", "10.0.0.1", HostState.CONNECTING),))
    for event in (waiting, connecting, connecting):
        d.apply(event)
    assert d.hosts is connecting
    assert list(d.merged.lines) == [f"tfdist  | {waiting.line}", f"tfdist  | {connecting.line}"]
    out = HostsProgress(hosts=(HostRow("h0", "10.0.0.1", HostState.UNREACHABLE, "no answer for 6 s"),))
    d.apply(out)
    assert list(d.merged.lines)[-2:] == [f"tfdist  | {out.line}",
                                         "tfdist  | host h0 (10.0.0.1): unreachable: no answer for 6 s"]


def test_a_lost_core_leaves_no_row_running() -> None:
    """The core's process was killed: its tasks died with it, and the screen says so."""
    from tui.core.inbox import CoreLost

    d = folded(failed_history(TrainingSettings()))
    d.apply(CoreLost("the controller's core process ended (signal 9)"))
    assert {n: r.state for n, r in d.rows.items()} == {
        "ps0": TaskState.STOPPED, "ps1": TaskState.STOPPED, "worker0": TaskState.STOPPED,
        "worker1": TaskState.FAILED}  # (a task that had ended keeps its end)
    assert "signal 9" in d.rows["worker0"].reason and not d.active_tasks
    assert list(d.logs["ps0"].lines)[-1] == "── stopped: the controller's core process ended (signal 9)"


def test_a_hint_stays_beside_its_task_until_the_task_starts_again() -> None:
    d = folded(failed_history(TrainingSettings()))
    assert d.rows["worker1"].hint == hints.UNAVAILABLE
    assert d.hints == [("worker1", hints.UNAVAILABLE)]
    assert f"── hint: {hints.UNAVAILABLE}" in d.logs["worker1"].lines
    d.apply(TaskStateChanged(task="worker1", old=TaskState.FAILED, new=TaskState.STARTING, pid=1010,
                             t=T0 + 38))
    assert d.hints == []


def test_the_chiefs_initialized_step_is_authoritative_after_a_cluster_restart() -> None:
    # (The rule lives in the core's ProgressTracker; the dashboard shows its snapshots.)
    events = running_history(TrainingSettings())
    assert folded(events).global_step == 1200
    events.append(TrainerEvent(task="worker0", event=protocol.Initialized(
        role="worker", index=0, global_step=1000, seconds=3.0, is_chief=True), t=T0 + 45))
    d = folded(events)
    assert d.global_step == 1000 and d.eta_seconds() is None
    events.append(TrainerEvent(task="worker1", event=protocol.Initialized(
        role="worker", index=1, global_step=900, seconds=3.0), t=T0 + 45))
    assert folded(events).global_step == 1000  # another worker's view is not


def test_buffers_are_bounded_and_lines_clipped() -> None:
    d = folded([RunStarted(run_id="r", run_dir=Path("x"), tasks=TASKS,
                           settings=TrainingSettings(), t=T0)])
    for i in range(LOG_LINES_PER_TASK + 500):
        d.apply(TaskOutput(task="worker0", stream=Stream.STDOUT, lines=(f"line {i}",), t=T0))
    d.apply(TaskOutput(task="worker1", stream=Stream.STDOUT, lines=("x" * 10_000,), t=T0))
    assert len(d.logs["worker0"].lines) == LOG_LINES_PER_TASK
    assert d.logs["worker0"].lines[-1] == f"line {LOG_LINES_PER_TASK + 499}"
    assert len(d.merged.lines) <= MERGED_LOG_LINES
    assert len(d.logs["worker1"].lines[-1]) == MAX_LINE_CHARS + 1


def test_a_seconds_point_of_the_throughput_chart_is_its_latest_rate() -> None:
    """A run shorter than a second still charts its rate: not only the first update of a
    second (a worker's first step, with no rate yet) counts."""
    d = Dashboard(TrainingSettings())
    for t, rate in ((T0 + 0.1, 0.0), (T0 + 0.6, 640.0), (T0 + 1.2, 700.0), (T0 + 0.9, 1.0)):
        d.apply(ProgressUpdate(progress=training(rate), t=t))
    assert list(d.rate_history) == [640.0, 700.0]  # (an update from a second passed is late)


def training(rate: float) -> ProgressSnapshot:
    """Progress while worker0 trains at ``rate`` examples/s."""
    return dataclasses.replace(ProgressSnapshot.empty(60), examples_per_sec=rate, steps_per_sec=rate / 64,
                               workers=(WorkerProgress("worker0", 1, 1, rate, None),))


def test_a_run_that_ends_within_the_second_of_its_last_step_keeps_that_seconds_rate() -> None:
    """Its workers' end (no worker left: a rate of 0) in the same second, or in one late burst
    of updates with its last steps, does not take the second's rate back; the next second is 0."""
    d = Dashboard(TrainingSettings())
    ended = ProgressSnapshot.empty(60)
    for t, progress in ((T0 + 0.2, training(640.0)), (T0 + 0.7, ended), (T0 + 1.1, ended)):
        d.apply(ProgressUpdate(progress=progress, t=t))
    assert list(d.rate_history) == [640.0, 0.0] and list(d.step_rate_history) == [10.0, 0.0]


def test_a_batch_longer_than_a_pane_keeps_its_last_lines_each_inert() -> None:
    d = folded([RunStarted(run_id="r", run_dir=Path("x"), tasks=TASKS,
                           settings=TrainingSettings(), t=T0)])
    lines = tuple(f"line {i} \x1b]52;c;eA==\x07" for i in range(MERGED_LOG_LINES + 100))
    d.apply(TaskOutput(task="worker0", stream=Stream.STDOUT, lines=lines,
                       noise=frozenset({len(lines) - 1}), t=T0))
    kept = list(d.logs["worker0"].lines)
    assert len(kept) == LOG_LINES_PER_TASK and kept[-1] == f"line {len(lines) - 2} "
    assert list(d.merged.lines)[-1] == f"worker0 | line {len(lines) - 2} "
    assert len(d.merged.lines) == MERGED_LOG_LINES


def test_each_reader_of_a_log_takes_the_lines_it_has_not_shown() -> None:
    log = TaskLog()
    first = second = log.added  # two panes showing the same task (the split view)
    for n in range(3):
        log.add(f"line {n}")
    assert log.since(first) == ["line 0", "line 1", "line 2"]
    first = log.added
    log.add("line 3")
    assert log.since(first) == ["line 3"]  # the other pane's lines are still there for it:
    assert log.since(second) == ["line 0", "line 1", "line 2", "line 3"]
    assert log.since(log.added) == []
    for n in range(4, LOG_LINES_PER_TASK + 10):
        log.add(f"line {n}")
    assert log.since(second) == list(log.lines)  # fell behind: what is still kept


def test_event_lines_are_shown_described_not_raw() -> None:
    d = folded(running_history(TrainingSettings()))
    raw = protocol.Ready(role="ps", index=0, pid=1, address="localhost:1", tf_version="2.21.0")
    d.apply(TaskOutput.line("ps0", raw.to_json(), is_event=True, t=T0 + 41))
    d.apply(TrainerEvent(task="ps0", event=raw, t=T0 + 41))
    assert raw.to_json() not in d.logs["ps0"].lines
    assert d.logs["ps0"].lines[-1] == "ready on localhost:1 (pid 1, TensorFlow 2.21.0)"
    assert d.rows["ps0"].tf_version == "2.21.0"


def test_restarts_are_the_cores_count_and_a_relaunch_starts_from_none() -> None:
    events = running_history(TrainingSettings())
    events.append(TaskStateChanged(task="worker1", old=TaskState.RUNNING, new=TaskState.STOPPED, t=T0 + 41))
    events.append(TaskStateChanged(task="worker1", old=TaskState.STOPPED, new=TaskState.STARTING,
                                   restarts=1, t=T0 + 42))
    d = folded(events)
    assert d.rows["worker1"].restarts == 1
    d.apply(RunStarted(run_id="again", run_dir=Path("y"), tasks=TASKS,
                       settings=TrainingSettings(), t=T0 + 50))
    # A new run: none of its tasks was restarted (the app counted launches across runs).
    assert d.rows["worker1"].restarts == 0 and d.global_step == 0 and d.placement is None
    d.apply(TaskStateChanged(task="worker1", old=TaskState.PENDING, new=TaskState.STARTING, t=T0 + 51))
    assert d.rows["worker1"].restarts == 0


def test_a_hint_taken_back_by_the_core_leaves_the_screen() -> None:
    events = running_history(TrainingSettings())
    events.append(TaskHint(task="worker1", hint="stalled: no progress for 9 s", t=T0 + 41))
    d = folded(events)
    assert d.hints == [("worker1", "stalled: no progress for 9 s")]
    d.apply(TaskHintCleared(task="worker1", reason="progressing again", t=T0 + 45))
    assert d.hints == []
    assert d.logs["worker1"].lines[-1] == "── hint taken back: progressing again"


def test_the_step_of_a_row_is_the_global_step() -> None:
    d = folded(running_history(TrainingSettings()))
    # (The scripted workers report local steps of half their global step.)
    assert (d.rows["worker0"].global_step, d.rows["worker1"].global_step) == (1200, 1200)


def test_each_tasks_share_of_its_host_opens_its_log() -> None:
    import dataclasses

    tasks = (dataclasses.replace(TASKS[0], share="1 core", share_brief="1c"),
             *(dataclasses.replace(task, share="", share_brief="") for task in TASKS[1:]))
    d = folded([RunStarted(run_id="r", run_dir=Path("/r"), tasks=tasks, settings=TrainingSettings(), t=T0)])
    assert d.logs["ps0"].lines[-1] == "── ps0 on localhost: 1 core"
    assert (d.rows["ps0"].share, d.rows["worker0"].share) == ("1c", "")  # the table's column
    assert not any("core" in line for line in d.logs["worker0"].lines)  # no share, no line


def test_an_unreachable_task_shows_so_in_its_row_and_its_log() -> None:
    """Its host does not answer: the row says unreachable (not failed), and why."""
    d = folded([*running_history(TrainingSettings()),
                TaskStateChanged(task="worker1", old=TaskState.RUNNING, new=TaskState.UNREACHABLE, pid=1003,
                                 reason="host gpu2 does not answer", t=T0 + 41)])
    row = d.rows["worker1"]
    assert row.state is TaskState.UNREACHABLE and row.state_text == "unreachable" and row.exit_code is None
    assert list(d.logs["worker1"].lines)[-1] == "── unreachable: host gpu2 does not answer"
    assert "worker1" in d.active_tasks
    d.apply(TaskStateChanged(task="worker1", old=TaskState.UNREACHABLE, new=TaskState.RUNNING, pid=1003,
                             t=T0 + 50))
    assert d.rows["worker1"].state is TaskState.RUNNING
    assert list(d.logs["worker1"].lines)[-1] == "── reachable again: running"


def test_a_frame_folded_at_once_equals_its_events_folded_one_by_one() -> None:
    """apply_all gathers output lines across events (issue 35); what the logs, the merged log
    and the rows end up with is what apply gives one event at a time."""
    from hypothesis import given, settings
    from hypothesis import strategies as st

    base = with_progress(running_history(TrainingSettings()))
    started = [e for e in base if isinstance(e, RunStarted)]
    rest = [e for e in base if not isinstance(e, RunStarted)]
    text = st.text(alphabet=st.sampled_from("ab \x1b[m\t\r\x07é"), max_size=12)
    extra = st.builds(lambda task, lines: TaskOutput(task=task, stream=Stream.STDOUT, lines=tuple(lines),
                                                      t=T0 + 1),
                      st.sampled_from([t.name for t in TASKS]), st.lists(text, min_size=1, max_size=3))

    @settings(max_examples=60, deadline=None)
    @given(st.lists(st.one_of(st.sampled_from(rest), extra), max_size=40), st.integers(1, 8))
    def check(events: list[object], frame: int) -> None:
        one, batched = Dashboard(TrainingSettings()), Dashboard(TrainingSettings())
        for event in [*started, *events]:
            one.apply(event)  # type: ignore[arg-type]
        stream = [*started, *events]
        for i in range(0, len(stream), frame):
            batched.apply_all(stream[i:i + frame])  # type: ignore[arg-type]
        assert list(batched.merged.lines) == list(one.merged.lines)
        def logs(d: Dashboard) -> dict[str, list[str]]:
            return {name: list(log.lines) for name, log in d.logs.items()}

        assert logs(batched) == logs(one)
        assert batched.rows == one.rows and batched.applied == one.applied

    check()


def test_an_update_moves_the_rows_and_charts_as_if_every_entry_were_new() -> None:
    """Workers' entries that did not change since the last update (the same objects, as they
    cross from the core) are passed over: what the rows and charts show is what folding every
    entry anew shows, after each event, a restart and a worker's own steps included."""
    tracker = ProgressTracker(3000)
    events: list[ControllerEvent] = [RunStarted(run_id="r", run_dir=Path("x"), tasks=TASKS,
                                                settings=TrainingSettings(), t=T0)]
    for n in range(1, 41):
        t = T0 + n * 0.3
        task = "worker1" if n % 4 == 0 else "worker0"
        step = protocol.Step(role="worker", index=int(task[-1]), t=t, global_step=n, local_step=n,
                             loss=1 / n, examples_per_sec=100.0 + n, step_time=0.01)
        tracker.update(task, step, t)
        events.append(TrainerEvent(task=task, event=step, t=t))
        if n == 21:  # worker1 starts again: its rate shows once an update lists it again
            events.append(TaskStateChanged(task="worker1", old=TaskState.RUNNING, new=TaskState.STARTING,
                                           t=t))
        events.append(ProgressUpdate(progress=tracker.snapshot(), t=t))
    shared, fresh = Dashboard(TrainingSettings()), Dashboard(TrainingSettings())
    for event in events:
        shared.apply(event)
        if isinstance(event, ProgressUpdate):
            anew = tuple(dataclasses.replace(w) for w in event.progress.workers)
            event = ProgressUpdate(progress=dataclasses.replace(event.progress, workers=anew), t=event.t)
        fresh.apply(event)
        assert shared.rows == fresh.rows
        assert shared.worker_history == fresh.worker_history and shared.rate_history == fresh.rate_history
    assert shared.rows["worker1"].examples_per_sec == 100.0 + 40
    assert len(shared.worker_history["worker0"]) == 13  # (a point a second, T0 + 0.3 s to T0 + 12 s)


def test_a_finished_workers_rate_and_a_second_of_unknown_rates_are_not_shown() -> None:
    """A worker that ended has no rate now (its last one stayed in its row); a second in which
    no worker's rate is known (none stepped lately) adds no point to the aggregate charts,
    where a 0 would read as a stall."""
    d = folded(running_history(TrainingSettings()))
    assert d.rows["worker1"].examples_per_sec
    d.apply(TaskStateChanged(task="worker1", old=TaskState.RUNNING, new=TaskState.SUCCEEDED,
                             exit_code=0, t=T0 + 40.5))
    assert d.rows["worker1"].examples_per_sec is None
    d.apply(ProgressUpdate(progress=d.progress, t=T0 + 40.6))  # (an update naming it still)
    assert d.rows["worker1"].examples_per_sec is None
    points, step_points = len(d.rate_history), len(d.step_rate_history)
    unknown = dataclasses.replace(d.progress, examples_per_sec=0.0, steps_per_sec=None, workers=tuple(
        dataclasses.replace(w, examples_per_sec=None) for w in d.progress.workers))
    d.apply(ProgressUpdate(progress=unknown, t=T0 + 42))
    assert (len(d.rate_history), len(d.step_rate_history)) == (points, step_points)
    d.apply(ProgressUpdate(progress=dataclasses.replace(unknown, workers=d.progress.workers[:0]), t=T0 + 43))
    assert len(d.rate_history) == points + 1  # (no worker at all: the run's rate is its 0)


def test_a_program_without_a_step_target_shows_none_before_its_first_step() -> None:
    """The target is the core's (the run's facts): a program whose command never says how
    many steps it trains has none, whatever the settings' default."""
    d = Dashboard(TrainingSettings(), clock=lambda: T0)
    facts = RunFacts(description="running train.py", settings=(), target=0)
    d.apply(RunStarted(run_id="r", run_dir=Path("/tmp/r"), tasks=(), settings=TrainingSettings(steps=1000),
                       t=T0, facts=facts))
    assert d.target == 0 and d.figures.target is None
    d.apply(RunStarted(run_id="r2", run_dir=Path("/tmp/r2"), tasks=(), settings=TrainingSettings(steps=1000),
                       t=T0, facts=dataclasses.replace(facts, target=1000)))
    assert d.figures.target == 1000
