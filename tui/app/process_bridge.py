"""The core in a process of its own (:mod:`tui.core.process_main`): the app's default
:class:`~tui.app.bridge.Core`. The UI thread and the core then never wait for each other's
turn on one interpreter lock: on a busy machine, with the core on a thread, a key press
waited for the core thread to be scheduled again (BENCHMARKS.md section 9).

Commands go as :class:`~tui.core.wire.Execute` frames; a thread reads the core's batches,
resolves each command's future from its :class:`~tui.core.wire.Reply` and queues the rest
for :meth:`ProcessBridge.drain`. If the app dies, however it dies, the socket ends and the
core stops every task before it exits."""

from __future__ import annotations

import contextlib
import itertools
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future
from pathlib import Path

import tui
from tui.app.bridge import NewsBell
from tui.common.terminal import inert
from tui.core.commands import Command
from tui.core.events import Level, Notice
from tui.core.inbox import CoreLost, Happening, Inbox
from tui.core.options import RunOptions
from tui.core.supervisor.records import SupervisorOptions
from tui.core.wire import (
    Batch,
    Close,
    Closed,
    Execute,
    Failed,
    Flush,
    Flushed,
    ProgressDelta,
    ProgressUnpacker,
    Reply,
    Start,
    Watch,
    read_frame,
    send_frame,
)

#: What the app shows of the core's stderr when the core's process ends by surprise.
STDERR_TAIL_BYTES = 2000
#: Output lines waiting for the app's next frame, at most: past them, lines are counted
#: instead (the run directory has every one). A frame folds what waits at once, and at 64
#: hosts x 4 tasks (1,280 lines/s) an app that had fallen behind folded tens of thousands in
#: one frame, seconds in which no key was read; this many cost a frame under 0.1 s in its
#: profile (the All logs pane keeps 5,000). An app that keeps up gets every line.
PENDING_LINES = 2_000


#: How the core's process starts: this ``tui`` first on its path (the app may run from a
#: checkout that is not installed), and the current folder, which ``-c`` puts first, off it:
#: the core holds the SSH keys, and a user's ``yaml.py``, ``secrets.py`` or ``tui/`` beside
#: hosts.yaml must not run in it. The environment its tasks inherit is not touched.
BOOTSTRAP = ("import sys; sys.path[:] = [sys.argv[2], *(p for p in sys.path if p)]; "
             "from tui.core.process_main import main; sys.exit(main(sys.argv[1:2]))")


def core_argv(fd: int, python: str = sys.executable) -> list[str]:
    """The command line of the core's process, talking on ``fd``."""
    return [python, "-c", BOOTSTRAP, str(fd), str(Path(tui.__file__).resolve().parent.parent)]


class ProcessBridge:
    """Starts the core's process and speaks to it; the same :class:`~tui.app.bridge.Core`
    as the in-process :class:`~tui.app.bridge.CoreBridge`."""

    def __init__(self, options: RunOptions, supervisor_options: SupervisorOptions | None = None) -> None:
        ours, theirs = socket.socketpair()
        self._socket = ours
        self._stderr = tempfile.TemporaryFile()  # noqa: SIM115 - open for the process's life
        # A session of its own: a terminal's signals (hang-up, Ctrl-Z) reach the app, which
        # decides; the core ends when the app tells it or is gone.
        self.process = subprocess.Popen(
            core_argv(theirs.fileno()), pass_fds=(theirs.fileno(),),
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=self._stderr,
            start_new_session=True)
        theirs.close()
        self._inbox: Inbox[Happening] = Inbox(max_pending_output=PENDING_LINES)
        self._futures: dict[int, Future[None]] = {}
        self._numbers = itertools.count(1)
        self._lock = threading.Lock()  # one writer at a time; the futures and the end
        self._ended: str | None = None  # why no command can be carried out any more
        self._closed = threading.Event()
        self._shut = False
        self._bell = NewsBell()
        #: What to call as each :class:`~tui.core.wire.Flushed` comes, in the order asked.
        self._flushes: deque[Callable[[], None]] = deque()
        send_frame(ours, Start(options, supervisor_options))
        self._reader = threading.Thread(target=self._read, name="tfdist-core-reader", daemon=True)
        self._reader.start()

    def send(self, command: Command) -> Future[None]:
        """Have the core carry out ``command``; the future resolves when it has."""
        future: Future[None] = Future()
        with self._lock:
            if self._ended is None:
                number = next(self._numbers)
                self._futures[number] = future
                try:
                    send_frame(self._socket, Execute(number, command))
                    return future
                except OSError:
                    self._futures.pop(number, None)
            future.set_exception(RuntimeError(self._ended or "the controller's core is gone"))
        return future

    def watch(self, watch: Watch) -> None:
        """Tell the core what the screen shows (:class:`~tui.core.wire.Watch`)."""
        with self._lock:
            if self._ended is None:
                with contextlib.suppress(OSError):  # (the reader says the core is gone)
                    send_frame(self._socket, watch)

    def flush(self, done: Callable[[], None]) -> None:
        """Have the core send what it held back; ``done`` is called (on the reader thread)
        once that has come, at once if the core cannot be asked."""
        with self._lock:
            if self._ended is None:
                self._flushes.append(done)
                try:
                    send_frame(self._socket, Flush())
                    return
                except OSError:
                    self._flushes.pop()
        done()

    def drain(self) -> tuple[list[Happening], int]:
        """Everything that happened since the last drain, in order, and how many output
        lines were dropped because the UI fell behind."""
        self._bell.drained()
        return self._inbox.drain()

    def wake_on_news(self, wake: Callable[[], None]) -> None:
        """Call ``wake`` (on the reader thread) when a batch brings news after a drain
        (:class:`~tui.app.bridge.WakingCore`)."""
        self._bell.set(wake)

    def close(self, timeout: float = 15.0) -> None:
        """Have the core stop every task and exit; kill it if it has not within ``timeout``."""
        if self._shut:
            return
        self._shut = True
        deadline = time.monotonic() + timeout
        if self.process.poll() is None:
            try:
                with self._lock:
                    send_frame(self._socket, Close())
            except OSError:
                pass
            self._closed.wait(timeout)
        try:
            self.process.wait(max(1.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            self.process.kill()  # its tasks die with it (their parent-death signal)
            self.process.wait()
        with contextlib.suppress(OSError):
            self._socket.shutdown(socket.SHUT_RDWR)  # (wakes the reader if it still reads)
        self._socket.close()
        self._reader.join(5.0)
        self._stderr.close()

    # -- the reader thread ----------------------------------------------------------------

    def _read(self) -> None:
        progress = ProgressUnpacker()
        with self._socket.makefile("rb") as frames:
            while True:
                try:
                    batch = read_frame(frames)
                except (OSError, EOFError, ValueError):
                    batch = None
                if not isinstance(batch, Batch):
                    break
                self._inbox.count_dropped(batch.dropped)
                news = bool(batch.dropped)
                for item in batch.items:
                    if isinstance(item, Reply):
                        self._resolve(item)
                    elif isinstance(item, Failed):
                        self._end(f"the controller's core could not start: {item.text}")
                    elif isinstance(item, Closed):
                        self._end("the controller's core is closed")
                        self._closed.set()
                    elif isinstance(item, ProgressDelta):
                        self._inbox.put(progress.unpack(item))
                        news = True
                    elif isinstance(item, Flushed):
                        self._flushed()
                    else:
                        self._inbox.put(item)
                        news = True
                if news:
                    self._bell.ring()
        if not self._closed.is_set() and not self._shut:
            why = self._death()
            self._inbox.put(Notice(level=Level.ERROR, text=why))
            self._inbox.put(CoreLost(why))
            self._bell.ring()
            self._end(why)
        # Closing too: a command sent meanwhile (a hang-up's stop) must not wait for an
        # answer that cannot come (the app stayed 60 s after its terminal closed).
        self._end("the controller's core is gone")
        self._closed.set()

    def _resolve(self, reply: Reply) -> None:
        with self._lock:
            future = self._futures.pop(reply.number, None)
        if future is None:
            return
        if reply.error is None:
            future.set_result(None)
        else:
            future.set_exception(reply.error)

    def _flushed(self) -> None:
        with self._lock:
            done = self._flushes.popleft() if self._flushes else None
        if done is not None:
            done()

    def _end(self, why: str) -> None:
        """No more commands: every one still waiting fails with ``why``; every flush asked
        is done (what came is all that will)."""
        with self._lock:
            if self._ended is None:
                self._ended = why
            waiting = list(self._futures.values())
            self._futures.clear()
            flushes = list(self._flushes)
            self._flushes.clear()
        for future in waiting:
            future.set_exception(RuntimeError(why))
        for done in flushes:
            done()

    def _death(self) -> str:
        """What to tell the operator when the core's process ended by surprise."""
        try:
            code = self.process.wait(5.0)
        except subprocess.TimeoutExpired:
            code = None
        try:
            self._stderr.seek(0, os.SEEK_END)
            self._stderr.seek(max(0, self._stderr.tell() - STDERR_TAIL_BYTES))
            tail = inert(self._stderr.read().decode("utf-8", "replace")).strip()
        except (OSError, ValueError):
            tail = ""
        status = f"exit status {code}" if code is not None and code >= 0 else \
            f"signal {-code}" if code is not None else "no exit status"
        return (f"the controller's core process ended ({status}); tasks it started are stopped"
                + (f": {tail[-500:]}" if tail else ""))
