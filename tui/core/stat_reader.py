"""One host's ``/proc`` stat lines of given process groups, for the CPU and memory sampler:
through a reader kept running on the host, fed the groups a line at a time, where the
launcher can keep a command running (SSH, this machine), else one command per read.

A command per read opened a channel on the host's connection each time: at 64 hosts read
every 2 s, 32 channels opened and closed a second, each a round of packets to encrypt and
decrypt, for a few lines of output."""

from __future__ import annotations

import contextlib
import shlex
from collections.abc import Awaitable, Callable, Collection, Sequence

from tui.config.cluster import HostSpec
from tui.core.supervisor.busy import group_listing, group_words, stat_argv
from tui.launch.command_stream import CommandStream, StreamNotSupported

#: What the reader prints after each listing.
READ_END = "#tfdist-stat-read-end"
#: A launcher's ``run_command`` (tui.launch.base.CommandRunner: a short command's stdout) and
#: its ``open_command`` (tui.launch.command_stream.CommandStreamer).
RunCommand = Callable[[HostSpec, Sequence[str]], Awaitable[str]]
OpenCommand = Callable[[HostSpec, Sequence[str]], Awaitable[CommandStream]]


def reader_argv() -> list[str]:
    """The long-lived reader: for each line read on stdin (the groups), their listing and
    :data:`READ_END`; ends at EOF (the controller closed it, or is gone)."""
    return ["sh", "-c", f'while IFS= read -r g; do {group_listing(chr(34) + "$g" + chr(34))}; '
                        f"echo {shlex.quote(READ_END)}; done"]


class StatReader:
    """Reads one host's stat lines; one read at a time (the sampler never overlaps them)."""

    def __init__(self, host: HostSpec, run_command: RunCommand, open_command: OpenCommand | None) -> None:
        self.host = host
        self._run_command = run_command
        self._open_command = open_command
        self._stream: CommandStream | None = None
        self._dropped: list[CommandStream] = []

    async def read(self, groups: Collection[int]) -> str:
        """The lines of ``groups``' processes. Raises what the launcher raises (OSError,
        LaunchError) when the host does not answer; the next read opens a new reader."""
        if self._open_command is not None and self._stream is None:
            try:
                self._stream = await self._open_command(self.host, reader_argv())
            except StreamNotSupported:
                self._open_command = None
        stream = self._stream
        if stream is None:
            return await self._run_command(self.host, stat_argv(groups))
        complete = False
        try:
            await stream.send(group_words(groups))
            lines = []
            while (line := await stream.readline()) != READ_END:
                if stream.at_eof():
                    raise BrokenPipeError("the stat reader ended")
                lines.append(line)
            complete = True
            return "\n".join(lines)
        finally:
            if not complete:  # (failed or cancelled mid-read: its rest must not be the next answer)
                self._stream = None
                stream.close_stdin()
                self._dropped.append(stream)

    async def close(self) -> None:
        """End the reader (and any dropped one), waiting for each briefly."""
        streams, self._dropped = [*self._dropped, *([self._stream] if self._stream else [])], []
        self._stream = None
        for stream in streams:
            with contextlib.suppress(Exception):  # (a host gone: nothing to wait for)
                await stream.close()
