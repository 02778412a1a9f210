"""The core's inbox (tui.core.inbox): order kept, output bounded and counted, other events
never dropped."""

from __future__ import annotations

import threading

from tui.core.events import Level, Notice, ProgressUpdate, TaskOutput, TaskStateChanged
from tui.core.inbox import Inbox
from tui.core.progress import ProgressSnapshot
from tui.core.task_state import TaskState
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


def test_a_drain_hands_on_only_the_last_progress_update_where_it_was() -> None:
    inbox: Inbox[object] = Inbox()
    updates = [ProgressUpdate(progress=ProgressSnapshot.empty(n), t=float(n)) for n in range(3)]
    lines, notice = output(1), Notice(level=Level.INFO, text="kept")
    for item in (updates[0], lines, updates[1], notice, updates[2], output(2)):
        inbox.put(item)
    items, _ = inbox.drain()
    assert items[:3] == [lines, notice, updates[2]] and len(items) == 4
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
