"""A host's stat lines through the reader kept running on it (this machine's, as an SSH host's
works the same way over its connection): one reader for every read, a new one after a read
cut short, one command a read where the launcher keeps none running."""

from __future__ import annotations

import asyncio
from asyncio.subprocess import DEVNULL, PIPE
from collections.abc import Sequence

from tests.core.supervisor.test_busy import group, pids_of  # noqa: F401 (the fixture)
from tui.config.cluster import HostSpec
from tui.core.stat_reader import StatReader
from tui.launch.command_stream import CommandStream, LocalCommandStream, StreamNotSupported
from tui.launch.local.launcher import run_local_command

HOST = HostSpec("localhost", "127.0.0.1")


async def test_every_read_goes_through_one_reader(group: tuple[int, set[int]]) -> None:  # noqa: F811
    leader, members = group
    opened: list[asyncio.subprocess.Process] = []
    commands: list[Sequence[str]] = []

    async def open_command(host: HostSpec, argv: Sequence[str]) -> CommandStream:
        opened.append(await asyncio.create_subprocess_exec(*argv, stdin=PIPE, stdout=PIPE, stderr=DEVNULL))
        return LocalCommandStream(opened[-1])

    async def run_command(host: HostSpec, argv: Sequence[str]) -> str:
        commands.append(argv)
        return await run_local_command(argv)

    reader = StatReader(HOST, run_command, open_command)
    try:
        for _ in range(3):
            assert pids_of(await asyncio.wait_for(reader.read([leader]), 60)) == members
        assert len(opened) == 1 and commands == []
        # A read cut short (a sample's wait ran out and the run ended): its answer, still to
        # come, must not be the next read's. The next read opens a new reader.
        cut = asyncio.ensure_future(reader.read([leader]))
        await asyncio.sleep(0)
        cut.cancel()
        await asyncio.gather(cut, return_exceptions=True)
        assert pids_of(await asyncio.wait_for(reader.read([leader]), 60)) == members
        assert len(opened) == 2 and commands == []
    finally:
        await reader.close()
    assert all(process.returncode is not None for process in opened)  # every reader ended


async def test_a_launcher_that_keeps_no_command_running_gets_one_command_a_read(
        group: tuple[int, set[int]]) -> None:  # noqa: F811
    leader, members = group
    commands: list[Sequence[str]] = []

    async def open_command(host: HostSpec, argv: Sequence[str]) -> CommandStream:
        raise StreamNotSupported("short commands only")

    async def run_command(host: HostSpec, argv: Sequence[str]) -> str:
        commands.append(argv)
        return await run_local_command(argv)

    reader = StatReader(HOST, run_command, open_command)
    for _ in range(2):
        assert pids_of(await reader.read([leader])) == members
    assert len(commands) == 2
    await reader.close()
