"""The frames between the app and its core's process (tui.core.wire)."""

from __future__ import annotations

import io
import pickle
import socket
import threading

from trainer import protocol
from tui.core.commands import StartTask
from tui.core.events import Level, Notice, ProgressUpdate, TaskOutput, TaskStateChanged, TrainerEvent
from tui.core.progress import ProgressTracker
from tui.core.task_state import TaskState
from tui.core.wire import (
    Batch,
    Execute,
    Flushed,
    ProgressDelta,
    ProgressPacker,
    ProgressUnpacker,
    Reply,
    Watch,
    portable,
    prompt,
    read_frame,
    send_frame,
    sendable,
)
from tui.plan.preflight import PreflightError


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


class Listed(Exception):
    """Made from a list, its ``args`` the joined text: pickle rebuilds it from that text."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("; ".join(problems))


def test_an_error_crosses_as_itself_or_as_its_text() -> None:
    assert portable(None) is None
    error = RuntimeError("the run is over")
    assert portable(error) is error

    class Local(Exception):  # (a class pickle cannot find by name)
        pass

    crossed = portable(Local("no such task"))
    assert isinstance(crossed, RuntimeError) and str(crossed) == "no such task"

    # What the app reads is the error once unpickled, in its words.
    crossed = pickle.loads(pickle.dumps(portable(Listed(["localhost:2222 is in use", "no run directory"]))))
    assert str(crossed) == "localhost:2222 is in use; no run directory"
    refused = PreflightError(["localhost:2222 is in use by pid 1 (init)"])
    assert portable(refused) is refused
    assert str(pickle.loads(pickle.dumps(refused))) == "localhost:2222 is in use by pid 1 (init)"


def _step(task: str, step: int, *, local: int | None = None) -> TrainerEvent:
    return TrainerEvent(task=task, t=1.0, event=protocol.Step(
        role="worker", index=int(task[-1]), t=1.0, global_step=step,
        local_step=step if local is None else local, loss=0.5, examples_per_sec=100.0 + step, step_time=0.01))


def test_progress_crosses_as_the_workers_that_changed_and_arrives_whole() -> None:
    tracker = ProgressTracker(1000)
    packer, unpacker = ProgressPacker(), ProgressUnpacker()

    def cross(update: ProgressUpdate) -> tuple[ProgressDelta, ProgressUpdate]:
        delta = pickle.loads(pickle.dumps(packer.pack(update)))
        return delta, unpacker.unpack(delta)

    for task in ("worker0", "worker1", "worker2"):
        step = _step(task, 10)
        tracker.update(task, step.event, step.t)
    first = ProgressUpdate(progress=tracker.snapshot(), t=2.0)
    delta, arrived = cross(first)
    assert arrived == first and len(delta.changed) == 3
    step = _step("worker1", 11)
    tracker.update("worker1", step.event, step.t)
    second = ProgressUpdate(progress=tracker.snapshot(), t=3.0)
    delta, arrived = cross(second)
    assert arrived == second and [w.task for w in delta.changed] == ["worker1"] and delta.order is None
    assert arrived.progress.global_step == 11
    tracker.worker_exited("worker0")  # the order changes; nothing else does
    third = ProgressUpdate(progress=tracker.snapshot(), t=4.0)
    delta, arrived = cross(third)
    assert arrived == third and not delta.changed and delta.order == ("worker1", "worker2")


def test_what_the_screen_does_not_show_can_wait() -> None:
    logs = Watch(frozenset({"worker0"}), progress=False, traffic=False)
    line = TaskOutput.line("worker1", "step 3 loss 0.5")
    assert not prompt(line, logs) and prompt(TaskOutput.line("worker0", "x"), logs)
    assert prompt(line, Watch(None, progress=False, traffic=False))  # the merged log
    assert not prompt(_step("worker1", 40, local=20), logs)
    assert prompt(_step("worker1", 40, local=20), Watch(frozenset(), progress=True, traffic=False))
    assert prompt(_step("worker1", 40, local=1), logs)  # a worker's first step: a log line
    assert prompt(TaskStateChanged(task="worker1", old=TaskState.RUNNING, new=TaskState.FAILED), logs)
    assert prompt(Notice(level=Level.INFO, text="n"), logs) and prompt(Flushed(), logs)
    assert prompt(Reply(3), logs)
    assert all(prompt(item, Watch()) for item in (line, _step("worker1", 40, local=20)))  # (until told)
