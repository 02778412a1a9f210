"""What the app tells its core about the screen, so that an idle run's trickle of lines wakes
neither process ten times a second for nothing on screen: which logs, charts and samples are on screen
(:class:`~tui.core.wire.Watch`: the core sends what concerns them at once, the rest when the
app's clock ticks), and the clock's tick itself, which asks the core for what it held back
(:class:`~tui.core.wire.Flush`) and draws once that has come: the table's ages and steps are
then as fresh as the tick, not as old as the core's last frame."""

from __future__ import annotations

import asyncio
import contextlib

from textual.widgets import TabbedContent

from tui.app.bridge import Core, WatchingCore
from tui.app.logactions import LogActions
from tui.app.split import LogSplit
from tui.core.wire import Watch


class CorePacing(LogActions):
    """The app's side of :class:`~tui.core.wire.Watch` and :class:`~tui.core.wire.Flush`."""

    core: Core | None
    #: What the core was last told the screen shows.
    _watched: Watch | None = None
    #: The task whose log the Logs tab shows (it stays while the cursor is on a role's header).
    log_task: str | None = None
    #: A flush asked at a tick and not answered yet.
    _flush_asked = False

    def refresh_dashboard(self, *, force: bool = False) -> bool:
        raise NotImplementedError  # (the app's)

    def watch_screen(self) -> None:
        """Tell the core what the screen shows now, if that changed."""
        if not isinstance(self.core, WatchingCore):
            return
        active = self.query_one(TabbedContent).active
        tasks: frozenset[str] | None = frozenset()
        if active == "merged":
            tasks = None  # every task's lines
        elif active == "logs":
            tasks = frozenset(name for name in (self.log_task, self.query_one(LogSplit).pinned) if name)
        watch = Watch(tasks, progress=active == "throughput", traffic=active in ("placement", "hosts"))
        if watch != self._watched:
            self._watched = watch
            self.core.watch(watch)

    def _clock_tick(self) -> None:
        """What moves with time alone (ages, the elapsed time) is drawn: with what the core
        held back, once it has come."""
        core = self.core
        if not isinstance(core, WatchingCore) or self._flush_asked:
            # A core that holds nothing back; or the last tick's flush is not answered (a
            # core that busy, or gone): what came is drawn.
            self.refresh_dashboard(force=True)
            return
        self._flush_asked = True
        loop = asyncio.get_running_loop()

        def flushed() -> None:  # (on the core's reader thread)
            with contextlib.suppress(RuntimeError):  # the app's loop closed: nothing to draw
                loop.call_soon_threadsafe(self._flushed)

        core.flush(flushed)

    def _flushed(self) -> None:
        self._flush_asked = False
        self.refresh_dashboard(force=True)
