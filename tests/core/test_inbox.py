"""The core's inbox (tui.core.inbox): order kept, output bounded and counted, other events
never dropped."""

from __future__ import annotations

import threading

from tui.core.events import Level, Notice, TaskOutput
from tui.core.inbox import Inbox
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


def test_wait_wakes_on_a_put_from_another_thread() -> None:
    inbox: Inbox[object] = Inbox()
    assert not inbox.wait(0.01)
    threading.Timer(0.05, inbox.put, args=(Notice(level=Level.INFO, text="x"),)).start()
    assert inbox.wait(30)
