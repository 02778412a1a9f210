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
import signal
import socket
import sys
import threading
import time
from typing import BinaryIO

from tui.core.commands import StopAll
from tui.core.events import RunOutcome
from tui.core.inbox import Inbox
from tui.core.session import Session
from tui.core.wire import (
    Batch,
    Close,
    Closed,
    Execute,
    Failed,
    Outgoing,
    Reply,
    Start,
    portable,
    read_frame,
    send_pickled,
    sendable,
)

#: A frame carries at most this much time's happenings: fewer, larger frames for a flood,
#: and well under the app's refresh tick (0.1 s) for a single event.
GATHER_SECONDS = 0.01
#: Signals that close the core as the app's Close does (it is in a session of its own, so
#: none comes from a terminal; these are somebody asking).
CLOSING_SIGNALS = (signal.SIGTERM, signal.SIGHUP, signal.SIGINT)
#: The run's end when the app went without a word (killed): its socket ended.
APP_GONE = "the app ended without closing its core (killed?)"


class Sender:
    """Sends the outbox to the app from a thread of its own, so that a slow app (or a full
    socket) never holds up the core's loop: the outbox then drops output lines, and counts
    them, as the in-process bridge does."""

    def __init__(self, sock: socket.socket) -> None:
        self.outbox: Inbox[Outgoing] = Inbox()
        self._sock = sock
        self._thread = threading.Thread(target=self._run, name="tfdist-core-sender", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while True:
            self.outbox.wait()
            time.sleep(GATHER_SECONDS)
            items, dropped = self.outbox.drain()
            try:
                send_pickled(self._sock, sendable(Batch(items, dropped)))
            except OSError:
                return  # the app is gone; the reader closes the core
            if any(isinstance(item, (Closed, Failed)) for item in items):
                return

    def finish(self, last: Closed | Failed, timeout: float = 5.0) -> None:
        """Send ``last`` after everything before it, and wait for it to be sent."""
        self.outbox.put(last)
        self._thread.join(timeout)


class Closing:
    """Why the core is to close: None when the app asked (it stopped the tasks as it meant
    to), else what interrupted the run (the app gone, a signal)."""

    def __init__(self) -> None:
        self._why: asyncio.Future[str | None] = asyncio.get_running_loop().create_future()

    def close(self, why: str | None = None) -> None:
        """The first reason counts."""
        if not self._why.done():
            self._why.set_result(why)

    async def wait(self) -> str | None:
        return await self._why


def read_commands(frames: BinaryIO, loop: asyncio.AbstractEventLoop, session: Session,
                  sender: Sender, closing: Closing) -> None:
    """The app's messages, on a thread (a blocking read), each handed to the core's loop."""

    def execute(message: Execute) -> None:
        def replied(future: asyncio.Future[None]) -> None:
            error = (asyncio.CancelledError("the core closed before it finished")
                     if future.cancelled() else future.exception())
            sender.outbox.put(Reply(message.number, portable(error)))

        asyncio.ensure_future(session.execute(message.command)).add_done_callback(replied)

    while True:
        try:
            message = read_frame(frames)
        except (OSError, EOFError, ValueError):
            message = None
        if isinstance(message, Execute):
            loop.call_soon_threadsafe(execute, message)
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
    session.supervisor.subscribe(sender.outbox.put)
    if session.traffic is not None:
        session.traffic.subscribe(sender.outbox.put)
    if session.usage is not None:
        session.usage.subscribe(sender.outbox.put)
    closing = Closing()
    for signum in CLOSING_SIGNALS:
        loop.add_signal_handler(signum, closing.close, f"interrupted by {signum.name}")
    threading.Thread(target=read_commands, args=(frames, loop, session, sender, closing),
                     name="tfdist-core-commands", daemon=True).start()
    why = await closing.wait()
    if why is not None and session.supervisor.is_running:
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
    sock = socket.socket(fileno=int(args[0]))
    with contextlib.closing(sock), sock.makefile("rb") as frames:
        start = read_frame(frames)
        if not isinstance(start, Start):
            return 2  # the app went away before it said what to run
        return asyncio.run(serve(start, sock, frames))


if __name__ == "__main__":
    sys.exit(main())
