"""The app as a command: run it until the operator quits, then leave in the terminal what a
headless run ends with (the screen goes with the app)."""

from __future__ import annotations

import sys
from typing import TextIO

from tui.app.app import TfdistApp
from tui.app.process_bridge import ProcessBridge
from tui.core.options import RunOptions


def run(options: RunOptions, core: ProcessBridge | None = None) -> int:
    """Run the app until the operator quits; returns the exit code. The terminal keeps the
    last run's summary, as a headless run ends (the app's screen goes with it). ``core``: the
    core's process, started already (by the command line, before it loaded the app); by
    default the app starts its own when it mounts."""
    app = TfdistApp(options, core_factory=None if core is None else lambda _app: core)
    try:
        result = app.run()
    finally:
        if app.core is not None:
            app.core.close(timeout=15.0)
        elif core is not None:  # the app ended before it mounted: the core is still ours
            core.close(timeout=15.0)
    write_last_summary(app, sys.stdout)
    return int(result if result is not None else app.exit_code_now())


def write_last_summary(app: TfdistApp, out: TextIO) -> None:
    """What the terminal keeps once the app is gone, as a headless run ends: the last run's
    summary, its typical step and its traffic (headless's own printer: both screens say the
    same)."""
    summary = app.last_summary()
    if summary is not None:
        from tui.headless import write_summary  # (the printer's ~90 modules: only now)

        write_summary(summary, out, app.traffic, app.dashboard.anatomy)
