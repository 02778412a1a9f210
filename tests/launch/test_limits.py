"""Limits on remote steps follow what a step does: a step that handles more at once (one
signal for many process groups, many tasks started on one host together) may take longer,
and none is the fixed 30 s that failed hosts which were only slow under a load of ~47."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

from tui.config.cluster import HostSpec
from tui.launch.ssh import limits
from tui.launch.ssh.remote_host import RemoteHost


def test_a_limit_grows_with_what_the_step_handles() -> None:
    limit = limits.StepLimit(10.0, 2.0)
    assert (limit.of(), limit.of(1), limit.of(5), limit.of(0)) == (10.0, 10.0, 18.0, 10.0)
    assert limits.SHELL.of() > 30.0 and limits.INTERPRETER.of() > limits.SHELL.of()


async def test_one_signal_for_many_process_groups_gets_a_limit_for_all_of_them() -> None:
    async def refuse(spec: HostSpec, lost: asyncio.Event | None) -> object:
        raise AssertionError("no connection is opened: run is replaced")

    host = RemoteHost(HostSpec(name="h", address="10.0.0.1"), refuse)  # type: ignore[arg-type]
    sent: list[tuple[str, float]] = []

    async def run(command: str, timeout: float = 0.0, stdin: bytes = b"") -> SimpleNamespace:
        sent.append((command, timeout))
        return SimpleNamespace(exit_status=0, stderr="")

    host.run = run  # type: ignore[method-assign,assignment]
    await asyncio.gather(*(host.signal_group(pgid, "TERM") for pgid in range(100, 110)))
    assert len(sent) == 1  # one remote kill for the ten groups
    command, timeout = sent[0]
    assert all(f"-{pgid}" in command for pgid in range(100, 110))
    assert timeout == limits.SHELL.of(10) > limits.SHELL.of(1)
