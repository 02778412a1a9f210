"""``python -m bench.training.app_driver HOSTS.yaml --run-dir DIR``: the Textual app, headless under
Textual's test driver (``App.run_test``), supervising a real run to its end, then quitting
with ``q`` as an operator would. Exit code: the app's (0 when the run succeeded).

The throughput benchmark runs it as its own process so that the app's CPU time can be
measured apart from the benchmark's, as the headless CLI's is.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from pathlib import Path

from tui.app.app import TfdistApp
from tui.common.exit_codes import ExitCode
from tui.config.load import load_config
from tui.core.options import RunOptions

#: The terminal the app thinks it has (the flood benchmark's size).
SIZE = (120, 40)
POLL_SECONDS = 0.25
EXIT_TIMEOUT = ExitCode.TIMEOUT


async def drive(options: RunOptions, timeout: float) -> int:
    """Run the app until the run has finished (or ``timeout``), then quit."""
    app = TfdistApp(options)
    try:
        async with app.run_test(size=SIZE) as pilot:
            deadline = time.monotonic() + timeout
            while app.dashboard.finished is None and not app.dashboard.refused:
                if time.monotonic() > deadline:
                    app.exit(int(EXIT_TIMEOUT), int(EXIT_TIMEOUT))
                    break
                await pilot.pause(POLL_SECONDS)
            else:
                await pilot.press("q")  # nothing is running any more: quits without asking
            while app.is_running:
                await pilot.pause(0.1)
    finally:
        if app.core is not None:  # stops any task still running (timeout)
            app.core.close(timeout=15.0)
    return int(app.return_code if app.return_code is not None else ExitCode.OK)


def main(argv: list[str] | None = None) -> int:
    """Parse the command line, drive the app, return its exit code."""
    parser = argparse.ArgumentParser(prog="python -m bench.training.app_driver", description=__doc__)
    parser.add_argument("hosts", type=Path)
    parser.add_argument("--run-dir", type=Path, required=True)
    parser.add_argument("--timeout", type=float, default=600.0)
    args = parser.parse_args(argv)
    options = RunOptions(config=load_config(args.hosts), runs_root=args.run_dir)
    return asyncio.run(drive(options, args.timeout))


if __name__ == "__main__":
    sys.exit(main())
