"""Port reservations on a remote host: a small remote process (the ``ports`` snippet) binds
free ports and keeps them bound until each is released, so no other program takes them
between the preflight and the task's start."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Mapping
from dataclasses import dataclass

import asyncssh

from tui.launch import snippets
from tui.launch.base import PortReservation
from tui.launch.errors import HostFailure
from tui.launch.lines import Stream
from tui.launch.ssh import deploy, limits
from tui.launch.ssh.remote_command import parse_pid_line, python_command
from tui.launch.ssh.remote_host import RemoteHost
from tui.launch.streams import Prefixed, merged_lines, read_first_line


async def hold_ports(host: RemoteHost, n: int, avoid: frozenset[int]) -> list[PortReservation]:
    """Reserve ``n`` distinct free ports on ``host``, none in ``avoid``. Raises HostError."""
    command = python_command(host.spec.interpreter, snippets.source("ports"),
                             ["hold", str(n), *(str(p) for p in sorted(avoid))], env=host.spec.env)
    try:
        process = await host.open_process(command.shell_line())
        process.stdin.write(command.env_input())
    except (asyncssh.Error, OSError) as exc:
        raise host.error(HostFailure.CONNECTION_LOST, f"cannot reserve ports: {exc}") from None
    holder = PortHolder(host, process)
    try:
        ports = await holder.start(n)
    except BaseException:
        holder.close()
        raise
    host.holders.add(holder)
    return [SSHPortReservation(port, holder) for port in ports]


class PortHolder:
    """A remote ``ports hold`` process keeping some ports bound until each is released."""

    def __init__(self, host: RemoteHost, process: asyncssh.SSHClientProcess) -> None:
        self._host = host
        self._process = process
        self._acks: dict[int, asyncio.Future[None]] = {}
        self._open: set[int] = set()
        self._reader: asyncio.Task[None] | None = None

    async def start(self, n: int) -> list[int]:
        """Wait for the holder's answer: the ports it holds."""
        try:
            answer, rest = await asyncio.wait_for(self._answer(), limits.INTERPRETER.of(n))
        except (asyncio.TimeoutError, asyncssh.Error, OSError) as exc:
            raise self._host.error(HostFailure.COMMAND_FAILED,
                                   f"cannot reserve {n} free ports: no answer ({exc!r})") from None
        if not isinstance(answer, Mapping) or not isinstance(answer.get("ports"), list):
            try:
                stderr = await asyncio.wait_for(self._process.stderr.read(),
                                                limits.FAILURE_OUTPUT.of())
            except (asyncio.TimeoutError, asyncssh.Error, OSError):
                stderr = b""
            detail = answer.get("error") if isinstance(answer, Mapping) else deploy.last_lines(
                stderr.decode("utf-8", "replace"))
            raise self._host.error(HostFailure.COMMAND_FAILED, f"cannot reserve {n} free ports: {detail}")
        ports = [int(p) for p in answer["ports"]]
        self._open = set(ports)
        self._reader = asyncio.create_task(self._read_acks(rest))
        return ports

    async def _answer(self) -> tuple[object, bytes]:
        """The snippet's result line (after the wrapper's pid line) and the bytes after it."""
        rest = b""
        while True:
            line, rest = await read_first_line(Prefixed(rest, self._process.stdout))
            if line is None:
                return None, rest
            text = line.decode("utf-8", "replace")
            if parse_pid_line(text) is None:
                return snippets.parse_result(text), rest

    async def _read_acks(self, head: bytes) -> None:
        try:
            async for line in merged_lines([(Prefixed(head, self._process.stdout), Stream.STDOUT)]):
                word = line.text.removeprefix("released ").strip()
                future = self._acks.get(int(word)) if word.isdigit() else None
                if future is not None and not future.done():
                    future.set_result(None)
        finally:
            self._settle_all()
            self._host.holders.discard(self)

    def release(self, port: int) -> None:
        if port not in self._open:
            return
        self._open.discard(port)
        try:
            self._process.stdin.write(f"release {port}\n".encode())
            if not self._open:
                self._process.stdin.write_eof()
        except (asyncssh.Error, OSError, RuntimeError):
            return  # the holder is gone, and with it its ports
        # Starts and `go` on this host wait for the holder's answer (RemoteHost.releases_settled).
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._acks[port] = future
        self._host.pending_releases.add(future)

    def close(self) -> None:
        self._open.clear()
        with contextlib.suppress(asyncssh.Error, OSError, RuntimeError):
            self._process.close()
        self._settle_all()

    def _settle_all(self) -> None:
        for future in self._acks.values():
            if not future.done():
                future.set_result(None)


@dataclass(eq=False)
class SSHPortReservation:
    """A port held on a remote host by a :class:`PortHolder`. Implements
    :class:`tui.launch.base.PortReservation`."""

    port: int
    _holder: PortHolder

    def release(self) -> None:
        self._holder.release(self.port)
