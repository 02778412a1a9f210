"""The controller core in a process of its own: what the app starts (as
``python -m tui.core.process_main FD`` would, :class:`tui.app.process_bridge.ProcessBridge`) so
that the core and the screen never wait for each other's turn on one interpreter lock. On a
busy machine that turn was most of a key press's wait (BENCHMARKS.md section 9).

It reads a :class:`~tui.core.wire.Start`, makes the session, then carries out each
:class:`~tui.core.wire.Execute` and sends what happens in :class:`~tui.core.wire.Batch`es.
When the app says :class:`~tui.core.wire.Close`, or is gone (the socket ends: the app was
killed), or a signal asks, every task is stopped as the session closes, so the run's summary
is written and nothing is left behind."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import sys
import threading
import time
from typing import BinaryIO

from tui.common.paced_loop import paced_loop
from tui.core.commands import StopAll
from tui.core.events import ProgressUpdate, RunOutcome
from tui.core.inbox import Inbox
from tui.core.session import Session
from tui.core.wire import (
    Batch,
    Close,
    Closed,
    Execute,
    Failed,
    Flush,
    Flushed,
    Outgoing,
    ProgressPacker,
    Reply,
    Start,
    Watch,
    portable,
    prompt,
    read_frame,
    send_pickled,
    sendable,
)
from tui.launch.deathsig import signal_me_when_parent_dies

#: A frame carries at most this much time's happenings: fewer, larger frames for a flood,
#: and well under the app's refresh tick (0.1 s) for a single event.
GATHER_SECONDS = 0.01
#: Frames go at most this often: a steady trickle (256 tasks' step lines) is sent as a few
#: frames a second, each waking the app once, not one per line. The app's
#: frame (``tui.app.app.REFRESH_SECONDS``): the app folds at most one frame per frame of its own.
FRAME_SECONDS = 0.1
#: What the app has not on screen (:class:`~tui.core.wire.Watch`) waits for its clock's tick
#: (a :class:`~tui.core.wire.Flush` a second), and at most this long.
HOLD_SECONDS = 2.0
#: ... and only while fewer than this many items wait: a busy run's second of lines (256
#: tasks stepping: 2,500 items) folded at once held the app's key presses; a few hundred
#: items a frame, as without holding, did not.
HOLD_ITEMS = 256
#: Signals that close the core as the app's Close does (it is in a session of its own, so
#: none comes from a terminal; these are somebody asking).
CLOSING_SIGNALS = (signal.SIGTERM, signal.SIGHUP, signal.SIGINT)
#: The run's end when the app went without a word (killed): its socket ended.
APP_GONE = "the app ended without closing its core (killed?)"
#: Once closing, the core ends within this many seconds, however its close goes (the app's
#: own close gives it 15 s, then kills it; an app that is gone gives it nothing): past it,
#: every task's process group is SIGKILLed and the core exits: no orphans.
CLOSE_DEADLINE = 30.0
#: What the kernel sends the core when the app has died (its parent-death signal).
APP_GONE_SIGNAL = signal.SIGUSR2


class Sender:
    """Sends the outbox to the app from a thread of its own, so that a slow app (or a full
    socket) never holds up the core's loop: the outbox then drops output lines, and counts
    them, as the in-process bridge does. What the app does not show at once waits for the
    app's :class:`~tui.core.wire.Flush` (:func:`~tui.core.wire.prompt`)."""

    def __init__(self, sock: socket.socket) -> None:
        self.outbox: Inbox[Outgoing] = Inbox()
        self._sock = sock
        self._progress = ProgressPacker()
        self._watch = Watch()
        #: Set when the outbox holds something the app shows at once (or was asked for).
        self._prompt = threading.Event()
        self._thread = threading.Thread(target=self._run, name="tfdist-core-sender", daemon=True)
        self._thread.start()

    def put(self, item: Outgoing) -> None:
        """Queue ``item`` for the app (from any thread)."""
        self.outbox.put(item)
        # (Already due, as a busy run's items mostly are: nothing to decide.)
        if not self._prompt.is_set() and (prompt(item, self._watch) or len(self.outbox) >= HOLD_ITEMS):
            self._prompt.set()

    @property
    def due(self) -> bool:
        """Whether something queued goes at the next frame (else it waits for a flush)."""
        return self._prompt.is_set()

    def watch(self, watch: Watch) -> None:
        """The app shows this now: what it held back may concern it, so it goes too."""
        self._watch = watch
        self._prompt.set()

    def flush(self) -> None:
        """Send everything now, then :class:`~tui.core.wire.Flushed`."""
        self.put(Flushed())

    def _run(self) -> None:
        sent = 0.0
        while True:
            self.outbox.wait()
            # The first news after a quiet spell goes after a moment's gathering; a trickle
            # waits for the frame; what the app does not show waits for its flush.
            time.sleep(max(GATHER_SECONDS, sent + FRAME_SECONDS - time.monotonic()))
            self._prompt.wait(max(0.0, sent + HOLD_SECONDS - time.monotonic()))
            self._prompt.clear()  # (before the drain: what comes after it rings again)
            sent = time.monotonic()
            items, dropped = self.outbox.drain()
            items = [self._progress.pack(item) if isinstance(item, ProgressUpdate) else item
                     for item in items]
            try:
                send_pickled(self._sock, sendable(Batch(items, dropped)))
            except OSError:
                return  # the app is gone; the reader closes the core
            if any(isinstance(item, (Closed, Failed)) for item in items):
                return

    def finish(self, last: Closed | Failed, timeout: float = 5.0) -> None:
        """Send ``last`` after everything before it, and wait for it to be sent."""
        self.put(last)
        self._thread.join(timeout)


class Closing:
    """Why the core is to close: None when the app asked (it stopped the tasks as it meant
    to), else what interrupted the run (the app gone, a signal)."""

    def __init__(self) -> None:
        self._why: asyncio.Future[str | None] = asyncio.get_running_loop().create_future()

    @property
    def begun(self) -> bool:
        return self._why.done()

    def close(self, why: str | None = None) -> None:
        """The first reason counts. The close is bounded from here on (:data:`CLOSE_DEADLINE`)."""
        if not self._why.done():
            self._why.set_result(why)
            deadline = threading.Timer(CLOSE_DEADLINE, give_up,
                                       args=(f"not closed after {CLOSE_DEADLINE:g} s",))
            deadline.daemon = True
            deadline.start()

    async def wait(self) -> str | None:
        return await self._why


def give_up(why: str) -> None:
    """End now, from any thread: SIGKILL the process group of every child (each task, pool,
    ssh and salloc leads its own) and exit. What a SIGKILLed core would leave, no more:
    the tasks die with it either way (their parent-death signal)."""
    print(f"tfdist core: {why}; killing every task", file=sys.stderr, flush=True)
    me = os.getpid()
    for entry in os.listdir("/proc") if os.path.isdir("/proc") else ():
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                fields = f.read().rsplit(b")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) != me:  # not a child of ours (fields: state, ppid, pgrp)
            continue
        with contextlib.suppress(OSError):
            if int(fields[2]) != os.getpgid(0):
                os.killpg(int(fields[2]), signal.SIGKILL)
            else:
                os.kill(int(entry), signal.SIGKILL)
    os._exit(1)


def read_commands(frames: BinaryIO, loop: asyncio.AbstractEventLoop, session: Session,
                  sender: Sender, closing: Closing) -> None:
    """The app's messages, on a thread (a blocking read), each handed to the core's loop."""

    def execute(message: Execute) -> None:
        def replied(future: asyncio.Future[None]) -> None:
            error = (asyncio.CancelledError("the core closed before it finished")
                     if future.cancelled() else future.exception())
            sender.put(Reply(message.number, portable(error)))

        asyncio.ensure_future(session.execute(message.command)).add_done_callback(replied)

    while True:
        try:
            message = read_frame(frames)
        except (OSError, EOFError, ValueError):
            message = None
        if isinstance(message, Execute):
            loop.call_soon_threadsafe(execute, message)
        elif isinstance(message, Watch):
            sender.watch(message)
        elif isinstance(message, Flush):
            sender.flush()
        elif isinstance(message, Close):
            loop.call_soon_threadsafe(closing.close)
            return
        elif message is None:
            loop.call_soon_threadsafe(closing.close, APP_GONE)
            return


async def serve(start: Start, sock: socket.socket, frames: BinaryIO) -> int:
    """Run the session until the app closes it; the exit status."""
    loop = asyncio.get_running_loop()
    sender = Sender(sock)
    try:
        session = Session.from_options(start.options, start.supervisor_options)
    except Exception as error:  # whatever it was, the app says it
        sender.finish(Failed(f"{type(error).__name__}: {error}"))
        return 1
    # The app sends its first command once it is up: until then, this machine's warm pools
    # import TensorFlow.
    session.supervisor.prestart()
    session.supervisor.subscribe(sender.put)
    if session.traffic is not None:
        session.traffic.subscribe(sender.put)
    if session.usage is not None:
        session.usage.subscribe(sender.put)
    closing = Closing()

    def on_signal(signum: signal.Signals) -> None:
        # Asked again while closing: no grace periods any more. The app's death is no second
        # request: it comes with (or after) the socket's end that began the close, and its
        # tasks still deserve their last words.
        if closing.begun and signum != APP_GONE_SIGNAL:
            session.supervisor.kill_all()
        closing.close(APP_GONE if signum == APP_GONE_SIGNAL else f"interrupted by {signum.name}")

    for signum in (*CLOSING_SIGNALS, APP_GONE_SIGNAL):
        loop.add_signal_handler(signum, on_signal, signum)
    threading.Thread(target=read_commands, args=(frames, loop, session, sender, closing),
                     name="tfdist-core-commands", daemon=True).start()
    why = await closing.wait()
    if why is not None and (session.supervisor.is_running or session.supervisor.is_starting):
        await session.execute(StopAll(RunOutcome.INTERRUPTED, why))
    await session.close()
    sender.finish(Closed())
    return 0


def main(argv: list[str] | None = None) -> int:
    """``python -m tui.core.process_main FD``: FD is this end of the app's socket pair."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1 or not args[0].isdigit():
        print("usage: python -m tui.core.process_main FD (started by tfdist-tui's app)", file=sys.stderr)
        return 2
    # Until the session's own handlers are in place, a closing signal ends us at once (there
    # is nothing to stop yet), whatever the app's parent left ignored or blocked (nohup, a
    # shell's trap): a core that ignored SIGTERM outlived its app.
    for signum in (*CLOSING_SIGNALS, APP_GONE_SIGNAL):
        signal.signal(signum, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, (*CLOSING_SIGNALS, APP_GONE_SIGNAL))
    # The app gone, however (SIGKILL, a crash, a hang-up's quick exit), maybe before its
    # socket's end says so: a signal of its own (not SIGTERM: the kernel sends it as soon as
    # the app's main thread ends, while the app is still our parent, so that the reason
    # could not be told from somebody's SIGTERM). Until the handlers are in place its
    # default action ends us, with nothing started yet.
    if not signal_me_when_parent_dies(APP_GONE_SIGNAL) and sys.platform.startswith("linux"):
        return 1  # the app is gone already
    sock = socket.socket(fileno=int(args[0]))
    with contextlib.closing(sock), sock.makefile("rb") as frames:
        start = read_frame(frames)
        if not isinstance(start, Start):
            return 2  # the app went away before it said what to run
        # Paced as headless is: many tasks' lines handled a tick's worth per wake-up.
        with asyncio.Runner(loop_factory=paced_loop) as runner:
            return runner.run(serve(start, sock, frames))


if __name__ == "__main__":
    sys.exit(main())
