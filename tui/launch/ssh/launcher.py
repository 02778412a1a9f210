"""Launch tasks on remote hosts over SSH (asyncssh). Implements :class:`tui.launch.base.Launcher`.

Per host there is one connection, shared by all its tasks and checks (a second one is opened
only if sshd's ``MaxSessions`` refuses another channel). Before a host is used it is
*prepared* once: connected, probed (python, TensorFlow, workdir: :func:`deploy.probe`) and
given the trainer package (:func:`deploy.deploy`) and the ``upload:`` folder
(:mod:`tui.launch.ssh.upload_copies`). :meth:`SSHLauncher.connect_all` prepares
every host concurrently, so a cluster on many hosts starts about as fast as one on a single
host; any other method prepares its host lazily.

A remote task is ``sh`` printing its pid, then exec'ing the trainer
(:mod:`tui.launch.ssh.remote_command`). sshd makes it a session and process group leader, so
stopping it signals that group (``kill -s TERM -- -PGID``) over the same connection. Its stdin
is the SSH channel: when the controller closes it, the connection drops or the controller
dies, the trainer reads EOF and exits. A link that is cut rather than closed is noticed by
the host's lease (:mod:`tui.launch.ssh.host_link`): the controller sees the host stop answering,
and the task stops itself once its lease runs out.
"""

from __future__ import annotations

import asyncio
import logging
import shlex
import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

import asyncssh

from tui.config.cluster import HostSpec, TaskSpec
from tui.config.network import NetworkSettings
from tui.launch import leftover_search as sweep
from tui.launch.base import (
    DEFAULT_CONNECT_TIMEOUT,
    ConnectReport,
    HostInfo,
    LaunchError,
    PortProblem,
    PortReservation,
    resolve_remote_dir,
)
from tui.launch.command_stream import SshCommandStream
from tui.launch.errors import HostError, HostFailure
from tui.launch.host_steps import HostPhase, HostPool, HostStep, StepSink, ignore_step
from tui.launch.lines import MAX_LINE_BYTES
from tui.launch.look import HostLook
from tui.launch.ssh import deploy, limits
from tui.launch.ssh.connect import ConnectOptions, jump_route, open_connection, where
from tui.launch.ssh.host_link import SSHHostLink
from tui.launch.ssh.hostkeys import INSECURE_WARNING, HostKeyPolicy
from tui.launch.ssh.look import look_at
from tui.launch.ssh.prepare import prepare_host
from tui.launch.ssh.remote_command import EXIT_NO_WORKDIR, RemoteCommand
from tui.launch.ssh.remote_host import RemoteHost, close_connections
from tui.launch.ssh.remote_ports import hold_ports
from tui.launch.ssh.task import SSHTask
from tui.launch.ssh.upload_copies import UploadCopies
from tui.launch.ssh.warm import RemotePools, parse_pid
from tui.launch.streams import read_first_line

log = logging.getLogger(__name__)

#: A host that could not be connected to this long ago or less is not tried again by
#: :meth:`SSHLauncher.connect_all` (its error is reported again): the start-up's leftover
#: search and the run's preparation then wait out one connect timeout, not two.
FRESH_FAILURE = 30.0


class _Entry:
    """A remote host as the launcher knows it: its connections and its one preparation."""

    def __init__(self, remote: RemoteHost) -> None:
        self.remote = remote
        self.prepared: asyncio.Task[HostInfo] | None = None
        self.made = time.monotonic()

    @property
    def failed(self) -> bool:
        """Connecting or preparing failed (kept until the entry is dropped)."""
        task = self.prepared
        return self.remote.connect_failed or (
            task is not None and task.done() and (task.cancelled() or task.exception() is not None))

    @property
    def lost(self) -> bool:
        return self.remote.lost.is_set()

    async def close(self) -> None:
        if self.prepared is not None and not self.prepared.done():
            self.prepared.cancel()
            await asyncio.gather(self.prepared, return_exceptions=True)
        await self.remote.close()


class SSHLauncher:
    """Starts tasks on remote hosts over SSH. Implements :class:`tui.launch.base.Launcher`
    for hosts that are not ``localhost`` (see :class:`tui.launch.router.Router`).

    ``hosts`` are the config's entries, needed to resolve ``jump:`` names. Host keys are
    checked against known_hosts; ``accept_new_host_keys`` records keys of hosts known_hosts
    does not know yet (a changed key is still refused); ``insecure_no_host_key_check``
    turns checking off and says so in every :class:`ConnectReport`."""

    def __init__(self, hosts: Mapping[str, HostSpec] | None = None, *,
                 accept_new_host_keys: bool = False, insecure_no_host_key_check: bool = False,
                 connect_timeout: float = DEFAULT_CONNECT_TIMEOUT,
                 probe_timeout: float = deploy.DEFAULT_PROBE_TIMEOUT,
                 ssh_config: tuple[str, ...] | None = (),
                 max_line: int = MAX_LINE_BYTES, upload: Path | None = None,
                 upload_exclude: tuple[Path, ...] = (), warm: bool = True,
                 warm_mode: str | None = None, check_tensorflow: bool = True,
                 lease: float = NetworkSettings().lease, hosts_at_once: int = NetworkSettings().hosts_at_once,
                 on_step: StepSink = ignore_step) -> None:
        self._specs = dict(hosts or {})
        # At most this many hosts connected or prepared at a time; each one's steps as they begin.
        self._slots = asyncio.Semaphore(max(1, hosts_at_once))
        self.on_step: StepSink = on_step
        # Each host's beats and lease (tui.launch.ssh.host_link), kept across reconnections.
        self._lease = lease
        self._links: dict[str, SSHHostLink] = {}
        # What preparing each host found: a reconnection needs no new probe or upload.
        self._infos: dict[str, HostInfo] = {}
        # Warm pools per host (tui.launch.ssh.warm), made on the first task; off with --cold.
        self._warm_on = warm
        self._warm: RemotePools | None = None
        self._warm_mode = warm_mode  # the pool every host starts while it is prepared
        self._check_tf = check_tensorflow  # whether preparing a host looks for TensorFlow
        # A user's program: its folder, copied to each host next to the trainer.
        self._upload = UploadCopies(upload, upload_exclude) if upload is not None else None
        self._options = ConnectOptions(
            host_key_policy=HostKeyPolicy.from_flags(accept_new_host_keys, insecure_no_host_key_check),
            connect_timeout=connect_timeout, ssh_config=ssh_config, lease=lease)
        self._probe_timeout = probe_timeout
        self._max_line = max_line
        self._hosts: dict[str, _Entry] = {}
        self._starting: dict[str, int] = {}  # tasks being started on each host now
        # Things worth telling the user once (a host key recorded under accept-new).
        self._notices: list[str] = []
        # Jump connections, shared by every host behind the same route prefix.
        self._jumps: dict[tuple[str, ...], asyncio.Task[asyncssh.SSHClientConnection]] = {}

    @property
    def host_key_policy(self) -> HostKeyPolicy:
        return self._options.host_key_policy

    @property
    def warnings(self) -> tuple[str, ...]:
        """What every run should show as a warning."""
        return (INSECURE_WARNING,) if self.host_key_policy is HostKeyPolicy.INSECURE else ()

    def take_notices(self) -> tuple[str, ...]:
        """Warnings gathered since the last call (host keys recorded under accept-new)."""
        notices, self._notices = tuple(self._notices), []
        return notices

    # -- preparing hosts ----------------------------------------------------------------

    async def connect_all(self, hosts: Iterable[HostSpec]) -> ConnectReport:
        """Prepare every host at once (connect, probe, deploy). Hosts that failed before are
        tried again. Never raises for a host's failure: see the report."""
        specs = list({spec.name: spec for spec in hosts if not spec.is_local}.values())
        for spec in specs:
            entry = self._hosts.get(spec.name)
            fresh = (entry is not None and entry.remote.connect_failed
                     and time.monotonic() - entry.made < FRESH_FAILURE)
            if entry is not None and (entry.failed or entry.lost) and not fresh:
                await self._forget(spec.name)
        for spec in specs:  # (a host the leftover search connected to says where it is)
            if spec.name not in self._hosts:
                self.on_step(HostStep(spec.name, HostPhase.WAITING))
        results = await asyncio.gather(*(self.prepare(spec) for spec in specs), return_exceptions=True)
        ready: list[HostInfo] = []
        failures: list[HostError] = []
        for spec, result in zip(specs, results, strict=True):
            if isinstance(result, HostInfo):
                ready.append(result)
            elif isinstance(result, HostError):
                failures.append(result)
            elif isinstance(result, BaseException):
                if not isinstance(result, Exception):
                    raise result  # cancellation, KeyboardInterrupt
                failures.append(HostError(spec.name, where(spec), HostFailure.COMMAND_FAILED, repr(result)))
        return ConnectReport(tuple(ready), tuple(failures), self.warnings + self.take_notices())

    async def prepare(self, spec: HostSpec) -> HostInfo:
        """Connect to, probe and deploy to ``spec`` once; later calls return the same result
        (or raise the same :class:`HostError`) until the connection is lost."""
        entry = await self._entry(spec)
        if entry.prepared is None:
            entry.prepared = asyncio.create_task(self._prepare(entry.remote), name=f"prepare {spec.name}")
        return await asyncio.shield(entry.prepared)

    def host_info(self, name: str) -> HostInfo | None:
        """What preparing host ``name`` found, if it succeeded."""
        entry = self._hosts.get(name)
        if entry is None or entry.prepared is None or not entry.prepared.done() or entry.failed:
            return None
        return entry.prepared.result()

    async def _entry(self, spec: HostSpec) -> _Entry:
        if spec.is_local:
            raise LaunchError(f"host {spec.name}: localhost tasks run without SSH; use the router")
        entry = self._hosts.get(spec.name)
        if entry is not None and entry.lost and not entry.failed:
            await self._forget(spec.name)  # reconnect after a lost connection
            entry = None
        if entry is None:
            entry = _Entry(RemoteHost(spec, self.connect))
            self._hosts[spec.name] = entry
        return entry

    async def _remote(self, spec: HostSpec) -> RemoteHost:
        return (await self._entry(spec)).remote

    async def _prepare(self, host: RemoteHost) -> HostInfo:
        name = host.spec.name
        pooled = self._warm_on and host.spec.warm and self._warm_mode is not None
        try:
            if host.connecting:  # another's attempt (the leftover search's) holds its own slot
                await host.first_connection()
            async with self._slots:
                info = await prepare_host(host, self._probe_timeout, self._upload,
                                          self._pools() if pooled else None, self._warm_mode,
                                          self._link_for(host.spec), self._lease, check_tf=self._check_tf,
                                          step=lambda phase, what: self.on_step(HostStep(name, phase, what)))
        except HostError as exc:
            self.on_step(HostStep(name, HostPhase.FAILED, f"{exc.failure.value}: {exc.detail}"))
            raise
        except Exception as exc:
            self.on_step(HostStep(name, HostPhase.FAILED, repr(exc)))
            raise
        self._infos[name] = info
        pool = HostPool.WARM if pooled else (
            HostPool.NONE if self._warm_on and host.spec.warm else HostPool.COLD)
        self.on_step(HostStep(name, HostPhase.READY, pool=pool))
        return info

    def _pools(self) -> RemotePools:
        if self._warm is None:
            self._warm = RemotePools()
        return self._warm

    def expect_pools(self, mode: str | None, tensorflow: bool = True) -> None:
        """Tasks will start from warm pools of ``mode`` (:data:`trainer.warm.MODES`; None:
        not known): preparing a host starts its pool (:meth:`RemotePools.prestart`).
        Without ``tensorflow`` (a program run without the shim, which may not use it)
        preparing a host does not look for TensorFlow at all."""
        self._warm_mode = mode
        self._check_tf = tensorflow

    async def _forget(self, name: str) -> None:
        entry = self._hosts.pop(name, None)
        if entry is not None:
            await entry.close()

    async def connect(self, spec: HostSpec, on_lost: asyncio.Event | None) -> asyncssh.SSHClientConnection:
        """A new connection to ``spec`` through its jump hosts (shared with other hosts)."""
        tunnel: asyncssh.SSHClientConnection | None = None
        route = jump_route(spec, self._specs)
        for depth, hop in enumerate(route):
            key = tuple(h.name for h in route[: depth + 1])
            task = self._jumps.get(key)
            if task is None or (task.done() and (task.cancelled() or task.exception() is not None)):
                task = asyncio.create_task(open_connection(hop, self._options, for_host=spec, tunnel=tunnel,
                                                           notify=self._notices.append))
                self._jumps[key] = task
            try:
                tunnel = await asyncio.shield(task)
            except HostError as exc:  # raised for the host that opened the hop first: re-address it
                raise HostError(spec.name, where(spec), exc.failure, exc.detail) from None
        return await open_connection(spec, self._options, tunnel=tunnel, on_lost=on_lost,
                                     notify=self._notices.append)

    # -- hosts that stop answering -------------------------------------------------------

    def link(self, host: HostSpec) -> SSHHostLink | None:
        """Whether ``host`` answers (implements :class:`tui.launch.base.LinkWatching`)."""
        return None if host.is_local else self._link_for(host)

    def _link_for(self, spec: HostSpec) -> SSHHostLink:
        link = self._links.get(spec.name)
        if link is None:
            link = SSHHostLink(spec.name, where(spec), self._lease, reconnect=lambda: self._reconnect(spec),
                               abandon=lambda: self._abandon(spec.name))
            self._links[spec.name] = link
        return link

    def _abandon(self, name: str) -> None:
        """Drop the host's connections at once (no goodbye: the host does not answer)."""
        entry = self._hosts.get(name)
        if entry is not None:
            for conn in entry.remote.connections:
                conn.abort()

    async def _reconnect(self, spec: HostSpec) -> None:
        """A new connection to a host whose connection was lost. A host prepared before is
        only given a new lease keeper: its Python, TensorFlow and trainer are where they were
        (probing again imports TensorFlow there, which takes seconds)."""
        self._abandon(spec.name)
        await self._forget(spec.name)
        info = self._infos.get(spec.name)
        if info is None:
            await self.prepare(spec)
            return
        entry = await self._entry(spec)
        entry.prepared = asyncio.create_task(self._rejoin(entry.remote, info), name=f"rejoin {spec.name}")
        await asyncio.shield(entry.prepared)

    async def _rejoin(self, host: RemoteHost, info: HostInfo) -> HostInfo:
        await host.first_connection()
        await self._link_for(host.spec).attach(host)
        return info

    # -- the Launcher protocol ----------------------------------------------------------

    async def start(self, task: TaskSpec, host: HostSpec, argv: Sequence[str],
                    env: Mapping[str, str], cwd: str | None) -> SSHTask:
        # The tasks a host starts together share its CPU: each may wait longer (see limits).
        self._starting[host.name] = self._starting.get(host.name, 0) + 1
        try:
            return await self._start(task, host, argv, env, cwd)
        finally:
            self._starting[host.name] -= 1

    async def _start(self, task: TaskSpec, host: HostSpec, argv: Sequence[str],
                     env: Mapping[str, str], cwd: str | None) -> SSHTask:
        info = await self.prepare(host)
        remote = await self._remote(host)
        if self._upload is not None:
            await self._upload.ensure(remote, info.workdir)
        await remote.releases_settled()
        try:
            link = self._link_for(host)
            command = RemoteCommand(argv=tuple(argv), env=dict(env),
                                    cwd=resolve_remote_dir(cwd, info) if cwd is not None else "",
                                    python_path=info.trainer_path, watch_connection=True,
                                    lease_file=link.lease_file, lease=self._lease)
        except ValueError as exc:
            raise LaunchError(f"{task.name}: {exc}") from None
        warm = None
        if self._warm_on and host.warm:
            warm = await self._pools().command(remote, info, host, command)
        try:
            started_command = warm or command
            process = await remote.open_process(started_command.shell_line())
            process.stdin.write(started_command.env_input())  # the env: never in a command line
        except (asyncssh.Error, OSError) as exc:
            raise remote.error(HostFailure.CONNECTION_LOST, f"cannot start {task.name}: {exc}") from None
        try:
            # (the wrapper's shell or the warm client's Python, beside the host's other starts)
            line, head = await asyncio.wait_for(read_first_line(process.stdout),
                                                limits.INTERPRETER.of(self._starting[host.name]))
        except (asyncio.TimeoutError, asyncssh.Error, OSError) as exc:
            process.close()
            raise remote.error(HostFailure.COMMAND_FAILED, f"{task.name} did not start: {exc!r}") from None
        except BaseException:  # cancelled: closing the channel ends the remote process too
            process.close()
            raise
        pid, forked = parse_pid(line.decode("utf-8", "replace")) if line is not None else (None, False)
        if pid is None:
            raise await _start_failure(remote, task, process, command, line)
        log.info("host %s: started %s as pid %d%s", host.name, task.name, pid, " (warm)" if forked else "")
        started = SSHTask(remote, process, pid, head, self._max_line, link)
        started.warm = forked
        started.launch_notice = self._warm.take_notice() if self._warm else ""
        return started

    async def check_ports(self, host: HostSpec, ports: Sequence[int]) -> list[PortProblem]:
        await self.prepare(host)
        if not ports:
            return []
        remote = await self._remote(host)
        answer = await remote.run_snippet("ports", ["check", *(str(p) for p in ports)],
                                          limits.INTERPRETER.of(len(ports)))
        problems = PortProblem.from_answer(host.name, answer)
        if problems is None:
            raise remote.error(HostFailure.COMMAND_FAILED, "the port check gave no answer")
        return problems

    async def free_ports(self, host: HostSpec, n: int,
                         avoid: frozenset[int] = frozenset()) -> list[PortReservation]:
        await self.prepare(host)
        if n <= 0:
            return []
        remote = await self._remote(host)
        return await hold_ports(remote, n, avoid)

    async def look(self, host: HostSpec) -> HostLook:
        """What ``host`` offers and what of this run's copies are there; places nothing
        (implements :class:`tui.launch.look.HostLooker`)."""
        return await look_at(await self._remote(host), self._upload, self._probe_timeout)

    async def port_open(self, host: HostSpec, port: int, timeout: float) -> bool | None:
        """Whether something on ``host`` accepts connections on its address's ``port``,
        asked of sshd there (a direct-tcpip channel: no process started). None when sshd
        refuses to forward (``AllowTcpForwarding no``) or the host is not connected."""
        entry = self._hosts.get(host.name)
        if entry is None or entry.lost or not entry.remote.connections:
            return None
        conn = entry.remote.connections[0]
        try:
            _, writer = await asyncio.wait_for(conn.open_connection(host.address, port), timeout)
        except asyncssh.ChannelOpenError as exc:
            return None if exc.code == asyncssh.OPEN_ADMINISTRATIVELY_PROHIBITED else False
        except (asyncio.TimeoutError, asyncssh.Error, OSError):
            return False
        writer.close()
        return True

    async def run_command(self, host: HostSpec, argv: Sequence[str]) -> str:
        """Run a short command on ``host`` over its connection; its stdout. A non-zero exit
        raises :class:`LaunchError`."""
        remote = await self._remote(host)
        result = await remote.run(shlex.join(argv))
        if result.exit_status != 0:
            raise remote.error(HostFailure.COMMAND_FAILED,
                               f"{argv[0]} failed ({deploy.describe_status(result)}): "
                               f"{deploy.last_lines(str(result.stderr or ''))}")
        return str(result.stdout or "")

    async def open_command(self, host: HostSpec, argv: Sequence[str]) -> SshCommandStream:
        """Keep ``argv`` running on ``host`` over its connection, fed line by line."""
        remote = await self._remote(host)
        try:
            return SshCommandStream(await remote.open_process(shlex.join(argv), encoding="utf-8"))
        except (asyncssh.Error, OSError) as exc:
            raise remote.error(HostFailure.CONNECTION_LOST, str(exc)) from None

    async def close(self) -> None:
        """Close every connection; remote tasks still running see EOF and exit."""
        for link in self._links.values():
            link.close()
        if self._warm is not None:
            await self._warm.close()
        for name in list(self._hosts):
            await self._forget(name)
        jumps = list(self._jumps.values())
        self._jumps.clear()
        for task in jumps:
            task.cancel()  # a no-op for those already connected
        results = await asyncio.gather(*jumps, return_exceptions=True)
        await close_connections([r for r in results if isinstance(r, asyncssh.SSHClientConnection)])

    # -- leftovers of earlier runs ------------------------------------------------------

    async def find_leftovers(self, host: HostSpec,
                             exclude_run_ids: Iterable[str] = ()) -> list[sweep.LeftoverTask]:
        """Processes on ``host`` tagged with a run id (tasks of earlier runs still alive).
        Needs a connection and the host's python, not TensorFlow."""
        remote = await self._remote(host)
        try:
            if remote.connecting:  # another's attempt holds its own slot: waiting for it takes none
                await remote.first_connection()
            async with self._slots:  # the sweep connects to every host: as many at a time as preparing
                if not remote.connections:
                    self.on_step(HostStep(host.name, HostPhase.CONNECTING))
                await remote.first_connection()
                self.on_step(HostStep(host.name, HostPhase.PREPARING, "looking for tasks of earlier runs"))
                answer = await remote.run_snippet("tasks", sweep.find_args())
            self.on_step(HostStep(host.name, HostPhase.WAITING, "connected; its preparation comes next"))
        except HostError as exc:
            self.on_step(HostStep(host.name, HostPhase.FAILED, f"{exc.failure.value}: {exc.detail}"))
            raise
        return sweep.parse_found(host.name, answer, exclude_run_ids)

    async def stop_leftovers(self, host: HostSpec, tasks: Sequence[sweep.LeftoverTask],
                             grace: float = sweep.DEFAULT_STOP_GRACE) -> list[sweep.StoppedLeftover]:
        """SIGTERM each leftover's process group, SIGKILL after ``grace`` seconds."""
        if not tasks:
            return []
        remote = await self._remote(host)
        answer = await remote.run_snippet("tasks", sweep.stop_args(tasks, grace), sweep.stop_timeout(grace))
        return sweep.parse_stopped(host.name, tasks, answer)


async def _start_failure(host: RemoteHost, task: TaskSpec, process: asyncssh.SSHClientProcess,
                         command: RemoteCommand, first: bytes | None) -> HostError:
    """Why a task's wrapper ended without printing its pid (``first``: the line it printed
    instead, if any)."""
    try:
        stderr = await asyncio.wait_for(process.stderr.read(), limits.FAILURE_OUTPUT.of())
        await asyncio.wait_for(process.wait(), limits.FAILURE_OUTPUT.of())
    except (asyncio.TimeoutError, asyncssh.Error, OSError):
        stderr = b""
    finally:
        process.close()
    text = deploy.last_lines(stderr.decode("utf-8", "replace"))
    if first:
        text += f" (its first line, not its pid: {first[:200].decode('utf-8', 'replace')!r})"
    if process.returncode == EXIT_NO_WORKDIR:
        return host.error(HostFailure.COMMAND_FAILED,
                          f"{task.name}: cannot change to directory {command.cwd}: {text}")
    return host.error(HostFailure.COMMAND_FAILED,
                      f"{task.name} did not start (exit status {process.returncode}): {text}")
