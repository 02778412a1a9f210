"""TensorBoard as a task the controller owns: started on this machine for one run's
directory (or several runs side by side), on a port the system picks, in a process group of
its own that dies with the controller; stopped when the session closes, as every task.

TensorBoard is asked for port 0 and says the port it got in its first lines (``TensorBoard
2.21.0 at http://127.0.0.1:PORT/``): no port is picked here and released for it to take,
which would race (tensorflow/tensorflow#21492 is the same trap for servers)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import signal
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from tui.launch.deathsig import dying_with_parent

#: How long TensorBoard may take to say its address (it imports TensorFlow when installed:
#: 14 s measured on a loaded two-core machine).
START_LIMIT = 120.0
#: After SIGTERM, how long before SIGKILL.
STOP_GRACE = 5.0
_URL = re.compile(rb"(http://[^\s]+:\d+/)")


class TensorBoardError(Exception):
    """TensorBoard could not be started (its own words, or why not)."""


@dataclass(frozen=True)
class Board:
    """A running TensorBoard: its address and the run directories it shows."""

    url: str
    run_dirs: tuple[Path, ...]
    pid: int


class TensorBoard:
    """At most one TensorBoard at a time: :meth:`open` for other directories replaces it."""

    def __init__(self, python: str = sys.executable) -> None:
        self._python = python
        self._process: asyncio.subprocess.Process | None = None
        self._drain: asyncio.Task[None] | None = None
        self.board: Board | None = None

    async def open(self, run_dirs: Sequence[Path]) -> Board:
        """TensorBoard for ``run_dirs`` (the one already running when it shows the same);
        raises :class:`TensorBoardError`."""
        dirs = tuple(run_dirs)
        if not dirs:
            raise TensorBoardError("no run directory to show yet")
        if self.board is not None and self.board.run_dirs == dirs and self._alive():
            return self.board
        await self.close()
        argv = [self._python, "-m", "tensorboard.main", *_logdir_flags(dirs), "--port", "0",
                # Only this machine: the event files may be private; ssh -L reaches it from afar.
                "--host", "127.0.0.1",
                # The Python reader: the fast one is a second process outside its group's reach.
                "--load_fast", "false"]
        try:
            command, preexec = dying_with_parent(argv, os.environ.get("PATH"))
            process = await asyncio.create_subprocess_exec(
                *command, stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.STDOUT, start_new_session=True, preexec_fn=preexec)
        except OSError as exc:
            raise TensorBoardError(f"cannot run {self._python}: {exc.strerror or exc}") from None
        self._process = process
        try:
            url = await asyncio.wait_for(_address(process), START_LIMIT)
        except (asyncio.TimeoutError, TensorBoardError) as exc:
            await self.close()
            raise TensorBoardError(str(exc) or f"TensorBoard did not say its address in {START_LIMIT:g} s") \
                from None
        # Its output is read on to the end, so a full pipe never blocks it.
        self._drain = asyncio.ensure_future(_discard(process))
        self.board = Board(url=url, run_dirs=dirs, pid=process.pid)
        return self.board

    def _alive(self) -> bool:
        return self._process is not None and self._process.returncode is None

    async def close(self) -> None:
        """Stop TensorBoard's process group (SIGTERM, SIGKILL after a grace) and wait for it."""
        process, self._process, self.board = self._process, None, None
        if process is None:
            return
        _signal_group(process.pid, signal.SIGTERM)
        try:
            await asyncio.wait_for(process.wait(), STOP_GRACE)
        except asyncio.TimeoutError:
            _signal_group(process.pid, signal.SIGKILL)
            await process.wait()
        # Whatever it started is in its group: gone with it (ESRCH once none is left).
        _signal_group(process.pid, signal.SIGKILL)
        if self._drain is not None:
            self._drain.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._drain
            self._drain = None


def _logdir_flags(dirs: tuple[Path, ...]) -> list[str]:
    if len(dirs) == 1:
        return ["--logdir", str(dirs[0])]
    # Each run under its own name (the run id), as TensorBoard's run selector shows them.
    return ["--logdir_spec", ",".join(f"{d.name}:{d}" for d in dirs)]


async def _address(process: asyncio.subprocess.Process) -> str:
    """The URL TensorBoard prints once it serves; its last lines if it ends first."""
    assert process.stdout is not None
    last: list[str] = []
    while line := await process.stdout.readline():
        if found := _URL.search(line):
            return found.group(1).decode()
        last = [*last[-4:], line.decode(errors="replace").rstrip()]
    await process.wait()
    raise TensorBoardError(f"TensorBoard exited with code {process.returncode}: " + " / ".join(last))


async def _discard(process: asyncio.subprocess.Process) -> None:
    assert process.stdout is not None
    while await process.stdout.read(65536):
        pass


def _signal_group(pid: int, sig: signal.Signals) -> None:
    # Its own group (start_new_session): the pid is the group id, unused while a member lives.
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, sig)
