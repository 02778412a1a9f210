"""The core's inbox (tui.core.inbox): order kept, output bounded and counted, a happening a
later one makes moot replaced in its place, state changes, notices and results never dropped
nor passed."""

from __future__ import annotations

import threading

from trainer import protocol
from tui.core.events import (
    HostRow,
    HostsProgress,
    Level,
    Notice,
    ProgressUpdate,
    RunFinished,
    TaskHint,
    TaskOutput,
    TaskStateChanged,
    TrainerEvent,
)
from tui.core.host_state import HostReach, HostState
from tui.core.inbox import Inbox
from tui.core.progress import ProgressSnapshot
from tui.core.task_state import TaskState
from tui.core.traffic import TrafficUpdate
from tui.core.usage import Usage, UsageSample
from tui.launch.lines import Stream


def output(n: int) -> TaskOutput:
    return TaskOutput(task="worker0", stream=Stream.STDOUT, lines=tuple(f"line {i}" for i in range(n)), t=0.0)


def test_output_past_the_bound_is_counted_other_events_are_kept_in_order() -> None:
    inbox: Inbox[object] = Inbox(max_pending_output=5)
    first, over, notice = output(5), output(3), Notice(level=Level.INFO, text="kept")
    for item in (first, over, notice):
        inbox.put(item)
    inbox.count_dropped(2)  # (dropped before it reached this inbox)
    assert inbox.drain() == ([first, notice], 5)
    # A drain empties it: the bound starts again.
    inbox.put(over)
    assert inbox.drain() == ([over], 0)


def test_a_drain_hands_on_only_the_last_progress_update_in_the_firsts_place() -> None:
    inbox: Inbox[object] = Inbox()
    updates = [ProgressUpdate(progress=ProgressSnapshot.empty(n), t=float(n)) for n in range(3)]
    lines, notice = output(1), Notice(level=Level.INFO, text="kept")
    for item in (updates[0], lines, updates[1], notice, updates[2], output(2)):
        inbox.put(item)
    items, _ = inbox.drain()
    assert items[:3] == [updates[2], lines, notice] and len(items) == 4
    inbox.put(notice)
    assert inbox.drain() == ([notice], 0)  # none: nothing to keep


def test_a_drain_keeps_the_progress_just_before_a_tasks_end_too() -> None:
    """The core publishes the progress a worker's exit takes its rate out of just before it;
    one frame holding both, and the run's end, keeps that progress (it was all a short run's
    rate) and the last, each where it was."""
    inbox: Inbox[object] = Inbox()
    updates = [ProgressUpdate(progress=ProgressSnapshot.empty(n), t=float(n)) for n in range(4)]
    running = TaskStateChanged(task="worker0", old=TaskState.STARTING, new=TaskState.RUNNING)
    ended = TaskStateChanged(task="worker0", old=TaskState.RUNNING, new=TaskState.SUCCEEDED, exit_code=0)
    for item in (updates[0], running, updates[1], updates[2], ended, updates[3]):
        inbox.put(item)
    assert inbox.drain() == ([running, updates[2], ended, updates[3]], 0)


def test_wait_wakes_on_a_put_from_another_thread() -> None:
    inbox: Inbox[object] = Inbox()
    assert not inbox.wait(0.01)
    threading.Timer(0.05, inbox.put, args=(Notice(level=Level.INFO, text="x"),)).start()
    assert inbox.wait(30)


def usage(t: float) -> UsageSample:
    return UsageSample(t=t, tasks={"worker0": Usage(cpu_percent=t, rss_bytes=1)})


def hosts(*states: HostState, t: float = 0.0) -> HostsProgress:
    return HostsProgress(hosts=tuple(HostRow(f"h{i}", f"10.0.0.{i}", s, detail=f"at {t}")
                                     for i, s in enumerate(states)), t=t)


def step(task: str, local: int) -> TrainerEvent:
    index = int(task[-1])
    return TrainerEvent(task=task, event=protocol.Step(role="worker", index=index, global_step=local * 2,
                                                       local_step=local, loss=1.0 / local,
                                                       examples_per_sec=1.0, step_time=0.1, t=0.0),
                        t=0.0)


def test_a_later_sample_takes_the_earlier_ones_place_and_nothing_else_is_lost() -> None:
    """Usage, live traffic and the hosts' picture: a front end shows only the latest, so a
    backlog holds one of each, where the first one was; notices and lines in between stay."""
    inbox: Inbox[object] = Inbox()
    notice, lines = Notice(level=Level.INFO, text="kept"), output(1)
    live = [TrafficUpdate(sample=None, expected_per_sec=(float(n),)) for n in range(3)]
    for n in range(3):
        inbox.put(usage(float(n)))
        inbox.put(live[n])
        inbox.put(hosts(HostState.READY, HostState.READY, t=float(n)))
        inbox.put(notice if n == 1 else lines)
    items, _ = inbox.drain()
    latest = hosts(HostState.READY, HostState.READY, t=2.0)
    assert items == [usage(2.0), live[2], latest, lines, notice, lines]


def test_the_runs_own_traffic_is_never_replaced() -> None:
    inbox: Inbox[object] = Inbox()
    final = TrafficUpdate(sample=None, expected_per_sec=(), not_measured="no ps")
    later = TrafficUpdate(sample=None, expected_per_sec=(1.0,))
    for item in (final, later, TrafficUpdate(sample=None, expected_per_sec=(2.0,))):
        inbox.put(item)
    items, _ = inbox.drain()
    assert items == [final, TrafficUpdate(sample=None, expected_per_sec=(2.0,))]


def test_no_sample_passes_a_change_of_state() -> None:
    """A task's, a host's or the run's change of state is a wall: the sample before it stays
    before it (the run's last usage before a task ended, a host's picture before it went out
    of reach), and the first one after starts again."""
    inbox: Inbox[object] = Inbox()
    ended = TaskStateChanged(task="worker0", old=TaskState.RUNNING, new=TaskState.FAILED, exit_code=1)
    reach = HostReach(host="h0", state=HostState.UNREACHABLE, reason="no answer")
    sequence = [usage(0.0), usage(1.0), ended, usage(2.0), usage(3.0), reach, usage(4.0), usage(5.0)]
    for item in sequence:
        inbox.put(item)
    items, _ = inbox.drain()
    assert items == [usage(1.0), ended, usage(3.0), reach, usage(5.0)]


def test_a_hosts_picture_where_a_host_changed_state_is_kept() -> None:
    """Each host's change of state is a line in both front ends' logs: a picture replaces the
    last only while every host is where it was."""
    inbox: Inbox[object] = Inbox()
    pictures = [hosts(HostState.CONNECTING, HostState.CONNECTING, t=0.0),
                hosts(HostState.CONNECTING, HostState.CONNECTING, t=1.0),
                hosts(HostState.READY, HostState.CONNECTING, t=2.0),
                hosts(HostState.READY, HostState.CONNECTING, t=3.0),
                hosts(HostState.CONNECTING, HostState.CONNECTING, t=4.0)]
    for item in pictures:
        inbox.put(item)
    items, _ = inbox.drain()
    assert items == [pictures[1], pictures[3], pictures[4]]


def test_steps_are_each_kept_until_the_backlog_is_long_then_each_tasks_latest() -> None:
    """A front end that keeps up folds every step (the loss chart, the step-time window);
    one that fell behind gets each task's latest in the place of its earlier ones, but every
    task's first step (a line in its log), hints and the run's end are kept, in order."""
    inbox: Inbox[object] = Inbox(coalesce_steps_past=4)
    few = [step("worker0", 1), step("worker0", 2), step("worker1", 2)]
    for item in few:
        inbox.put(item)
    assert inbox.drain() == (few, 0)
    hint = TaskHint(task="worker1", hint="slow")
    finished = RunFinished.__new__(RunFinished)  # (a summary's contents do not matter here)
    object.__setattr__(finished, "t", 0.0)
    for local in range(1, 101):
        inbox.put(step("worker0", local))
        inbox.put(step("worker1", local))
        if local == 50:
            inbox.put(hint)
    inbox.put(finished)
    inbox.put(step("worker0", 101))
    items, _ = inbox.drain()
    assert len(items) <= 10
    assert [i for i in items if not isinstance(i, TrainerEvent)] == [hint, finished]
    assert items[-2:] == [finished, step("worker0", 101)]
    before_end = [i for i in items[:-2] if isinstance(i, TrainerEvent)]
    assert step("worker0", 1) in before_end and step("worker1", 1) in before_end
    assert step("worker0", 100) in before_end and step("worker1", 100) in before_end


def test_a_flood_of_samples_and_steps_leaves_a_bounded_backlog() -> None:
    """A front end that never drains: however long, what waits stays within the bound (the
    output's lines, one of each sample, each task's step) and holds the present."""
    inbox: Inbox[object] = Inbox(max_pending_output=100, coalesce_steps_past=50)
    for n in range(20_000):
        inbox.put(usage(float(n)))
        inbox.put(step(f"worker{n % 4}", n + 2))
        inbox.put(ProgressUpdate(progress=ProgressSnapshot.empty(n), t=float(n)))
        inbox.put(output(1))
    assert len(inbox) < 50 + 100 + 4 + 2
    items, dropped = inbox.drain()
    assert dropped == 20_000 - 100
    assert usage(19_999.0) in items and step("worker3", 20_001) in items
