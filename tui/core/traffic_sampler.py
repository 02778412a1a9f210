"""Reading a host's TCP counters for the traffic monitor (:mod:`tui.core.traffic`).

On each ps host one long-lived sampler runs for the whole run: a shell loop that answers each
line it reads on stdin with one ``ss -tinpH state established`` listing and an end marker. So
a sample costs a line each way over the host's connection, never a new SSH channel or command
(which took 1.9-4 s per sample over SSH under load, four to eight times the interval). A
launcher that cannot keep a command running (Slurm steps) gets one command per sample.

A sampler that stops answering (a host cut off, its connection being replaced) is skipped in
the samples it misses, and opened again later; only ``ss`` itself failing ends the sampling.
"""

from __future__ import annotations

import asyncio
import re
import shlex
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

from tui.config.cluster import HostSpec
from tui.launch.base import LaunchError
from tui.launch.command_stream import CommandStream, StreamNotSupported

#: Runs a command (argv) on a host and returns its stdout; raises OSError or LaunchError.
CommandRunner = Callable[[HostSpec, Sequence[str]], Awaitable[str]]
#: Starts a long-lived command on a host; raises OSError or LaunchError.
CommandOpener = Callable[[HostSpec, Sequence[str]], Awaitable[CommandStream]]

#: What the sampler prints after each listing, and before it when ``ss`` failed.
SAMPLE_END = "#tfdist-traffic-sample-end"
SS_FAILED = "#tfdist-traffic-ss-failed"

_COUNTER = re.compile(r"\b(bytes_sent|bytes_received):(\d+)")
_PID = re.compile(r"\bpid=(\d+)")


class SamplingFailed(Exception):
    """The host cannot list its sockets (no ``ss``, not allowed): sampling stops for good."""


@dataclass(frozen=True)
class SocketCounters:
    """One established TCP socket as ``ss -ti`` shows it."""

    local: str
    peer: str
    bytes_sent: int
    bytes_received: int
    pids: tuple[int, ...] = ()

    @property
    def local_port(self) -> int:
        return int(self.local.rpartition(":")[2])


def ss_argv(ports: Sequence[int]) -> list[str]:
    """The ``ss`` command listing established sockets to or from any of ``ports`` (the
    cluster's), with TCP info and owning processes."""
    expression = " or ".join(f"{side} = :{p}" for p in ports for side in ("sport", "dport"))
    return ["ss", "-tinpH", "state", "established", f"( {expression} )"]


def sampler_argv(ports: Sequence[int]) -> list[str]:
    """The long-lived sampler: a listing of :func:`ss_argv` and :data:`SAMPLE_END` for each
    line read on stdin; ends at EOF (the controller closed it, or is gone)."""
    listing = shlex.join(ss_argv(ports))
    script = (f"while read -r _; do {listing} 2>&1 || echo \"{SS_FAILED} $?\"; "
              f"echo {shlex.quote(SAMPLE_END)}; done")
    return ["sh", "-c", script]


def parse_ss(text: str) -> list[SocketCounters]:
    """Sockets from ``ss -tinpH state established`` output: an address line (recv-q,
    send-q, local, peer, owners), then an indented line of TCP info with the counters."""
    found: list[SocketCounters] = []
    head: list[str] | None = None
    for line in text.splitlines():
        if not line.strip():
            continue
        if not line[0].isspace():
            fields = line.split()
            ok = len(fields) >= 4 and fields[2].rpartition(":")[2].isdigit()
            head = fields if ok else None
            continue
        if head is None:
            continue
        counters = dict(_COUNTER.findall(line))
        pids = tuple(int(p) for p in _PID.findall(" ".join(head[4:])))
        found.append(SocketCounters(head[2], head[3], int(counters.get("bytes_sent", 0)),
                                    int(counters.get("bytes_received", 0)), pids))
        head = None
    return found


class HostSampler:
    """One host's sockets, read on demand through its long-lived sampler (or one command
    per read where the launcher cannot keep one running)."""

    def __init__(self, host: HostSpec, ports: Sequence[int], run_command: CommandRunner,
                 open_command: CommandOpener | None) -> None:
        self.host = host
        self._ports = list(ports)
        self._run_command = run_command
        self._open_command = open_command
        self._stream: CommandStream | None = None
        self._pending: asyncio.Task[list[SocketCounters] | None] | None = None

    async def read(self, timeout: float) -> list[SocketCounters] | None:
        """The host's sockets now, or None when it did not answer within ``timeout`` (the
        read stays in flight: a later call takes its answer, so reads never pile up).
        Raises :class:`SamplingFailed`."""
        if self._pending is None:
            self._pending = asyncio.ensure_future(self._listing())
        done, _ = await asyncio.wait({self._pending}, timeout=timeout)
        if not done:
            return None
        task, self._pending = self._pending, None
        return task.result()

    async def _listing(self) -> list[SocketCounters] | None:
        if self._open_command is None:
            return await self._by_command()
        try:
            if self._stream is None:
                self._stream = await self._open_command(self.host, sampler_argv(self._ports))
            await self._stream.send("")
            lines = []
            while True:
                line = await self._stream.readline()
                if line == SAMPLE_END:
                    break
                if self._stream.at_eof():
                    raise BrokenPipeError("the sampler ended")
                lines.append(line)
        except StreamNotSupported:
            self._open_command = None
            return await self._by_command()
        except (OSError, LaunchError):
            await self._drop_stream()
            return None  # the host is unreachable for now: skip it, open again next time
        failed = [line for line in lines if line.startswith(SS_FAILED)]
        if failed:
            detail = " ".join(line for line in lines if not line.startswith(SS_FAILED)).strip()
            raise SamplingFailed(f"ss exited with status {failed[0].split()[-1]}: {detail}")
        return parse_ss("\n".join(lines))

    async def _by_command(self) -> list[SocketCounters]:
        try:
            return parse_ss(await self._run_command(self.host, ss_argv(self._ports)))
        except (OSError, LaunchError) as exc:
            raise SamplingFailed(str(exc)) from exc

    async def _drop_stream(self) -> None:
        stream, self._stream = self._stream, None
        if stream is not None:
            await stream.close()

    def end(self) -> None:
        """Close the sampler's stdin now: it ends, whatever happens to the rest of :meth:`close`."""
        if self._stream is not None:
            self._stream.close_stdin()

    async def close(self) -> None:
        """End the sampler and any read in flight, and wait for them."""
        self.end()
        if self._pending is not None:
            self._pending.cancel()
            await asyncio.gather(self._pending, return_exceptions=True)
            self._pending = None
        await self._drop_stream()
