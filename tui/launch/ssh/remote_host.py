"""One remote host's SSH plumbing: its connection (opened once, however many callers ask),
more connections when sshd's ``MaxSessions`` refuses another channel, short commands and
snippets, batched signals, and port releases still on their way."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

import asyncssh

from tui.config.cluster import HostSpec
from tui.launch import snippets
from tui.launch.errors import HostError, HostFailure
from tui.launch.ssh import deploy, limits
from tui.launch.ssh.connect import where
from tui.launch.ssh.remote_command import python_command, signal_groups_line

log = logging.getLogger(__name__)

#: How long a short shell command (one signal, one read) and a command that starts the host's
#: Python may take (:mod:`tui.launch.ssh.limits`; a step that does more at once asks for more).
COMMAND_TIMEOUT = limits.SHELL.of()
INTERPRETER_TIMEOUT = limits.INTERPRETER.of()
#: How long a start waits for port releases sent before it to take effect.
RELEASE_TIMEOUT = 5.0
#: Connections to one host at most, when sshd's MaxSessions keeps refusing channels.
MAX_CONNECTIONS = 8
#: How long a closed connection's peer may take to answer the close before it is dropped.
CLOSE_WAIT = 5.0
_SESSION_LIMIT_CODES = (asyncssh.OPEN_ADMINISTRATIVELY_PROHIBITED, asyncssh.OPEN_CONNECT_FAILED)

#: Opens a connection to a host; sets the event (if given) when the connection closes.
Connector = Callable[[HostSpec, asyncio.Event | None], Awaitable[asyncssh.SSHClientConnection]]


async def close_connections(connections: Sequence[asyncssh.SSHClientConnection]) -> None:
    """Close ``connections`` and wait for each peer's answer, at most :data:`CLOSE_WAIT` each.

    A peer that never answers the close (a cut link, a wedged sshd, a jump host gone) must not
    keep the controller from ending: its tasks end by their lease anyway."""
    for conn in connections:
        conn.close()
    for conn in connections:
        try:
            await asyncio.wait_for(conn.wait_closed(), CLOSE_WAIT)
        except asyncio.TimeoutError:
            conn.abort()
        except Exception:  # a connection that failed is closed as well
            pass


class Closable(Protocol):
    def close(self) -> None: ...


@dataclass
class _SignalBatch:
    """Process groups to send one signal to with one remote command."""

    pgids: list[int] = field(default_factory=list)
    sent: asyncio.Task[None] | None = None


class RemoteHost:
    """One remote host's connection(s) and what runs over them."""

    def __init__(self, spec: HostSpec, connect: Connector) -> None:
        self.spec = spec
        self._connect = connect
        self.connections: list[asyncssh.SSHClientConnection] = []
        self.lost = asyncio.Event()  # the first connection went away
        self._first: asyncio.Task[asyncssh.SSHClientConnection] | None = None
        self._signal_batches: dict[str, _SignalBatch] = {}  # by signal name, until sent
        self.holders: set[Closable] = set()  # port holders, closed with the host
        self.pending_releases: set[asyncio.Future[None]] = set()
        self._more = asyncio.Lock()

    @property
    def connect_failed(self) -> bool:
        """Connecting failed (the error is kept: make a new RemoteHost to try again)."""
        task = self._first
        return task is not None and task.done() and (task.cancelled() or task.exception() is not None)

    @property
    def connecting(self) -> bool:
        """A connection was asked for (under way, made, or failed)."""
        return self._first is not None

    @property
    def where(self) -> str:
        return where(self.spec)

    def error(self, failure: HostFailure, detail: str) -> HostError:
        return HostError(self.spec.name, self.where, failure, detail)

    async def first_connection(self) -> asyncssh.SSHClientConnection:
        """The host's connection, opened once however many callers ask at the same time."""
        if self._first is None:
            self._first = asyncio.create_task(self._connect_first(), name=f"connect {self.spec.name}")
        return await asyncio.shield(self._first)

    async def _connect_first(self) -> asyncssh.SSHClientConnection:
        conn = await self._connect(self.spec, self.lost)
        self.connections.insert(0, conn)
        return conn

    async def open_process(self, command: str, encoding: str | None = None) -> asyncssh.SSHClientProcess:
        """A new session channel running ``command`` (bytes I/O unless ``encoding``); opens
        another connection when sshd's MaxSessions refuses one more channel on the others."""
        await self.first_connection()
        full: set[int] = set()  # ids of the connections that refused a channel
        while True:
            for conn in list(self.connections):
                if id(conn) in full:
                    continue
                try:
                    return await conn.create_process(command, encoding=encoding, errors="replace")
                except asyncssh.ChannelOpenError as exc:
                    # OpenSSH answers "open failed" (CONNECT_FAILED) at its MaxSessions limit.
                    if exc.code not in _SESSION_LIMIT_CODES:
                        raise
                    full.add(id(conn))
            async with self._more:
                # Another caller may have opened one meanwhile; then try that one first.
                if all(id(conn) in full for conn in self.connections):
                    if len(self.connections) >= MAX_CONNECTIONS:
                        raise self.error(HostFailure.COMMAND_FAILED,
                                         f"sshd refuses more sessions even on {MAX_CONNECTIONS} "
                                         f"connections (MaxSessions in its sshd_config)")
                    self.connections.append(await self._connect(self.spec, None))
                    log.info("host %s: opened connection %d (sshd's MaxSessions reached)",
                             self.spec.name, len(self.connections))

    async def signal_group(self, pgid: int, name: str) -> None:
        """Send signal ``name`` to process group ``pgid``. Signals asked for at the same
        moment (stopping every task at once) share one remote ``kill`` command: a channel
        per signal could exceed sshd's MaxSessions while every task holds one already."""
        batch = self._signal_batches.get(name)
        if batch is None:
            batch = _SignalBatch()
            self._signal_batches[name] = batch
            batch.sent = asyncio.create_task(self._send_signals(name, batch))
        batch.pgids.append(pgid)
        assert batch.sent is not None
        await asyncio.shield(batch.sent)

    async def _send_signals(self, name: str, batch: _SignalBatch) -> None:
        await asyncio.sleep(0)  # let the other stops issued in this moment join the batch
        if self._signal_batches.get(name) is batch:
            del self._signal_batches[name]
        result = await self.run(signal_groups_line(batch.pgids, name), limits.SHELL.of(len(batch.pgids)))
        # Status 1: some group is gone already (its task exited), which is what we wanted.
        if result.exit_status not in (0, 1):
            raise self.error(HostFailure.COMMAND_FAILED,
                             f"kill -{name} of process groups {batch.pgids} failed: "
                             f"{deploy.last_lines(str(result.stderr or ''))}")

    async def run(self, command: str, timeout: float = COMMAND_TIMEOUT,
                  stdin: bytes = b"") -> asyncssh.SSHCompletedProcess:
        """Run a short command to completion, ``stdin`` its whole input (an environment:
        :meth:`RemoteCommand.env_input`); stdout/stderr come back as text."""
        try:
            process = await self.open_process(command, encoding="utf-8")
            if stdin:
                process.stdin.write(stdin.decode("utf-8", "surrogateescape"))
            process.stdin.write_eof()
            return await process.wait(timeout=timeout)
        except asyncssh.TimeoutError:
            raise self.error(HostFailure.COMMAND_FAILED, f"a command did not finish within {timeout:g} s"
                             ) from None
        except (asyncssh.Error, OSError) as exc:
            raise self.error(HostFailure.CONNECTION_LOST, str(exc)) from None

    async def run_snippet(self, name: str, args: Sequence[str],
                          timeout: float = INTERPRETER_TIMEOUT) -> object:
        """Run one of :mod:`tui.launch.snippets` with the host's python; its answer."""
        command = python_command(self.spec.interpreter, snippets.source(name), args, env=self.spec.env)
        result = await self.run(command.shell_line(), timeout, stdin=command.env_input())
        answer = snippets.parse_result(str(result.stdout or ""))
        if answer is None:
            raise self.error(HostFailure.COMMAND_FAILED,
                             f"{name} check failed ({deploy.describe_status(result)}): "
                             f"{deploy.last_lines(str(result.stderr or ''))}")
        return answer

    async def releases_settled(self) -> None:
        """Wait (briefly) until every port release sent so far took effect on the host."""
        pending = {f for f in self.pending_releases if not f.done()}
        self.pending_releases = pending
        if pending:
            await asyncio.wait(pending, timeout=RELEASE_TIMEOUT)

    async def close(self) -> None:
        """Close every connection: remote tasks still running see EOF on stdin and exit."""
        for holder in list(self.holders):
            holder.close()
        if self._first is not None and not self._first.done():
            self._first.cancel()
            await asyncio.gather(self._first, return_exceptions=True)
        await close_connections(self.connections)
        self.connections.clear()
