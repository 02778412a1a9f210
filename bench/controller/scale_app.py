"""``python -m bench.controller.scale_app HOSTS.yaml --runs DIR``: the Textual app under Textual's test
driver (``App.run_test``, as :mod:`bench.training.app_driver`), started on a run of
:mod:`bench.controller.scale`, in a process of its own so that its CPU time (and its core process's)
can be read apart from the benchmark's.

It speaks to :mod:`bench.controller.scale` by lines: it prints ``core PID`` once the core process is
up and ``up`` once every task shows running; it then reads commands on stdin: ``keys
SECONDS`` (press tab for that long, print ``keys`` and the latencies in ms as JSON) and
``stop`` (stop every task, wait for the run to finish, quit with ``q``)."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import threading
import time
from pathlib import Path

from bench.controller.flood import _press_latencies
from tui.app.app import TfdistApp
from tui.app.process_bridge import ProcessBridge
from tui.config.load import load_config
from tui.core.commands import StopAll
from tui.core.options import RunOptions

#: The terminal the app thinks it has (the flood benchmark's size).
SIZE = (120, 40)


def _say(text: str) -> None:
    sys.stdout.write(text + "\n")
    sys.stdout.flush()


def _commands(loop: asyncio.AbstractEventLoop) -> asyncio.Queue[str]:
    """stdin's lines, on a thread, into a queue of the loop (EOF reads as ``stop``)."""
    queue: asyncio.Queue[str] = asyncio.Queue()

    def read() -> None:
        for line in sys.stdin:
            loop.call_soon_threadsafe(queue.put_nowait, line.strip())
        loop.call_soon_threadsafe(queue.put_nowait, "stop")

    threading.Thread(target=read, daemon=True).start()
    return queue


async def drive(options: RunOptions, tasks: int) -> int:
    """Start the run in the app, report, obey commands until ``stop``."""
    app = TfdistApp(options)
    commands = _commands(asyncio.get_running_loop())
    try:
        async with app.run_test(size=SIZE) as pilot:
            while app.core is None:
                await pilot.pause(0.05)
            if isinstance(app.core, ProcessBridge):
                _say(f"core {app.core.process.pid}")
            rows = app.dashboard.rows
            while len(rows) < tasks or not all(r.state.value == "running" for r in rows.values()):
                if app.dashboard.refused or app.dashboard.finished is not None:
                    _say("failed")
                    return 1
                await pilot.pause(0.1)
                rows = app.dashboard.rows
            _say("up")
            while (command := await commands.get()) != "stop":
                if command.startswith("keys "):
                    latencies = await _press_latencies(app, time.monotonic() + float(command.split()[1]))
                    _say("keys " + json.dumps(latencies))
            app.core.send(StopAll())
            while app.dashboard.finished is None:  # (q would ask while tasks still show running)
                await pilot.pause(0.1)
            await pilot.press("q")
            while app.is_running:
                await pilot.pause(0.1)
    finally:
        if app.core is not None:
            app.core.close(timeout=15.0)
    return 0


def main(argv: list[str] | None = None) -> int:
    """Parse the command line and drive the app."""
    parser = argparse.ArgumentParser(prog="python -m bench.controller.scale_app", description=__doc__)
    parser.add_argument("hosts", type=Path)
    parser.add_argument("--runs", type=Path, required=True)
    args = parser.parse_args(argv)
    config = load_config(args.hosts)
    return asyncio.run(drive(RunOptions(config=config, runs_root=args.runs), len(config.tasks)))


if __name__ == "__main__":
    sys.exit(main())
