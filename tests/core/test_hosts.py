"""The controller's model of the remote hosts (tui/core/hosts.py) and the progress line both
front ends show (tui.core.events.HostsProgress): every host shown before the first is
contacted, failures and the last host settling at once, other steps a few times a second."""

from __future__ import annotations

import asyncio
from pathlib import Path

from tests.support.fakes import make_config
from tui.config.cluster import ClusterConfig, HostSpec
from tui.core.events import HostRow, HostsProgress, to_record
from tui.core.host_state import HostState
from tui.core.hosts import HostBoard
from tui.launch.host_steps import HostPhase, HostStep


def remote_config(tmp_path: Path, hosts: int) -> ClusterConfig:
    """``make_config``'s tasks, each on a remote host of its own (h0, h1, ...)."""
    import dataclasses

    config = make_config(tmp_path, num_ps=1, num_workers=hosts - 1)
    specs = {f"h{i}": HostSpec(name=f"h{i}", address=f"10.0.0.{i + 1}") for i in range(hosts)}
    tasks = tuple(dataclasses.replace(task, host=f"h{i}") for i, task in enumerate(config.tasks))
    return dataclasses.replace(config, hosts=specs, tasks=tasks)


def row(name: str, state: HostState, detail: str = "") -> HostRow:
    return HostRow(name, "10.0.0.1", state, detail)


def test_the_line_counts_each_state_and_names_failed_hosts_with_their_reason() -> None:
    rows = (row("h0", HostState.READY), row("h1", HostState.CONNECTING), row("h2", HostState.WAITING),
            row("h3", HostState.FAILED, "unreachable: no SSH answer within 10 s"))
    assert HostsProgress(hosts=rows).line == (
        "hosts: 1/4 ready, 1 connecting, 1 waiting, 1 failed (h3: unreachable: no SSH answer within 10 s)")
    many = tuple(row(f"f{i}", HostState.FAILED, "refused") for i in range(5))
    assert HostsProgress(hosts=many).line == (
        "hosts: 0/5 ready, 5 failed (f0: refused; f1: refused; f2: refused; 2 more)")
    record = to_record(HostsProgress(hosts=rows[:1], t=1.0))
    assert record == {"type": "hosts", "t": 1.0, "hosts": [
        {"name": "h0", "address": "10.0.0.1", "state": "ready", "detail": "", "tasks": [],
        "pool": None, "heard": None}]}


async def test_shown_at_once_then_a_few_times_a_second_and_failures_at_once(tmp_path: Path) -> None:
    shown: list[HostsProgress] = []
    board = HostBoard(remote_config(tmp_path, 3), shown.append, interval=0.2)
    assert [r.tasks for r in board.rows] == [("ps0",), ("worker0",), ("worker1",)]
    board.begin()
    assert [r.state for r in shown[-1].hosts] == [HostState.WAITING] * 3
    board.step(HostStep("h0", HostPhase.CONNECTING))
    board.step(HostStep("h1", HostPhase.CONNECTING))
    assert len(shown) == 1  # within the interval: gathered
    board.step(HostStep("h2", HostPhase.FAILED, "authentication refused: no key"))
    assert len(shown) == 2 and "1 failed (h2: authentication refused: no key)" in shown[-1].line
    board.step(HostStep("h0", HostPhase.PREPARING, "uploading the trainer"))
    while len(shown) < 3:  # the gathered step goes out once the interval has passed
        await asyncio.sleep(0.05)
    assert shown[-1].line == "hosts: 0/3 ready, 1 connecting, 1 preparing, 1 failed (h2: authentication " \
                             "refused: no key)"
    board.step(HostStep("h0", HostPhase.READY))
    board.step(HostStep("h1", HostPhase.READY))  # the last one to settle: shown at once
    assert shown[-1].line.startswith("hosts: 2/3 ready, 1 failed")
    count = len(shown)
    board.step(HostStep("nowhere", HostPhase.READY))  # not a host of this cluster
    board.step(HostStep("h1", HostPhase.READY))  # nothing new
    assert len(shown) == count


def test_local_hosts_are_not_shown(tmp_path: Path) -> None:
    shown: list[HostsProgress] = []
    board = HostBoard(make_config(tmp_path), shown.append)
    board.begin()
    assert board.rows == () and shown == []
