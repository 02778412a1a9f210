"""The launcher the supervisor uses: each task goes to its host kind's launcher (``local``
for ``localhost`` and ``ssh`` for every other host unless hosts.yaml says ``kind:``).
Implements :class:`tui.launch.base.Launcher`, plus the start-up steps that only make sense
for a whole cluster (:meth:`Router.connect_all`, the leftover sweep)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from tui.config.cluster import ClusterConfig, HostKind, HostSpec, TaskSpec
from tui.launch import leftover_search as sweep
from tui.launch.base import (
    DEFAULT_CONNECT_TIMEOUT,
    CommandRunner,
    ConnectReport,
    HostLink,
    Launcher,
    LaunchError,
    LinkWatching,
    PoolStarter,
    PortProber,
    PortProblem,
    PortReservation,
    RunningTask,
    TaskPrestarter,
)
from tui.launch.command_stream import CommandStream, CommandStreamer, StreamNotSupported, open_local_command
from tui.launch.host_steps import StepReporter, StepSink
from tui.launch.kinds import LAUNCHERS
from tui.launch.local.launcher import run_local_command
from tui.launch.look import HostLook, HostLooker

if TYPE_CHECKING:
    from tui.launch.ssh.launcher import SSHLauncher


@dataclass(frozen=True)
class SweepReport:
    """Leftover tasks found on every host searched, and the hosts that could not be."""

    tasks: tuple[sweep.LeftoverTask, ...] = ()
    failures: tuple[LaunchError, ...] = ()


@runtime_checkable
class LeftoverSearch(Protocol):
    """A launcher that can find and stop tasks of earlier runs on its hosts."""

    async def find_leftovers(self, host: HostSpec,
                             exclude_run_ids: Iterable[str] = ()) -> list[sweep.LeftoverTask]: ...

    async def stop_leftovers(self, host: HostSpec, tasks: Sequence[sweep.LeftoverTask],
                             grace: float = sweep.DEFAULT_STOP_GRACE) -> list[sweep.StoppedLeftover]: ...


class Router:
    """Dispatches each call by the host's kind (:mod:`tui.launch.kinds`). A kind's launcher
    is made when the first host of that kind needs it: importing asyncssh takes half a
    second, which a cluster on this machine alone should not wait for."""

    def __init__(self, local: Launcher | None = None, remote: SSHLauncher | None = None, *,
                 warm: bool = True, config: ClusterConfig | None = None, **ssh_options: Any) -> None:
        self._launchers: dict[HostKind, Launcher] = {}
        if local is not None:
            self._launchers[HostKind.LOCAL] = local
        if remote is not None:
            self._launchers[HostKind.SSH] = remote
        # warm: False (--cold) starts every task cold (tui.launch.local.warm). The Slurm launcher
        # places the config's tasks on its allocation's nodes.
        self._options: dict[HostKind, dict[str, Any]] = {HostKind.SSH: {**ssh_options, "warm": warm},
                                                         HostKind.LOCAL: {"warm": warm},
                                                         HostKind.SLURM: {"config": config}}

    @classmethod
    def for_config(cls, config: ClusterConfig, *, accept_new_host_keys: bool = False,
                   insecure_no_host_key_check: bool = False,
                   connect_timeout: float = DEFAULT_CONNECT_TIMEOUT, warm: bool = True) -> Router:
        """A router whose SSH launcher knows ``config``'s hosts (for ``jump:`` names) and
        the program's ``upload:`` folder (the run directory is never part of it)."""
        upload = config.program.upload if config.program is not None else None
        return cls(warm=warm, hosts=config.hosts, accept_new_host_keys=accept_new_host_keys,
                   insecure_no_host_key_check=insecure_no_host_key_check,
                   connect_timeout=connect_timeout, upload=upload, upload_exclude=(config.run_dir,),
                   config=config, lease=config.network.lease,
                   hosts_at_once=config.network.hosts_at_once)

    def on_notice(self, notify: Callable[[str], None]) -> None:
        """Where a launcher sends what people should see before a run starts (a Slurm
        allocation that pends, and why). Call before the first run."""
        self._options.setdefault(HostKind.SLURM, {})["notify"] = notify

    def on_host_step(self, sink: StepSink) -> None:
        """Where the SSH launcher tells each host's preparation steps as they begin
        (:mod:`tui.launch.host_steps`). Call before the first run."""
        self._options[HostKind.SSH]["on_step"] = sink
        launcher = self._launchers.get(HostKind.SSH)
        if isinstance(launcher, StepReporter):
            launcher.on_step = sink

    def expect_pools(self, mode: str | None, tensorflow: bool = True) -> None:
        """Tasks of the coming run start from warm pools of ``mode``: each SSH host starts
        its pool while it is prepared (:meth:`SSHLauncher.expect_pools`); without
        ``tensorflow`` (a program that may not use it) no host looks for TensorFlow."""
        self._options[HostKind.SSH]["warm_mode"] = mode
        self._options[HostKind.SSH]["check_tensorflow"] = tensorflow
        launcher = self._launchers.get(HostKind.SSH)
        if isinstance(launcher, PoolStarter):
            launcher.expect_pools(mode, tensorflow)

    def launcher(self, kind: HostKind) -> Launcher:
        """The launcher of ``kind``'s hosts, made on first use."""
        launcher = self._launchers.get(kind)
        if launcher is None:
            launcher = LAUNCHERS[kind](self._options.get(kind, {}))
            self._launchers[kind] = launcher
        return launcher

    @property
    def local(self) -> Launcher:
        return self.launcher(HostKind.LOCAL)

    @property
    def remote(self) -> SSHLauncher:
        launcher = self.launcher(HostKind.SSH)
        return launcher  # type: ignore[return-value]  # the SSH kind's factory makes an SSHLauncher

    def _for(self, host: HostSpec) -> Launcher:
        return self.launcher(host.launch_kind)

    async def connect_all(self, hosts: Iterable[HostSpec]) -> ConnectReport:
        """Prepare every host at once, each kind's hosts by its launcher (see
        :meth:`SSHLauncher.connect_all`); the reports are merged."""
        by_kind: dict[HostKind, list[HostSpec]] = {}
        for host in hosts:
            by_kind.setdefault(host.launch_kind, []).append(host)
        # The local launcher has nothing to connect: don't make launchers just to ask them.
        by_kind.pop(HostKind.LOCAL, None)
        reports = await asyncio.gather(*(self.launcher(kind).connect_all(specs)
                                         for kind, specs in by_kind.items()))
        return ConnectReport(tuple(h for r in reports for h in r.hosts),
                             tuple(f for r in reports for f in r.failures),
                             tuple(w for r in reports for w in r.warnings),
                             {k: v for r in reports for k, v in r.placement.items()})

    async def start(self, task: TaskSpec, host: HostSpec, argv: Sequence[str],
                    env: Mapping[str, str], cwd: str | None) -> RunningTask:
        return await self._for(host).start(task, host, argv, env, cwd)

    async def check_ports(self, host: HostSpec, ports: Sequence[int]) -> list[PortProblem]:
        return await self._for(host).check_ports(host, ports)

    def prestart(self, host: HostSpec, argv: Sequence[str], env: Mapping[str, str]) -> None:
        """Get ``host``'s launcher ready for a task (:class:`TaskPrestarter`), where it can
        be (SSH hosts start their pools while they are prepared: :meth:`expect_pools`)."""
        launcher = self._for(host)
        if isinstance(launcher, TaskPrestarter):
            launcher.prestart(host, argv, env)

    def link(self, host: HostSpec) -> HostLink | None:
        """Whether ``host`` answers, where its launcher knows (:class:`LinkWatching`)."""
        launcher = self._for(host)
        return launcher.link(host) if isinstance(launcher, LinkWatching) else None

    async def port_open(self, host: HostSpec, port: int, timeout: float) -> bool | None:
        """Whether ``host``'s ``port`` accepts connections, seen from the host, where its
        launcher can tell (:class:`PortProber`); None where it cannot."""
        launcher = self._for(host)
        if isinstance(launcher, PortProber):
            return await launcher.port_open(host, port, timeout)
        return None

    async def free_ports(self, host: HostSpec, n: int,
                         avoid: frozenset[int] = frozenset()) -> list[PortReservation]:
        return await self._for(host).free_ports(host, n, avoid)

    async def find_leftovers(self, host: HostSpec,
                             exclude_run_ids: Iterable[str] = ()) -> list[sweep.LeftoverTask]:
        """Tasks of earlier runs still alive on ``host``. A launcher that cannot search (a
        stand-in) leaves this machine's to the local search."""
        launcher = self._for(host)
        if isinstance(launcher, LeftoverSearch):
            return await launcher.find_leftovers(host, exclude_run_ids)
        return await sweep.find_local_leftovers(host.name, exclude_run_ids)

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
        launcher = self._for(host)
        if isinstance(launcher, LeftoverSearch):
            return await launcher.stop_leftovers(host, tasks, grace)
        return await sweep.stop_local_leftovers(tasks, grace)

    async def look(self, host: HostSpec) -> HostLook | None:
        """What ``host`` offers and what of the run's copies are there, from a launcher that
        can tell without placing anything (:class:`HostLooker`); None from one that cannot
        (this machine's tasks use the files in place). Raises :class:`LaunchError`."""
        launcher = self._for(host)
        return await launcher.look(host) if isinstance(launcher, HostLooker) else None

    async def run_command(self, host: HostSpec, argv: Sequence[str]) -> str:
        """Run a short command (``ss`` for traffic counters) on ``host``; its stdout. A
        launcher that cannot run commands leaves it to this machine. Raises OSError (here)
        or LaunchError (over SSH) when it cannot run or fails."""
        launcher = self._for(host)
        if isinstance(launcher, CommandRunner):
            return await launcher.run_command(host, argv)
        return await run_local_command(argv)

    async def open_command(self, host: HostSpec, argv: Sequence[str]) -> CommandStream:
        """Keep ``argv`` running on ``host``, fed line by line (the traffic sampler). A
        launcher that runs short commands only raises :class:`StreamNotSupported`; one that
        runs none leaves it to this machine, as :meth:`run_command` does."""
        launcher = self._for(host)
        if isinstance(launcher, CommandStreamer):
            return await launcher.open_command(host, argv)
        if isinstance(launcher, CommandRunner):
            raise StreamNotSupported(f"host {host.name}: its launcher runs short commands only")
        return await open_local_command(argv)

    async def close(self) -> None:
        for launcher in self._launchers.values():
            await launcher.close()
