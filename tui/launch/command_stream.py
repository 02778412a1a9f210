"""Long-lived commands on a host, talked to line by line: the traffic monitor's sampler (one
``ss`` listing per line it is sent) runs as one process per host for the whole run, instead of
a new command (and, over SSH, a new channel) per sample.

Such a process ends when its stdin closes: :meth:`CommandStream.close`, the controller's
exit, or its SSH connection's end.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from tui.config.cluster import HostSpec
from tui.launch.base import LaunchError

if TYPE_CHECKING:
    import asyncssh

#: How long :meth:`CommandStream.close` waits for the process to go after its stdin closed.
CLOSE_TIMEOUT = 5.0


class StreamNotSupported(LaunchError):
    """The host's launcher runs short commands only (a Slurm step per command)."""


class CommandStream(Protocol):
    """A running command: lines to its stdin, lines from its stdout."""

    async def send(self, line: str) -> None:
        """Write ``line`` and a newline. Raises OSError when the process is gone."""
        ...

    async def readline(self) -> str:
        """The next line of stdout without its newline; ``""`` at EOF (then :meth:`at_eof`
        is true: an empty line is a line too)."""
        ...

    def at_eof(self) -> bool:
        """Stdout has ended."""
        ...

    def close_stdin(self) -> None:
        """Close stdin now, without waiting: the command ends at EOF. Idempotent."""
        ...

    async def close(self) -> None:
        """Close stdin and wait briefly for the command to exit. Idempotent."""
        ...


@runtime_checkable
class CommandStreamer(Protocol):
    """A launcher that can keep a command running on its hosts."""

    async def open_command(self, host: HostSpec, argv: Sequence[str]) -> CommandStream: ...


class LocalCommandStream:
    """A command on this machine (an asyncio subprocess with pipes)."""

    def __init__(self, process: asyncio.subprocess.Process) -> None:
        self._process = process
        self._eof = False

    async def send(self, line: str) -> None:
        stdin = self._process.stdin
        if stdin is None or stdin.is_closing():
            raise BrokenPipeError("the command's stdin is closed")
        stdin.write(line.encode() + b"\n")
        await stdin.drain()

    async def readline(self) -> str:
        assert self._process.stdout is not None
        raw = await self._process.stdout.readline()
        if not raw.endswith(b"\n"):
            self._eof = True
        return raw.decode(errors="replace").rstrip("\n")

    def at_eof(self) -> bool:
        return self._eof

    def close_stdin(self) -> None:
        if self._process.stdin is not None and not self._process.stdin.is_closing():
            self._process.stdin.close()

    async def close(self) -> None:
        self.close_stdin()
        try:
            await asyncio.wait_for(self._process.wait(), CLOSE_TIMEOUT)
        except asyncio.TimeoutError:
            with contextlib.suppress(ProcessLookupError):
                self._process.kill()
            await self._process.wait()


async def open_local_command(argv: Sequence[str]) -> LocalCommandStream:
    """Start ``argv`` on this machine with piped stdin and stdout. Raises OSError."""
    process = await asyncio.create_subprocess_exec(
        *argv, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL)
    return LocalCommandStream(process)


class SshCommandStream:
    """A command on a remote host: a session channel of the host's SSH connection (text)."""

    def __init__(self, process: asyncssh.SSHClientProcess[str]) -> None:
        self._process = process

    async def send(self, line: str) -> None:
        try:
            self._process.stdin.write(line + "\n")
            await self._process.stdin.drain()
        except Exception as exc:  # asyncssh's channel errors are not OSErrors
            raise BrokenPipeError(f"the command's channel is closed: {exc}") from exc

    async def readline(self) -> str:
        return (await self._process.stdout.readline()).rstrip("\n")

    def at_eof(self) -> bool:
        return self._process.stdout.at_eof()

    def close_stdin(self) -> None:
        with contextlib.suppress(Exception):  # the channel or connection may be gone already
            self._process.stdin.write_eof()

    async def close(self) -> None:
        self.close_stdin()
        with contextlib.suppress(Exception):
            await self._process.wait(timeout=CLOSE_TIMEOUT)
        self._process.close()
