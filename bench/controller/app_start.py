"""The first start as the README's user has it: ``tfdist-tui HOSTS.yaml``, the Textual app in a
terminal (a pseudo-terminal of 100x30 here), from running the command until every worker has
stepped. The app starts its core, and with it this machine's warm pools, before Textual loads,
and sends the start command once it is up; a cold start's tasks start only then.

Each worker's first step is read from the run directory's ``events.jsonl``, stamped by the
task itself (its ``t``), so how often this module looks at the file changes nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import json
import os
import pty
import signal
import struct
import sys
import termios
import time
from pathlib import Path

#: The terminal the app runs in (columns, rows).
SIZE = (100, 30)
#: How often the run directory is looked at while waiting for the first steps.
POLL_SECONDS = 0.05
#: How long the app may take to stop its tasks and exit once told to (SIGTERM).
EXIT_TIMEOUT = 60.0


def first_steps(runs: Path) -> dict[str, float]:
    """Each worker's first step time (the task's own wall-clock stamp) in the one run under
    ``runs``; empty until the run directory exists."""
    found: dict[str, float] = {}
    for events in runs.glob("*/events.jsonl"):
        with events.open(encoding="utf-8", errors="replace") as lines:
            for line in lines:
                # The last line may be half written: a partial record is read next time.
                with contextlib.suppress(ValueError):
                    record = json.loads(line)
                    event = record.get("event") if record.get("type") == "trainer_event" else None
                    if isinstance(event, dict) and event.get("event") == "step":
                        found.setdefault(str(record["task"]), float(event["t"]))
    return found


async def app_start(hosts: Path, runs: Path, workers: int, *, cold: bool, repo: Path,
                    timeout: float) -> float:
    """Seconds from running the app on ``hosts`` (this checkout's code) until every one of its
    ``workers`` stepped; the app is then told to quit (SIGTERM: it stops its tasks first)."""
    primary, secondary = pty.openpty()
    columns, rows = SIZE
    fcntl.ioctl(secondary, termios.TIOCSWINSZ, struct.pack("HHHH", rows, columns, 0, 0))
    env = {**os.environ, "TERM": "xterm-256color", "COLUMNS": str(columns), "LINES": str(rows),
           "PYTHONPATH": os.pathsep.join(filter(None, [str(repo), os.environ.get("PYTHONPATH")]))}
    argv = [sys.executable, "-m", "tui", str(hosts), "--run-dir", str(runs), *(["--cold"] if cold else [])]
    loop = asyncio.get_running_loop()
    started = time.time()
    try:
        app = await asyncio.create_subprocess_exec(
            *argv, stdin=secondary, stdout=secondary, stderr=secondary, cwd=hosts.parent, env=env,
            start_new_session=True)
    finally:
        os.close(secondary)
    # What the app draws is read and dropped: a terminal nobody reads would block its writes.
    loop.add_reader(primary, _drain, loop, primary)
    try:
        wanted = {f"worker{i}" for i in range(workers)}
        async with asyncio.timeout(timeout):
            while True:
                steps = first_steps(runs)
                if wanted <= steps.keys():
                    return max(steps[name] for name in wanted) - started
                if app.returncode is not None:
                    missing = sorted(wanted - steps.keys())
                    raise RuntimeError(f"the app exited ({app.returncode}) before {missing} stepped")
                await asyncio.sleep(POLL_SECONDS)
    finally:
        with contextlib.suppress(ProcessLookupError):
            app.send_signal(signal.SIGTERM)
        try:
            await asyncio.wait_for(app.wait(), EXIT_TIMEOUT)
        except asyncio.TimeoutError:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(app.pid, signal.SIGKILL)  # its own session: the app and what it started
            await app.wait()
        loop.remove_reader(primary)
        os.close(primary)


def _drain(loop: asyncio.AbstractEventLoop, fd: int) -> None:
    try:
        if os.read(fd, 65536):
            return
    except OSError:  # EIO: every holder of the terminal's other end has closed it
        pass
    loop.remove_reader(fd)
