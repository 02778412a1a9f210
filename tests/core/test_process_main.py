"""The core's process sends the app what its screen shows at once, and the rest when the
app's clock asks (tui.core.process_main.Sender)."""

from __future__ import annotations

import socket
from typing import BinaryIO

import pytest

from tui.core import process_main
from tui.core.events import TaskOutput
from tui.core.process_main import Sender
from tui.core.wire import Batch, Closed, Flushed, Outgoing, Watch, read_frame


def _batch(frames: BinaryIO) -> list[Outgoing]:
    batch = read_frame(frames)
    assert isinstance(batch, Batch)
    return batch.items


def test_lines_not_on_screen_wait_for_the_flush_that_ends_them(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(process_main, "HOLD_SECONDS", 3600.0)  # (however slow the machine)
    ours, theirs = socket.socketpair()
    theirs.settimeout(30)  # (a batch that never comes fails the test)
    with theirs.makefile("rb") as frames:
        sender = Sender(ours)
        assert sender.due is False
        sender.watch(Watch(frozenset({"worker0"}), progress=False, traffic=False))
        shown = TaskOutput.line("worker0", "step 1 loss 0.5")
        sender.put(shown)
        assert _batch(frames) == [shown]  # the watched task's line: at the next frame
        held = TaskOutput.line("worker1", "step 1 loss 0.5")
        sender.put(held)
        assert sender.due is False  # (a frame comes for it only with the app's flush)
        sender.flush()
        assert _batch(frames) == [held, Flushed()]
        # Told that worker1's log is on screen now, what it held back goes at once.
        later = TaskOutput.line("worker1", "step 2 loss 0.4")
        sender.put(later)
        sender.watch(Watch(frozenset({"worker1"}), progress=False, traffic=False))
        assert _batch(frames) == [later]
        sender.finish(Closed())
        assert _batch(frames) == [Closed()]
    ours.close()
    theirs.close()


def test_many_lines_not_on_screen_go_without_a_flush(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(process_main, "HOLD_SECONDS", 3600.0)
    monkeypatch.setattr(process_main, "HOLD_ITEMS", 3)
    ours, theirs = socket.socketpair()
    theirs.settimeout(30)
    with theirs.makefile("rb") as frames:
        sender = Sender(ours)
        sender.watch(Watch(frozenset({"ps0"}), progress=False, traffic=False))
        shown = TaskOutput.line("ps0", "listening")
        sender.put(shown)
        assert _batch(frames) == [shown]
        held = [TaskOutput.line(f"worker{n}", "step 1 loss 0.5") for n in range(3)]
        for item in held[:2]:
            sender.put(item)
        assert sender.due is False
        sender.put(held[2])  # a busy run's lines are not held into one huge batch for the app to fold
        assert _batch(frames) == held
        sender.finish(Closed())
        assert _batch(frames) == [Closed()]
    ours.close()
    theirs.close()
