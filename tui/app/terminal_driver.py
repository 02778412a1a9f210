"""Textual's Linux driver, told when its terminal is gone.

Textual writes the screen from a thread of its own through a queue of 30 writes. When the
terminal goes away (its other end closed: a terminal emulator or an SSH session gone, and no
SIGHUP delivered, or the screen written before SIGHUP is handled), that thread dies on its
first failed write, and the 31st write after it blocks the app's loop for ever: no key, no
signal handler, no stop of the tasks again, and every task the run started outlives it. This
driver writes nothing once the thread is dead and says so once, so the app ends as after a
SIGHUP."""

from __future__ import annotations

from collections.abc import Callable

from textual.drivers.linux_driver import LinuxDriver


class TerminalDriver(LinuxDriver):
    """:class:`LinuxDriver` that calls the app's ``terminal_gone()`` once its writes fail."""

    _gone = False

    def write(self, data: str) -> None:
        writer = self._writer_thread
        if writer is not None and not writer.is_alive():
            if not self._gone:
                self._gone = True
                on_gone: Callable[[], None] | None = getattr(self._app, "terminal_gone", None)
                if on_gone is not None:
                    on_gone()
            return
        super().write(data)
