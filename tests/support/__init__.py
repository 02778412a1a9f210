"""Shared test helpers: temp cluster configs and the no-orphans check."""

from __future__ import annotations

import asyncio
import shlex
import shutil
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TypeVar

import psutil

from tui.core.events import ControllerEvent, ProgressUpdate, RunStarted, TaskStateChanged, TrainerEvent
from tui.core.progress import ProgressTracker
from tui.launch.owner import RUN_ID_ENV

T = TypeVar("T")

#: What a failed wait says: a text, or a function that describes the state at the time.
What = str | Callable[[], object]


def _timed_out(what: What, timeout: float) -> AssertionError:
    detail = what() if callable(what) else what
    return AssertionError(f"not within {timeout:g} s: {detail}")


def wait_until(probe: Callable[[], T], timeout: float, what: What = "", *,
               interval: float = 0.1) -> T:
    """Poll ``probe`` until it returns something truthy and return that; AssertionError
    (saying ``what``) after ``timeout`` seconds. For things that cannot be awaited (other
    processes, a terminal's screen): never a bare sleep as synchronisation."""
    deadline = time.monotonic() + timeout
    while not (value := probe()):
        if time.monotonic() >= deadline:
            raise _timed_out(what or probe, timeout)
        time.sleep(interval)
    return value


async def async_wait_until(probe: Callable[[], T], timeout: float, *, what: What = "",
                           interval: float = 0.1,
                           pause: Callable[[float], Awaitable[object]] = asyncio.sleep) -> T:
    """:func:`wait_until` for async tests: ``pause`` lets the event loop (or a Textual
    pilot, ``pilot.pause``) run between probes."""
    deadline = time.monotonic() + timeout
    while not (value := probe()):
        if time.monotonic() >= deadline:
            raise _timed_out(what or probe, timeout)
        await pause(interval)
    return value


DEFAULT_TRAINING = {"model": "mlp", "dataset": "digits", "mode": "async", "steps": 1_000_000,
                    "log_every": 50}


def write_hosts(path: Path, *, ps: int = 1, workers: int = 2, nice: bool = False,
                **training: object) -> Path:
    """A localhost cluster with auto ports; training settings override a long async run.

    ``nice``: run the tasks at a lower CPU priority. Tests that drive the UI while a
    training run spins flat out on a 2-core machine use it, so that the app under test (and
    the placement previews it runs) are not starved by the very cluster it watches."""
    settings = {**DEFAULT_TRAINING, **training}
    lines = []
    if nice:
        wrapper = path.parent / "nice-python"
        # Each task has a session of its own, and with the kernel's autogroup scheduling
        # nice only ranks processes within a session: lower the session's share too.
        wrapper.write_text("#!/bin/sh\n(echo 19 > /proc/self/autogroup) 2>/dev/null\n"
                           f"exec nice -n 19 {shlex.quote(sys.executable)} \"$@\"\n")
        wrapper.chmod(0o755)
        lines += ["hosts:", "  localhost:", f"    python: {wrapper}"]
    lines += ["cluster:", "  ps: [" + ", ".join(["localhost:auto"] * ps) + "]",
             "  worker: [" + ", ".join(["localhost:auto"] * workers) + "]", "training:"]
    lines += [f"  {key}: {value}" for key, value in settings.items()]
    lines.append(f"run_dir: {path.parent / 'runs'}")
    path.write_text("\n".join(lines) + "\n")
    return path


def trainer_processes(run_ids: set[str] | None = None) -> list[psutil.Process]:
    """Live ``python -m trainer`` processes (of these runs, when given)."""
    found = []
    for proc in psutil.process_iter(["cmdline", "status"]):
        try:
            cmdline = proc.info["cmdline"] or []
            if proc.info["status"] == psutil.STATUS_ZOMBIE or "trainer" not in cmdline:
                continue
            if "-m" not in cmdline:
                continue
            if run_ids is not None and proc.environ().get(RUN_ID_ENV) not in run_ids:
                continue
            found.append(proc)
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    return found


def run_ids_under(runs_root: Path) -> set[str]:
    return {p.name for p in runs_root.iterdir() if p.is_dir()} if runs_root.exists() else set()


def assert_no_trainers_left(runs_root: Path, within: float = 5.0) -> None:
    """Every task of every run under ``runs_root`` has exited (waiting up to ``within`` s)."""
    ids = run_ids_under(runs_root)
    assert ids, f"no run under {runs_root}"
    wait_until(lambda: not trainer_processes(ids), within,
               what=lambda: [" ".join(p.cmdline()) for p in trainer_processes(ids)])


def with_progress(events: Sequence[ControllerEvent]) -> list[ControllerEvent]:
    """``events`` with the ProgressUpdates the supervisor would publish among them (after a
    trainer event that changed progress, after a worker's exit), from the core's own
    ProgressTracker; ProgressUpdates already there are made again."""
    out: list[ControllerEvent] = []
    tracker: ProgressTracker | None = None
    for event in events:
        if isinstance(event, ProgressUpdate):
            continue
        out.append(event)
        if isinstance(event, RunStarted):
            tracker = ProgressTracker(event.settings.steps)
        elif tracker is not None and (
                (isinstance(event, TrainerEvent) and tracker.update(event.task, event.event, event.t))
                or (isinstance(event, TaskStateChanged) and event.new.is_finished
                    and tracker.worker_exited(event.task))):
            out.append(ProgressUpdate(progress=tracker.snapshot(), t=event.t))
    return out


@contextmanager
def small_filesystem(path: Path, size: str = "256k") -> Iterator[Path]:
    """A tmpfs of ``size`` mounted at ``path`` (made if needed) for the block: a disk that
    fills up. CI runs as root, so this needs no skip; it is unmounted whatever happens."""
    path.mkdir(parents=True, exist_ok=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)], check=True)
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=True)


def fill(directory: Path, leave: int = 0) -> None:
    """Fill ``directory``'s filesystem until at most ``leave`` bytes are free."""
    with open(directory / "filler", "wb") as handle:
        chunk = b"\0" * 4096
        try:
            while shutil.disk_usage(directory).free > leave:
                handle.write(chunk)
                handle.flush()
        except OSError:
            pass  # full
