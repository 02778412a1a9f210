"""The launcher interface: how the supervisor starts and signals task processes on a host.

A launcher knows how to reach a host (a local process, an SSH channel); the supervisor
knows what to run and when. Everything here is async so an SSH launcher can satisfy it
without blocking the event loop.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from tui.config.cluster import HostSpec, TaskSpec
from tui.launch.lines import OutputBatch
from tui.launch.probe import HostResources

#: The reason given with the STARTING state of a task forked from a warm pool:
#: the headless start-up lines and the task table show it.
WARM_REASON = "warm start"


class LaunchError(Exception):
    """A task or a check could not be started on its host (program missing, host
    unreachable, host kind not supported by this launcher). The message is for people."""


@dataclass(frozen=True)
class PortProblem:
    """A port that a task needs and cannot have. ``pid``/``process_name`` name the holder
    when the launcher could find it (locally, via psutil)."""

    host: str
    port: int
    reason: str = "in use"
    pid: int | None = None
    process_name: str | None = None

    @classmethod
    def from_answer(cls, host: str, answer: object) -> list[PortProblem] | None:
        """The port snippet's answer (``ports check``) as problems; None for anything else."""
        if not isinstance(answer, list):
            return None
        return [cls(host, int(item["port"]), str(item["reason"]),
                    int(item["pid"]) if item.get("pid") else None,
                    str(item["name"]) if item.get("name") else None)
                for item in answer if isinstance(item, Mapping)]

    def __str__(self) -> str:
        text = f"{self.host}:{self.port} is {self.reason}"
        if self.pid is not None:
            text += f" by pid {self.pid}" + (f" ({self.process_name})" if self.process_name else "")
        return text


class PortReservation(Protocol):
    """A free port held for a task until it starts. Release it right before starting the
    task that binds it; after that the port is only as safe as the gap is short."""

    @property
    def port(self) -> int: ...

    def release(self) -> None:
        """Stop holding the port. Idempotent."""
        ...


class RunningTask(Protocol):
    """A launched task process."""

    @property
    def pid(self) -> int | None:
        """The process id on its host (None if the launcher cannot tell)."""
        ...

    def output(self) -> AsyncIterator[OutputBatch]:
        """Every line the task prints on stdout and stderr, in batches tagged with their
        stream (the lines one read completed), in the order they arrive, until both streams
        reach EOF. Call once. (:func:`tui.launch.streams.each_line` gives them one by one.)"""
        ...

    async def wait(self) -> int:
        """Wait for the process to exit; return its exit code (negative: killed by that
        signal)."""
        ...

    async def send(self, line: str) -> None:
        """Write one line to the task's stdin (the trainer's ``go`` after ``--hold``).
        Raises OSError (e.g. BrokenPipeError) if the task is gone."""
        ...

    async def terminate(self) -> None:
        """Ask the task to stop: close its stdin (the trainer's stop signal) and send
        SIGTERM to its whole process group. Returns without waiting for the exit."""
        ...

    async def kill(self) -> None:
        """SIGKILL the task's whole process group. Returns without waiting for the exit."""
        ...


#: Seconds to wait for an SSH connection (TCP and handshake) before the host is unreachable.
DEFAULT_CONNECT_TIMEOUT = 10.0


@dataclass(frozen=True)
class HostInfo:
    """A prepared host: what the probe found and where the trainer was deployed."""

    name: str
    python: str
    python_version: str
    tf_version: str
    workdir: str  # absolute
    home: str
    trainer_path: str
    uploaded: bool
    configured_workdir: str = ""  # as hosts.yaml wrote it
    #: Its cores and GPUs (tui.plan.allocation), probed while the trainer was deployed.
    resources: HostResources | None = None


@dataclass(frozen=True)
class ConnectReport:
    """The outcome of :meth:`Launcher.connect_all`: hosts ready, hosts failed (each error
    names its host and cause), and warnings every run should show (insecure host keys)."""

    hosts: tuple[HostInfo, ...] = ()
    failures: tuple[LaunchError, ...] = ()
    warnings: tuple[str, ...] = ()
    #: Where a launcher that picks machines itself (Slurm) put each task, by task name: a
    #: copy of its hosts entry naming the node (address) it runs on. Others leave it empty.
    placement: Mapping[str, HostSpec] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not self.failures


class Launcher(Protocol):
    """Starts tasks on hosts and checks ports there."""

    async def connect_all(self, hosts: Iterable[HostSpec]) -> ConnectReport:
        """Make every host ready at once (connect, check Python and TensorFlow, deploy the
        trainer) before anything starts. A host that cannot be made ready is a failure in
        the report, not an exception."""
        ...

    async def start(self, task: TaskSpec, host: HostSpec, argv: Sequence[str],
                    env: Mapping[str, str], cwd: str | None) -> RunningTask:
        """Start ``argv`` for ``task`` on ``host`` in its own process group, with stdin a
        pipe kept open until :meth:`RunningTask.terminate` (so the task also sees EOF if
        the controller dies). ``env`` is added to the host's normal environment.
        Raises :class:`LaunchError`."""
        ...

    async def check_ports(self, host: HostSpec, ports: Sequence[int]) -> list[PortProblem]:
        """Which of ``ports`` cannot be listened on at ``host`` right now."""
        ...

    async def free_ports(self, host: HostSpec, n: int,
                         avoid: frozenset[int] = frozenset()) -> list[PortReservation]:
        """Reserve ``n`` distinct free ports on ``host`` (none of them in ``avoid``)."""
        ...

    async def close(self) -> None:
        """Release what the launcher holds (connections, reservations)."""
        ...


class HostLink(Protocol):
    """Whether a remote host answers the controller, and what to do when it stops
    (:mod:`tui.launch.ssh.host_link`). One per host, kept across reconnections."""

    @property
    def host(self) -> str: ...

    @property
    def where(self) -> str:
        """``user@address:port``, for messages."""
        ...

    @property
    def lease(self) -> float:
        """Seconds a task of the host runs on without word from the controller."""
        ...

    def silent_for(self) -> float | None:
        """Seconds since the host last answered, while it does not answer; None while it does."""
        ...

    def changed(self) -> Awaitable[object]:
        """What to await for the next change between answering and not (armed by the call:
        a change after it, even before the await, ends the wait)."""
        ...

    def abandon(self) -> None:
        """Give up on the host's connection: every wait of its tasks raises (connection lost)."""
        ...

    async def reconnect(self) -> None:
        """Connect to the host again and prepare it; raises :class:`LaunchError`."""
        ...


@runtime_checkable
class HandsOutput(Protocol):
    """A running task whose output can be handed to a handler as it is read (a local or warm
    task's pipes): instead of :meth:`RunningTask.output`, what a reader that acts on every
    batch at once uses, so that no task wakes up per batch."""

    async def hand_output(self, handle: Callable[[OutputBatch], None]) -> None:
        """Call ``handle`` with every batch :meth:`RunningTask.output` would yield, in the same
        order, from the read that completed it; return once both streams reached EOF. An
        exception from ``handle`` ends the reading and is raised here. Call once, instead of
        ``output``."""
        ...


@runtime_checkable
class LinkWatching(Protocol):
    """A launcher that knows whether its hosts answer (SSH; a local task's host always does)."""

    def link(self, host: HostSpec) -> HostLink | None: ...


@runtime_checkable
class PortProber(Protocol):
    """A launcher that can tell whether something accepts connections on a port of its host,
    seen from that host (over SSH: a forwarded connection sshd opens there, so neither a
    firewall nor a jump host between here and there hides it). None: it cannot tell."""

    async def port_open(self, host: HostSpec, port: int, timeout: float) -> bool | None: ...


@runtime_checkable
class CommandRunner(Protocol):
    """A launcher that can run a short command on its hosts (``ss`` for traffic counters,
    ``ps`` for a task's CPU time). Raises OSError or :class:`LaunchError` when it cannot."""

    async def run_command(self, host: HostSpec, argv: Sequence[str]) -> str: ...


@runtime_checkable
class TaskPrestarter(Protocol):
    """A launcher that can get ready for a task before it is asked to start it: start, without
    waiting, the warm pool the task will fork from, so that its import overlaps the rest of
    the controller's start."""

    def prestart(self, host: HostSpec, argv: Sequence[str], env: Mapping[str, str]) -> None: ...


@runtime_checkable
class PoolStarter(Protocol):
    """A launcher whose hosts can start their warm pool while they are prepared, when told
    which kind of task will come (:data:`trainer.warm.MODES`; None: none known), and
    whether the tasks need TensorFlow (False: nothing looks for it on the hosts)."""

    def expect_pools(self, mode: str | None, tensorflow: bool = True) -> None: ...


def resolve_remote_dir(path: str, info: HostInfo) -> str:
    """A task's directory on the host, absolute: ``~`` is the remote home, and relative
    paths are taken from the home directory (where an SSH session starts)."""
    if path == info.configured_workdir:
        return info.workdir
    if path in ("", "~"):
        return info.home
    if path.startswith("~/"):
        return f"{info.home.rstrip('/')}/{path[2:]}"
    if path.startswith("/"):
        return path
    return f"{info.home.rstrip('/')}/{path}"
