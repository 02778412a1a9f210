"""Whether a remote host answers, and its tasks' lease (hosts.yaml ``network:``).

A cut link is silent, not closed: TCP keeps retrying, sshd keeps the session and its tasks,
and nothing on either side notices for minutes. So the controller talks to each host all the
time: a *lease keeper* runs on the host over the host's connection (one ``sh`` loop, no
Python), the controller writes a beat (a growing number) to it every :data:`BEAT_INTERVAL`
seconds, and the keeper writes the beat to the host's lease file and echoes it back.

- The echo tells the controller the host answers. No echo for :func:`silent_after` seconds:
  the host is *silent* (:meth:`SSHHostLink.silent_for`), and the supervisor marks its tasks
  unreachable (tui.core.supervisor.unreachable).
- The lease file tells the tasks the controller is there: the watcher beside each task
  (tui.launch.ssh.remote_command) ends the task's process group once the file has not changed
  for the lease. A task whose host is cut off therefore stops itself, and one whose host
  answers again before the lease ran out carries on over the same connection.

The lease file's name is fixed per launcher and host, so a keeper started after a
reconnection renews the lease of any task still running there.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
import shlex
import time
from collections.abc import Awaitable, Callable

import asyncssh

from tui.launch.errors import HostFailure
from tui.launch.ssh.remote_host import INTERPRETER_TIMEOUT, RemoteHost

log = logging.getLogger(__name__)

#: Seconds between beats (the watcher beside a task looks as often).
BEAT_INTERVAL = 1.0
#: How often the controller looks whether the echoes stopped.
LOOK_INTERVAL = 0.5
#: No echo for this long (or half the lease, if shorter): the host is silent. Longer than a
#: busy controller's pause, short beside any lease.
SILENT_AFTER = 5.0

# $1: the lease file's name. Prints the file's path, then for each beat read: writes it to
# the file, then echoes it (so an echo means the file is renewed). EOF (the controller
# closed the channel or went away), an echo nobody reads any more, or a hangup: the file
# goes, and with it the tasks' lease.
_KEEPER = ('umask 077; f="${TMPDIR:-/tmp}/$1"; trap "" PIPE; trap \'rm -f "$f"; exit 0\' HUP TERM; '
           'echo "$f"; '
           'while IFS= read -r b; do printf "%s\\n" "$b" > "$f" || break; echo "$b" || break; done; '
           'rm -f "$f"')


def silent_after(lease: float) -> float:
    """Seconds without an echo after which a host counts as not answering."""
    return min(SILENT_AFTER, lease / 2)


def keeper_line(name: str) -> str:
    """The command line of a host's lease keeper, for its login shell."""
    return shlex.join(["exec", "sh", "-c", _KEEPER, "tfdist-lease", name])


class SSHHostLink:
    """One host's beats and echoes (implements :class:`tui.launch.base.HostLink`).
    ``reconnect`` and ``abandon`` are the launcher's (tui.launch.ssh.launcher)."""

    def __init__(self, host: str, where: str, lease: float, *, reconnect: Callable[[], Awaitable[None]],
                 abandon: Callable[[], None]) -> None:
        self._host = host
        self._where = where
        self._lease = lease
        self._reconnect = reconnect
        self._abandon = abandon
        self._name = f"tfdist-lease-{secrets.token_hex(6)}-{host}"
        #: The lease file's path on the host, once a keeper said it.
        self.lease_file = ""
        self._beat = 0
        self._last_answer = time.monotonic()
        self._silent = False
        self._changed = asyncio.Event()
        self._keeper: asyncssh.SSHClientProcess | None = None
        self._loops: list[asyncio.Task[None]] = []
        self._look: asyncio.Task[None] | None = None

    @property
    def host(self) -> str:
        return self._host

    @property
    def where(self) -> str:
        return self._where

    @property
    def lease(self) -> float:
        return self._lease

    def silent_for(self) -> float | None:
        return time.monotonic() - self._last_answer if self._silent else None

    def changed(self) -> Awaitable[object]:
        return self._changed.wait()

    def abandon(self) -> None:
        self._abandon()

    async def reconnect(self) -> None:
        await self._reconnect()

    async def attach(self, remote: RemoteHost) -> None:
        """Start a keeper on ``remote``'s connection and wait for its first echo (the lease
        file exists then). Raises HostError when the host cannot run it."""
        process = await remote.open_process(keeper_line(self._name), encoding="utf-8")
        try:
            path = await asyncio.wait_for(process.stdout.readline(), INTERPRETER_TIMEOUT)
            self._send(process)
            echo = await asyncio.wait_for(process.stdout.readline(), INTERPRETER_TIMEOUT)
        except (asyncio.TimeoutError, asyncssh.Error, OSError) as exc:
            echo, path = "", f"{exc!r}"
        if not echo.strip():
            process.close()
            raise remote.error(HostFailure.COMMAND_FAILED, f"the lease keeper did not start: {path.strip()}")
        self.lease_file = path.strip()
        self._stop_loops()
        old, self._keeper = self._keeper, process
        if old is not None:
            old.close()
        self._answered()
        self._loops = [asyncio.create_task(self._beats(process), name=f"beats {self._host}"),
                       asyncio.create_task(self._echoes(process), name=f"echoes {self._host}")]
        if self._look is None:
            self._look = asyncio.create_task(self._looks(), name=f"link {self._host}")

    def _send(self, process: asyncssh.SSHClientProcess) -> None:
        self._beat += 1
        process.stdin.write(f"{self._beat}\n")

    async def _beats(self, process: asyncssh.SSHClientProcess) -> None:
        with contextlib.suppress(asyncssh.Error, OSError, RuntimeError):
            while not process.is_closing():
                await asyncio.sleep(BEAT_INTERVAL)
                self._send(process)

    async def _echoes(self, process: asyncssh.SSHClientProcess) -> None:
        with contextlib.suppress(asyncssh.Error, OSError):
            async for line in process.stdout:
                if line.strip():  # (the iteration ends with "" when the channel closes)
                    self._answered()

    def _answered(self) -> None:
        self._last_answer = time.monotonic()
        if self._silent:
            self._silent = False
            log.info("host %s answers again", self._host)
            self._flip()

    async def _looks(self) -> None:
        limit = silent_after(self._lease)
        while True:
            await asyncio.sleep(LOOK_INTERVAL)
            if not self._silent and time.monotonic() - self._last_answer > limit:
                self._silent = True
                log.info("host %s: no answer for %.1f s", self._host, time.monotonic() - self._last_answer)
                self._flip()

    def _flip(self) -> None:
        event, self._changed = self._changed, asyncio.Event()
        event.set()

    def _stop_loops(self) -> None:
        for task in self._loops:
            task.cancel()
        self._loops = []

    def close(self) -> None:
        """Stop beating (the connection's close ends the keeper, which removes the file)."""
        self._stop_loops()
        if self._look is not None:
            self._look.cancel()
            self._look = None
        if self._keeper is not None:
            with contextlib.suppress(asyncssh.Error, OSError, RuntimeError):
                self._keeper.stdin.write_eof()
            self._keeper = None
