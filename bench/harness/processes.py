"""The processes of a benchmark run: each started in its own session, its output read line
by line, its exit time recorded; and the tag (:data:`TAG_ENV`) that every process of a run
carries in its environment, by which whatever is left of a run is found and killed."""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO

import psutil

REPO = Path(__file__).resolve().parents[2]
#: Marks every process a benchmark run starts, so that none can outlive the run.
TAG_ENV = "TFDIST_BENCH_TAG"


class Child:
    """A process in its own session (its pid is its process group). Its stdout, when
    ``capture`` is set, is read line by line on a thread and handed to ``on_line`` with the
    arrival time; its exit time is recorded by another thread as it happens."""

    def __init__(self, name: str, argv: Sequence[str], env: dict[str, str], *,
                 on_line: Callable[[str], None] | None = None, output: IO[bytes] | None = None) -> None:
        self.name = name
        self.exited_at: float | None = None
        self.exited = threading.Event()
        self.stderr_tail: list[str] = []
        self.on_line = on_line
        captured = on_line is not None
        self.proc = subprocess.Popen(
            list(argv), env=env, cwd=REPO, stdin=subprocess.PIPE,
            stdout=subprocess.PIPE if captured else (output or subprocess.DEVNULL),
            stderr=subprocess.PIPE if captured else subprocess.STDOUT if output else subprocess.DEVNULL,
            # Own session and process group, as the controller's local launcher does: with
            # Linux autogroup scheduling, session membership decides CPU shares, so every
            # side must be launched alike.
            start_new_session=True)
        self._threads = [threading.Thread(target=self._watch, daemon=True)]
        if captured:
            self._threads += [threading.Thread(target=self._read, daemon=True),
                              threading.Thread(target=self._read_err, daemon=True)]
        for thread in self._threads:
            thread.start()

    @property
    def pid(self) -> int:
        """The process id, which is also its process group id."""
        return self.proc.pid

    def _read(self) -> None:
        assert self.proc.stdout is not None and self.on_line is not None
        for raw in self.proc.stdout:
            self.on_line(raw.decode("utf-8", "replace"))

    def _read_err(self) -> None:
        assert self.proc.stderr is not None
        for raw in self.proc.stderr:
            self.stderr_tail = [*self.stderr_tail[-19:], raw.decode("utf-8", "replace").rstrip()]

    def _watch(self) -> None:
        self.proc.wait()
        self.exited_at = time.time()
        self.exited.set()

    def signal_group(self, sig: signal.Signals) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, sig)

    def kill(self) -> None:
        """SIGKILL the process group (if still alive) and reap the process."""
        if self.proc.poll() is None:
            self.signal_group(signal.SIGKILL)
        self.proc.wait()
        with contextlib.suppress(OSError):
            if self.proc.stdin is not None:
                self.proc.stdin.close()


def kill_tagged(tag: str) -> list[str]:
    """SIGKILL every process carrying ``tag`` in its environment; returns what was alive."""
    found: list[psutil.Process] = []
    for process in psutil.process_iter(["status"]):
        try:
            if process.pid == os.getpid() or process.info["status"] == psutil.STATUS_ZOMBIE:
                continue
            if process.environ().get(TAG_ENV) == tag:
                found.append(process)
        except psutil.Error:
            continue  # gone meanwhile, or not ours to inspect
    described = []
    for process in found:
        with contextlib.suppress(psutil.Error):
            described.append(" ".join(process.cmdline()))
            process.kill()
    psutil.wait_procs(found, timeout=5)
    return described


def environment(tag: str, extra: dict[str, str] | None = None) -> dict[str, str]:
    """This process's environment with ``extra`` and the run's tag."""
    # PYTHONPATH is left alone: every process starts in REPO with ``-m``, which puts REPO on
    # its path, and a bare task's environment stays exactly what plan_run made it.
    return {**os.environ, **(extra or {}), TAG_ENV: tag}


def wait(until: Callable[[], bool], timeout: float, every: float = 0.05) -> bool:
    """Poll ``until`` every ``every`` seconds until it holds; False if the timeout came first."""
    deadline = time.monotonic() + timeout
    while not until():
        if time.monotonic() > deadline:
            return False
        time.sleep(every)
    return True


async def stacks_of(pid: int) -> str:
    """Every thread's Python stack in process ``pid`` (py-spy's dump), for the message of a
    benchmark or test whose controller did not end: where it waits is the first thing to know,
    and it is gone by the time anyone looks. Empty when py-spy is not installed (the test
    extra installs it) or cannot attach."""
    spy = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
    if not os.access(spy, os.X_OK):
        return ""
    pipe = asyncio.subprocess.PIPE
    dump = await asyncio.create_subprocess_exec(spy, "dump", "--pid", str(pid), stdout=pipe,
                                                stderr=asyncio.subprocess.STDOUT)
    try:
        said, _ = await asyncio.wait_for(dump.communicate(), 30)
    except asyncio.TimeoutError:
        dump.kill()
        await dump.wait()
        return ""
    return "\nits stacks (py-spy dump):\n" + said.decode(errors="replace")
