"""The app's own signals.

SIGHUP (the terminal is gone: a dropped SSH connection, a killed tmux) and SIGTERM (asked
to go) stop every task as interrupted, so that the run's summary is written and no task is
left behind; nobody is asked, nobody may be there. Ctrl-C is a key of the app, not a signal.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
import threading
from collections.abc import Callable
from typing import Any

from textual import constants, work
from textual.driver import Driver

from tui.app.bridge import Core
from tui.app.terminal_driver import TerminalDriver
from tui.common.exit_codes import ExitCode
from tui.core.commands import StopAll
from tui.core.events import RunOutcome

HANDLED = (signal.SIGHUP, signal.SIGTERM)


def install(on_signal: Callable[[signal.Signals], None]) -> None:
    """Route :data:`HANDLED` to ``on_signal`` on the running loop (the app's)."""
    loop = asyncio.get_running_loop()
    for signum in HANDLED:
        loop.add_signal_handler(signum, on_signal, signum)


def remove() -> None:
    loop = asyncio.get_running_loop()
    for signum in HANDLED:
        loop.remove_signal_handler(signum)


def interrupted_by(signum: signal.Signals) -> StopAll:
    """The stop a signal asks for."""
    return StopAll(RunOutcome.INTERRUPTED, f"interrupted by {signum.name}")


def hang_up(core: Core | None, stop: StopAll) -> None:
    """After SIGHUP, from a worker thread: stop every task, close the core, exit 130. Nothing
    here waits on the UI thread: with its terminal gone, Textual's writes fail and its
    shutdown (restoring a terminal that is no more) never returns."""
    if core is not None:
        with contextlib.suppress(Exception):  # the core's own close still stops them
            core.send(stop).result(timeout=60.0)
        core.close(timeout=15.0)
    os._exit(int(ExitCode.INTERRUPTED))


class SignalHandling:
    """The app's part (mixed into :class:`tui.app.app.TfdistApp`, which installs the
    handlers on mount): it needs ``core``, ``interrupted`` and ``_stop_all_and_exit``."""

    core: Core | None
    interrupted: bool
    _stop_all_and_exit: Any

    def on_unmount(self) -> None:
        remove()

    def _on_signal(self, signum: signal.Signals) -> None:
        """SIGHUP or SIGTERM: every task stopped as interrupted, then exit."""
        self.interrupted = True
        if signum == signal.SIGHUP:
            self._hang_up(signum)
        else:
            self._stop_all_and_exit(interrupted_by(signum))

    @work(thread=True, exclusive=True, group="shutdown")
    def _hang_up(self, signum: signal.Signals) -> None:
        hang_up(self.core, interrupted_by(signum))

    def get_driver_class(self) -> type[Driver]:
        """On Linux (and no driver named by TEXTUAL_DRIVER): :class:`TerminalDriver`."""
        if sys.platform.startswith("linux") and constants.DRIVER is None:
            return TerminalDriver
        return super().get_driver_class()  # type: ignore[misc]  # (the app's: this is a mixin)

    def terminal_gone(self) -> None:
        """The app's screen can no longer be written (:mod:`tui.app.terminal_driver`): as after
        SIGHUP, every task stopped as interrupted, then exit; from a thread of its own, since
        nothing that waits on the UI thread returns now."""
        self.interrupted = True
        stop = StopAll(RunOutcome.INTERRUPTED, "interrupted: the terminal is gone")
        threading.Thread(target=hang_up, args=(self.core, stop), name="tfdist-hang-up", daemon=True).start()
