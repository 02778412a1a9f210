"""CPU and resident memory of each task while a run is on, as ``top`` would show them: the
whole process group of the task (what it started counts too), read from ``/proc`` on its
host, this machine or an SSH host over its existing connection (the same one read of
``/proc/*/stat`` as the busy check of :mod:`tui.core.supervisor.busy`), every
:data:`SAMPLE_SECONDS`. Front ends :meth:`~UsageMonitor.subscribe` to its samples (as to the
traffic monitor's); nothing is written to the run directory."""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from tui.config.cluster import ClusterConfig, HostSpec
from tui.core.background import Background
from tui.core.events import (
    ControllerEvent,
    RunFinished,
    RunStarted,
    TaskOutput,
    TaskStateChanged,
    TrainerEvent,
)
from tui.core.stat_reader import OpenCommand, RunCommand, StatReader
from tui.core.supervisor.busy import CLOCK_TICKS
from tui.core.task_state import TaskState
from tui.launch.base import LaunchError

SAMPLE_SECONDS = 2.0
#: A host's figures are shown while its last answer is at most this many sampling intervals
#: old: a host cut off kept its tasks' last cpu% and rss (and the header's totals) on screen.
FRESH_INTERVALS = 3
#: ``rss`` of /proc/PID/stat is in pages (a remote host's are taken to be this machine's).
PAGE_BYTES = os.sysconf("SC_PAGE_SIZE")


@dataclass(frozen=True)
class Usage:
    """CPU (percent of one core, as top: 250 = two and a half cores; None until two reads
    are apart) and resident memory in bytes."""

    cpu_percent: float | None
    rss_bytes: int


@dataclass(frozen=True)
class UsageSample:
    """Every task's usage at one moment, and each host's total over its tasks: only those whose
    host answered lately (a task or host absent: not known now); ``heard``: when each of those
    hosts last answered (wall time)."""

    t: float
    tasks: dict[str, Usage] = field(default_factory=dict)
    hosts: dict[str, Usage] = field(default_factory=dict)
    heard: dict[str, float] = field(default_factory=dict)


def group_totals(stat_lines: str, groups: set[int]) -> dict[int, tuple[int, int]]:
    """(CPU ticks, resident pages) of each process group in ``groups``, summed over its
    processes among ``/proc/*/stat`` lines."""
    totals: dict[int, tuple[int, int]] = {}
    for line in stat_lines.splitlines():
        # The command name (field 2) is in parentheses and may hold spaces or ")".
        fields = line[line.rfind(")") + 2:].split()
        if len(fields) < 22:
            continue
        try:
            group = int(fields[2])
            if group not in groups:
                continue
            ticks, pages = int(fields[11]) + int(fields[12]), int(fields[21])
        except ValueError:
            continue
        before = totals.get(group, (0, 0))
        totals[group] = (before[0] + ticks, before[1] + pages)
    return totals


@dataclass(frozen=True)
class _Answer:
    """One host's answer to a read: when it came, and its tasks' usage then."""

    t: float
    tasks: dict[str, Usage]


class UsageMonitor:
    """Samples every running task's process group on its host while a run is on. Subscribe
    :meth:`handle` to the supervisor (on the core's loop); :meth:`close` stops it.

    Each host is read on its own: one that does not answer holds up no other's figures, and
    its own go from the samples once its last answer is :data:`FRESH_INTERVALS` intervals
    old, or at once when the controller finds it unreachable; they come back with its next
    answer."""

    def __init__(self, config: ClusterConfig, run_command: RunCommand,
                 interval: float = SAMPLE_SECONDS, clock: Callable[[], float] = time.monotonic,
                 open_command: OpenCommand | None = None) -> None:
        self._config = config
        self._run_command = run_command
        self._open_command = open_command
        self._readers: dict[str, StatReader] = {}  # host -> its reader (kept across runs)
        self._interval = interval
        self._clock = clock
        self._hosts: dict[str, str] = {}  # task -> host name
        self._groups: dict[str, int] = {}  # task -> process group (its pid: a session leader)
        self._ticks: dict[str, tuple[float, int]] = {}  # task -> (time, ticks) of the last read
        self._unreachable: set[str] = set()  # tasks whose host the controller cannot reach
        self._reads: dict[str, asyncio.Task[None]] = {}  # host -> its read in flight
        self._answers: dict[str, _Answer] = {}  # host -> its latest answer
        self._sampler = Background()
        self.latest: UsageSample | None = None
        self._listeners: list[Callable[[UsageSample], None]] = []

    def subscribe(self, listener: Callable[[UsageSample], None]) -> None:
        """Call ``listener`` with each new sample, on the monitor's own loop."""
        self._listeners.append(listener)

    def handle(self, event: ControllerEvent) -> None:
        """The supervisor's sink."""
        if type(event) is TaskOutput or type(event) is TrainerEvent:
            return  # (nearly every event, and none of them matters here)
        if isinstance(event, RunStarted):
            self._hosts = {info.name: info.host for info in event.tasks}
            self._groups.clear()
            self._ticks.clear()
            self._unreachable.clear()
            self._cancel_reads()
            self._answers.clear()
            self.latest = None
            if not self._sampler.running:
                self._sampler.start(self._sample_forever)
        elif isinstance(event, TaskStateChanged):
            if event.new is TaskState.UNREACHABLE:
                # Its host does not answer the controller: its figures are not known now.
                self._unreachable.add(event.task)
                self._ticks.pop(event.task, None)  # (a CPU rate over the gap is no rate)
                for answer in self._answers.values():  # (nor, once it is back, what it was)
                    answer.tasks.pop(event.task, None)
                if self.latest is not None:
                    self._publish(self._compose(self._clock()))
            elif event.new.is_active and event.pid is not None:
                self._unreachable.discard(event.task)
                if self._groups.get(event.task) != event.pid:
                    self._ticks.pop(event.task, None)
                self._groups[event.task] = event.pid
            elif not event.new.is_active:
                self._groups.pop(event.task, None)
                self._unreachable.discard(event.task)
        elif isinstance(event, RunFinished):
            self._sampler.cancel()
            self._cancel_reads()

    async def close(self) -> None:
        """Stop sampling and end the hosts' readers (idempotent)."""
        await self._sampler.close()
        self._cancel_reads()
        readers, self._readers = list(self._readers.values()), {}
        for reader in readers:
            await reader.close()

    def _cancel_reads(self) -> None:
        for read in self._reads.values():
            read.cancel()
        self._reads.clear()

    async def _sample_forever(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            started = loop.time()
            await self.sample_once()
            await asyncio.sleep(max(0.0, started + self._interval - loop.time()))

    async def sample_once(self) -> UsageSample:
        """Read every host that has a running task (waiting for none longer than an
        interval; one still reading goes on), and publish the sample."""
        by_host: dict[str, dict[str, int]] = {}
        for task, group in self._groups.items():
            if task not in self._unreachable:
                by_host.setdefault(self._hosts.get(task, "localhost"), {})[task] = group
        for host_name, groups in by_host.items():
            read = self._reads.get(host_name)
            if read is None or read.done():
                self._reads[host_name] = asyncio.create_task(self._read(host_name, groups))
        if by_host:
            await asyncio.wait([self._reads[name] for name in by_host], timeout=self._interval)
        sample = self._compose(self._clock())
        self._publish(sample)
        return sample

    async def _read(self, host_name: str, groups: dict[str, int]) -> None:
        """Read one host's tasks once; keep its answer (none when it cannot be read)."""
        reader = self._readers.get(host_name)
        if reader is None:
            host = self._config.hosts.get(host_name) or HostSpec(name=host_name, address=host_name)
            reader = self._readers[host_name] = StatReader(host, self._run_command, self._open_command)
        try:
            lines = await reader.read(groups.values())
        except (OSError, LaunchError):
            return  # a host not answering: its figures go once its last answer is old
        now = self._clock()
        totals = group_totals(lines, set(groups.values()))
        tasks: dict[str, Usage] = {}
        for task, group in groups.items():
            if group not in totals:
                continue
            ticks, pages = totals[group]
            before = self._ticks.get(task)
            self._ticks[task] = (now, ticks)
            cpu = (100.0 * (ticks - before[1]) / CLOCK_TICKS / (now - before[0])
                   if before is not None and now > before[0] else None)
            tasks[task] = Usage(cpu, pages * PAGE_BYTES)
        self._answers[host_name] = _Answer(now, tasks)

    def _compose(self, now: float) -> UsageSample:
        """The figures known at ``now``: each host's latest answer while it is fresh, without
        the tasks gone or unreachable since."""
        tasks: dict[str, Usage] = {}
        hosts: dict[str, Usage] = {}
        heard: dict[str, float] = {}
        wall = time.time()
        for host_name, answer in self._answers.items():
            if now - answer.t > FRESH_INTERVALS * self._interval:
                continue
            known = {task: usage for task, usage in answer.tasks.items()
                     if task in self._groups and task not in self._unreachable}
            if not known:
                continue
            tasks.update(known)
            hosts[host_name] = Usage(sum(u.cpu_percent or 0.0 for u in known.values()),
                                     sum(u.rss_bytes for u in known.values()))
            heard[host_name] = wall - (now - answer.t)
        return UsageSample(now, tasks, hosts, heard)

    def _publish(self, sample: UsageSample) -> None:
        self.latest = sample
        for listener in self._listeners:
            listener(sample)
