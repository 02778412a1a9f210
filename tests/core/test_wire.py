"""The frames between the app and its core's process (tui.core.wire)."""

from __future__ import annotations

import io
import pickle
import socket
import threading

from tui.core.commands import StartTask
from tui.core.events import Level, Notice
from tui.core.wire import Batch, Execute, portable, read_frame, send_frame, sendable


def test_frames_cross_a_socket_and_its_end_reads_as_none() -> None:
    ours, theirs = socket.socketpair()
    message = Execute(7, StartTask("worker1"))
    with theirs.makefile("rb") as frames:
        sender = threading.Thread(target=lambda: (send_frame(ours, message), ours.close()))
        sender.start()
        assert read_frame(frames) == message
        assert read_frame(frames) is None
        sender.join()
    theirs.close()


def test_a_cut_frame_reads_as_the_end() -> None:
    whole = io.BytesIO()
    payload = pickle.dumps(Execute(1, StartTask("ps0")))
    whole.write(len(payload).to_bytes(8, "big") + payload[:-3])
    whole.seek(0)
    assert read_frame(whole) is None


def test_an_item_that_cannot_be_pickled_becomes_a_notice_the_rest_go() -> None:
    kept = Notice(level=Level.INFO, text="kept")
    batch = pickle.loads(sendable(Batch([kept, Notice(level=Level.INFO, text=lambda: 0)], 4)))  # type: ignore[arg-type]
    assert batch.items[0] == kept and batch.dropped == 4
    assert batch.items[1].level is Level.ERROR and "could not send a Notice" in batch.items[1].text


def test_an_error_crosses_as_itself_or_as_its_text() -> None:
    assert portable(None) is None
    error = RuntimeError("the run is over")
    assert portable(error) is error

    class Local(Exception):  # (a class pickle cannot find by name)
        pass

    crossed = portable(Local("no such task"))
    assert isinstance(crossed, RuntimeError) and str(crossed) == "no such task"
