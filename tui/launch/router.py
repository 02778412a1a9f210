"""The launcher the supervisor uses: ``localhost`` tasks go to the local launcher, every
other host to the SSH launcher. Implements :class:`tui.launch.base.Launcher`, plus the
start-up steps that only make sense for a whole cluster (:meth:`Router.connect_all`, the
leftover sweep)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tui.config import ClusterConfig, HostSpec, TaskSpec
from tui.launch import sweep
from tui.launch.base import (
    DEFAULT_CONNECT_TIMEOUT,
    ConnectReport,
    Launcher,
    LaunchError,
    PortProblem,
    PortReservation,
    RunningTask,
)
from tui.launch.local import LocalLauncher
from tui.traffic import run_local_command

if TYPE_CHECKING:
    from tui.launch.ssh import SSHLauncher


@dataclass(frozen=True)
class SweepReport:
    """Leftover tasks found on every host searched, and the hosts that could not be."""

    tasks: tuple[sweep.LeftoverTask, ...] = ()
    failures: tuple[LaunchError, ...] = ()


class Router:
    """Dispatches each call by ``host.is_local``. The SSH launcher is made when the first
    remote host needs it: importing asyncssh takes half a second, which a cluster on this
    machine alone should not wait for."""

    def __init__(self, local: Launcher | None = None, remote: SSHLauncher | None = None,
                 **ssh_options: Any) -> None:
        self.local: Launcher = local or LocalLauncher()
        self._remote = remote
        self._ssh_options = ssh_options

    @classmethod
    def for_config(cls, config: ClusterConfig, *, accept_new_host_keys: bool = False,
                   insecure_no_host_key_check: bool = False,
                   connect_timeout: float = DEFAULT_CONNECT_TIMEOUT) -> Router:
        """A router whose SSH launcher knows ``config``'s hosts (for ``jump:`` names)."""
        return cls(hosts=config.hosts, accept_new_host_keys=accept_new_host_keys,
                   insecure_no_host_key_check=insecure_no_host_key_check,
                   connect_timeout=connect_timeout)

    @property
    def remote(self) -> SSHLauncher:
        if self._remote is None:
            from tui.launch.ssh import SSHLauncher

            self._remote = SSHLauncher(**self._ssh_options)
        return self._remote

    def _for(self, host: HostSpec) -> Launcher:
        return self.local if host.is_local else self.remote

    async def connect_all(self, hosts: Iterable[HostSpec]) -> ConnectReport:
        """Prepare every remote host at once; see :meth:`SSHLauncher.connect_all`."""
        remote = [h for h in hosts if not h.is_local]
        if not remote:
            return ConnectReport()
        return await self.remote.connect_all(remote)

    async def start(self, task: TaskSpec, host: HostSpec, argv: Sequence[str],
                    env: Mapping[str, str], cwd: str | None) -> RunningTask:
        return await self._for(host).start(task, host, argv, env, cwd)

    async def check_ports(self, host: HostSpec, ports: Sequence[int]) -> list[PortProblem]:
        return await self._for(host).check_ports(host, ports)

    async def free_ports(self, host: HostSpec, n: int,
                         avoid: frozenset[int] = frozenset()) -> list[PortReservation]:
        return await self._for(host).free_ports(host, n, avoid)

    async def find_leftovers(self, host: HostSpec,
                             exclude_run_ids: Iterable[str] = ()) -> list[sweep.LeftoverTask]:
        """Tasks of earlier runs still alive on ``host``."""
        if host.is_local:
            return await sweep.find_local_leftovers(host.name, exclude_run_ids)
        return await self.remote.find_leftovers(host, exclude_run_ids)

    async def sweep_hosts(self, hosts: Iterable[HostSpec],
                    exclude_run_ids: Iterable[str] = ()) -> SweepReport:
        """:meth:`find_leftovers` on every host at once; a host that cannot be searched is
        reported, not raised."""
        specs = list({h.name: h for h in hosts}.values())
        excluded = tuple(exclude_run_ids)
        results = await asyncio.gather(*(self.find_leftovers(h, excluded) for h in specs),
                                       return_exceptions=True)
        found: list[sweep.LeftoverTask] = []
        failures: list[LaunchError] = []
        for result in results:
            if isinstance(result, LaunchError):
                failures.append(result)
            elif isinstance(result, BaseException):
                raise result
            else:
                found += result
        return SweepReport(tuple(found), tuple(failures))

    async def stop_leftovers(self, host: HostSpec, tasks: Sequence[sweep.LeftoverTask],
                             grace: float = sweep.DEFAULT_STOP_GRACE) -> list[sweep.StoppedLeftover]:
        if host.is_local:
            return await sweep.stop_local_leftovers(tasks, grace)
        return await self.remote.stop_leftovers(host, tasks, grace)

    async def run_command(self, host: HostSpec, argv: Sequence[str]) -> str:
        """Run a short command (``ss`` for traffic counters) on ``host``; its stdout.
        Raises OSError (here) or LaunchError (over SSH) when it cannot run or fails."""
        if host.is_local:
            return await run_local_command(argv)
        return await self.remote.run_command(host, argv)

    async def close(self) -> None:
        await self.local.close()
        if self._remote is not None:
            await self._remote.close()
