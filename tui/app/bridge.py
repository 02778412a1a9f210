"""The session (supervisor and launchers) on its own thread and event loop, so that parsing
a flood of task output never delays a keypress. The UI thread sends it typed commands
(:mod:`tui.core.commands`) through :meth:`CoreBridge.send` and collects what happened with
:meth:`CoreBridge.drain` on a timer."""

from __future__ import annotations

import asyncio
import threading
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future
from typing import Protocol

from tui.core.commands import Command
from tui.core.events import ControllerEvent, TaskOutput
from tui.core.session import Session
from tui.core.traffic import TrafficUpdate

#: What reaches the app from the core: the supervisor's events and the traffic samples.
Happening = ControllerEvent | TrafficUpdate

#: Output lines waiting for the UI. If the UI falls this far behind, further lines are
#: dropped from the screen only (and counted); the run directory is written by the
#: supervisor itself and loses nothing.
MAX_PENDING_OUTPUT = 50_000


class Core(Protocol):
    """What the app needs from the controller core (a scripted fake in layout tests)."""

    def send(self, command: Command) -> Future[None]: ...

    def drain(self) -> tuple[list[Happening], int]: ...

    def close(self, timeout: float) -> None: ...


class CoreBridge:
    """Owns the supervisor's thread. Events wait in one inbox, in order; output lines beyond
    :data:`MAX_PENDING_OUTPUT` are dropped (and counted), other events never are."""

    def __init__(self, session_factory: Callable[[], Session],
                 on_event: Callable[[], None] | None = None) -> None:
        self._loop = asyncio.new_event_loop()
        self._inbox: deque[Happening] = deque()
        self._pending_output = 0
        self._dropped = 0
        self._lock = threading.Lock()
        self._on_event = on_event
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._main, name="tfdist-core", daemon=True)
        self._factory = session_factory
        self.session: Session | None = None
        self._thread.start()
        self._ready.wait()

    def _main(self) -> None:
        asyncio.set_event_loop(self._loop)
        self.session = self._factory()
        self.session.supervisor.subscribe(self._sink)
        if self.session.traffic is not None:
            self.session.traffic.subscribe(self._sink)
        self._ready.set()
        self._loop.run_forever()

    def _sink(self, event: Happening) -> None:
        is_output = isinstance(event, TaskOutput)
        with self._lock:
            if isinstance(event, TaskOutput):
                lines = len(event.lines)
                if self._pending_output >= MAX_PENDING_OUTPUT:
                    self._dropped += lines
                    return
                self._pending_output += lines
            self._inbox.append(event)
        if self._on_event is not None and not is_output:
            self._on_event()

    def send(self, command: Command) -> Future[None]:
        """Carry out ``command`` on the core's loop; the future resolves there."""
        assert self.session is not None
        return asyncio.run_coroutine_threadsafe(self.session.execute(command), self._loop)

    def drain(self) -> tuple[list[Happening], int]:
        """Everything that happened since the last drain, in order, and how many output
        lines were dropped because the UI fell behind."""
        with self._lock:
            events = list(self._inbox)
            dropped = self._dropped
            self._inbox.clear()
            self._pending_output = self._dropped = 0
        return events, dropped

    def close(self, timeout: float = 15.0) -> None:
        """Stop every task, then the loop."""
        if not self._thread.is_alive():
            return
        assert self.session is not None
        try:
            asyncio.run_coroutine_threadsafe(self.session.close(), self._loop).result(timeout)
        except Exception:  # the loop is going away regardless; tasks die with stdin EOF
            pass
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout)
