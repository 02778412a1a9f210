"""The preflight asks every host at once: its port checks and reservations are one round trip
per host each (a remote Python's start on SSH), which host after host made tens of hosts wait
minutes before their first task started."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path

import pytest

from tests.support.fakes import FakeLauncher, make_config
from tui.config.cluster import ClusterConfig, HostSpec, Job, TaskSpec
from tui.launch.base import LaunchError, PortProblem, PortReservation
from tui.plan.preflight import PreflightError, resolve_ports

HOSTS = 4


def config_on_hosts(tmp_path: Path, fixed: bool = False) -> ClusterConfig:
    """Two tasks on each of :data:`HOSTS` hosts; with ``fixed`` the first of each has port 2222."""
    base = make_config(tmp_path, num_ps=0, num_workers=0)
    tasks = tuple(TaskSpec(job=Job.WORKER, index=2 * h + i, host=f"h{h}",
                           port=2222 if fixed and i == 0 else None)
                  for h in range(HOSTS) for i in range(2))
    hosts = {f"h{h}": HostSpec(name=f"h{h}", address=f"10.0.0.{h + 1}") for h in range(HOSTS)}
    return ClusterConfig(path=base.path, hosts=hosts, tasks=tasks, training=base.training)


class SlowHosts(FakeLauncher):
    """Each host answers only once every host has been asked: asked one after another, the
    first never answers (the test's limit ends it)."""

    def __init__(self, failing: str | None = None) -> None:
        super().__init__()
        self.asked: dict[str, set[str]] = {"check": set(), "hold": set()}
        self.everyone = {kind: asyncio.Event() for kind in self.asked}
        self.failing = failing

    async def _all_asked(self, kind: str, host: HostSpec) -> None:
        self.asked[kind].add(host.name)
        if len(self.asked[kind]) == HOSTS:
            self.everyone[kind].set()
        await self.everyone[kind].wait()

    async def check_ports(self, host: HostSpec, ports: Sequence[int]) -> list[PortProblem]:
        await self._all_asked("check", host)
        return await super().check_ports(host, ports)

    async def free_ports(self, host: HostSpec, n: int,
                         avoid: frozenset[int] = frozenset()) -> list[PortReservation]:
        await self._all_asked("hold", host)
        if host.name == self.failing:
            raise LaunchError(f"host {host.name}: cannot reserve {n} free ports: no answer")
        return await super().free_ports(host, n, avoid)


async def test_every_host_is_checked_and_reserved_at_once(tmp_path: Path) -> None:
    config = config_on_hosts(tmp_path, fixed=True)
    launcher = SlowHosts()
    ports, reservations = await asyncio.wait_for(resolve_ports(config, launcher), 30)
    every = {f"h{h}" for h in range(HOSTS)}
    assert launcher.asked == {"check": every, "hold": every}
    assert len(ports) == 2 * HOSTS
    assert sorted(reservations) == [t.name for t in config.tasks if t.port is None]
    assert all(ports[name] == r.port for name, r in reservations.items())
    assert all(ports[t.name] == 2222 for t in config.tasks if t.port is not None)


async def test_a_host_that_cannot_reserve_is_named_and_the_others_ports_are_let_go(tmp_path: Path) -> None:
    launcher = SlowHosts(failing="h2")
    with pytest.raises(PreflightError) as caught:
        await asyncio.wait_for(resolve_ports(config_on_hosts(tmp_path), launcher), 30)
    assert caught.value.problems == ("host h2: cannot reserve 2 free ports: no answer",)
    released = [entry for entry in launcher.log if entry[0] == "release"]
    assert len(released) == 2 * (HOSTS - 1)  # every port the other hosts held


async def test_port_problems_of_every_host_are_reported_together(tmp_path: Path) -> None:
    launcher = SlowHosts()
    launcher.port_problems = [PortProblem("h1", 2222, pid=42, process_name="python3")]
    with pytest.raises(PreflightError) as caught:
        await asyncio.wait_for(resolve_ports(config_on_hosts(tmp_path, fixed=True), launcher), 30)
    # (the fake reports its problems for every host asked about port 2222)
    assert caught.value.problems == ("h1:2222 is in use by pid 42 (python3)",) * HOSTS
    assert launcher.asked["hold"] == set()  # nothing reserved once a port is taken
