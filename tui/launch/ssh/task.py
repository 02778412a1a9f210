"""A task running on a remote host, as the SSH launcher (:mod:`tui.launch.ssh.launcher`) started it:
its output, its exit, its stdin, and signals to its process group over the host's
connection."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncGenerator

import asyncssh

from tui.launch.errors import HostError, HostFailure
from tui.launch.lines import MAX_LINE_BYTES, OutputBatch
from tui.launch.ssh.host_link import SSHHostLink
from tui.launch.ssh.remote_host import RemoteHost
from tui.launch.streams import task_output


class SSHTask:
    """A task running on a remote host. Implements :class:`tui.launch.base.RunningTask`."""

    def __init__(self, host: RemoteHost, process: asyncssh.SSHClientProcess, pid: int, head: bytes,
                 max_line: int = MAX_LINE_BYTES, link: SSHHostLink | None = None) -> None:
        self._host = host
        self._link = link
        self._process = process
        self._pid = pid
        self._head = head
        self._max_line = max_line
        self._stdin_closed = False
        #: Forked from the host's warm pool; a notice to show once (its pool failed).
        self.warm = False
        self.launch_notice = ""

    @property
    def pid(self) -> int:
        """The remote pid, which is also the task's process group id."""
        return self._pid

    @property
    def host(self) -> str:
        return self._host.spec.name

    async def output(self) -> AsyncGenerator[OutputBatch, None]:
        """Both streams merged in arrival order, a read at a time."""
        process = self._process
        async for batch in task_output(process.stdout, process.stderr, self._max_line, self._head):
            yield batch

    async def wait(self) -> int:
        """The exit code (negative: the signal that killed it). Raises :class:`HostError`
        (CONNECTION_LOST) when the connection went away before the exit was reported; the
        task itself then ended too, through EOF on its stdin."""
        # The channel's close, not asyncssh's ``wait()``: that one (``communicate``) takes
        # whatever output the reader of :meth:`output` has not read yet and returns it, to be
        # dropped here. A task that exits right after printing (its last words: why it died)
        # lost them whenever the reader was between two reads (lines.Pace gathers 20 ms).
        await self._process.wait_closed()
        code = self._process.returncode
        # asyncssh gives -1 for a channel that closed with no exit status (no process ends
        # with -1: statuses are 0-255, signals come as exit-signal): the connection went,
        # not "killed by SIGHUP" as a local -1 would mean.
        if code is None or (code == -1 and not self._process.exit_signal):
            raise self._host.error(HostFailure.CONNECTION_LOST,
                                   f"the connection closed before pid {self._pid} reported its exit; "
                                   f"on the host the task ends too (EOF on its stdin, or the watcher "
                                   f"beside it: tui.launch.ssh.remote_command)")
        return code

    async def send(self, line: str) -> None:
        if self._stdin_closed:
            raise BrokenPipeError(f"stdin of {self.host} pid {self._pid} is closed")
        # A port released for this task must be free before the task may bind it.
        await self._host.releases_settled()
        try:
            self._process.stdin.write(line.encode() + b"\n")
            await self._process.stdin.drain()
        except (asyncssh.Error, ConnectionError, RuntimeError) as exc:
            raise BrokenPipeError(f"stdin of {self.host} pid {self._pid}: {exc}") from exc

    async def terminate(self) -> None:
        self._close_stdin()
        await self._signal("TERM")

    async def kill(self) -> None:
        self._close_stdin()
        await self._signal("KILL")

    def _close_stdin(self) -> None:
        if self._stdin_closed:
            return
        self._stdin_closed = True
        with contextlib.suppress(asyncssh.Error, OSError, RuntimeError):
            self._process.stdin.write_eof()

    async def _signal(self, name: str) -> None:
        if self._process.returncode is not None or self._host.lost.is_set():
            return  # exited, or its connection is gone and EOF on stdin ends it
        if self._link is not None and self._link.silent_for() is not None:
            # A signal cannot reach a host that does not answer: give up on the connection
            # (the exit is reported as lost) and leave the task to its lease.
            self._link.abandon()
            return
        try:
            await self._host.signal_group(self._pid, name)
        except HostError as exc:
            if exc.failure is not HostFailure.CONNECTION_LOST:
                raise
