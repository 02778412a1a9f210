"""What the app needs of the controller core (:class:`Core`), and the core on a thread of
this process (:class:`CoreBridge`). The UI thread sends typed commands
(:mod:`tui.core.commands`) with ``send`` and collects what happened with ``drain`` on a
timer. The app's default core is a process of its own (:mod:`tui.app.process_bridge`); the
thread serves tests with a scripted session, and the benchmarks that compare the two."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import Protocol, runtime_checkable

from tui.core.commands import Command
from tui.core.inbox import Happening, Inbox
from tui.core.session import Session
from tui.core.wire import Watch


class Core(Protocol):
    """What the app needs from the controller core (a scripted fake in layout tests)."""

    def send(self, command: Command) -> Future[None]: ...

    def drain(self) -> tuple[list[Happening], int]: ...

    def close(self, timeout: float) -> None: ...


@runtime_checkable
class WakingCore(Core, Protocol):
    """A core that says when it has news, so that the app need not look on a timer."""

    def wake_on_news(self, wake: Callable[[], None]) -> None:
        """Call ``wake`` (from any thread) when something arrives after a :meth:`drain`:
        once, until the next drain takes it."""


@runtime_checkable
class WatchingCore(Core, Protocol):
    """A core that holds back what the screen does not show until the app's clock asks
    (:class:`~tui.core.wire.Watch`, :class:`~tui.core.wire.Flush`)."""

    def watch(self, watch: Watch) -> None:
        """What the screen shows now."""

    def flush(self, done: Callable[[], None]) -> None:
        """Have what is held back sent; ``done`` is called (from any thread) once it has come."""


def call_on_news(core: Core, resume: Callable[[], None]) -> bool:
    """Have ``core`` call ``resume`` on this thread's running loop when it has news; False
    if it cannot say (a scripted core: the app then looks on its timer)."""
    if not isinstance(core, WakingCore):
        return False
    loop = asyncio.get_running_loop()

    def wake() -> None:  # (on the core's thread)
        with contextlib.suppress(RuntimeError):  # the app's loop closed: nothing to draw
            loop.call_soon_threadsafe(resume)

    core.wake_on_news(wake)
    return True


class NewsBell:
    """Rings a core's ``wake`` once per drain: the first item after a drain rings it, the
    others (a flood) do not, so the app is woken at most once per frame it draws."""

    def __init__(self) -> None:
        self._wake: Callable[[], None] | None = None
        self._rung = False

    def set(self, wake: Callable[[], None]) -> None:
        self._wake = wake
        self._rung = False
        wake()  # whatever came before is news too

    def ring(self) -> None:
        """After an item is queued (the flag is read after: a drain in between takes it)."""
        if not self._rung and self._wake is not None:
            self._rung = True
            self._wake()

    def drained(self) -> None:
        """Before a drain: whatever is queued from now on rings again."""
        self._rung = False


class CoreBridge:
    """Owns the supervisor's thread and event loop; what happens waits in one
    :class:`~tui.core.inbox.Inbox`."""

    def __init__(self, session_factory: Callable[[], Session]) -> None:
        self._loop = asyncio.new_event_loop()
        self._inbox: Inbox[Happening] = Inbox()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._main, name="tfdist-core", daemon=True)
        self._factory = session_factory
        self.session: Session | None = None
        self._bell = NewsBell()
        self._thread.start()
        self._ready.wait()

    def _main(self) -> None:
        asyncio.set_event_loop(self._loop)
        self.session = self._factory()
        self.session.supervisor.subscribe(self._put)
        if self.session.traffic is not None:
            self.session.traffic.subscribe(self._put)
        if self.session.usage is not None:
            self.session.usage.subscribe(self._put)
        self._ready.set()
        self._loop.run_forever()

    def _put(self, happening: Happening) -> None:
        self._inbox.put(happening)
        self._bell.ring()

    def wake_on_news(self, wake: Callable[[], None]) -> None:
        """Call ``wake`` when something happens after a drain (:class:`WakingCore`)."""
        self._bell.set(wake)

    def send(self, command: Command) -> Future[None]:
        """Carry out ``command`` on the core's loop; the future resolves there."""
        assert self.session is not None
        return asyncio.run_coroutine_threadsafe(self.session.execute(command), self._loop)

    def drain(self) -> tuple[list[Happening], int]:
        """Everything that happened since the last drain, in order, and how many output
        lines were dropped because the UI fell behind."""
        self._bell.drained()
        return self._inbox.drain()

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
