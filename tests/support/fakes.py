"""Fakes for driving the supervisor deterministically: a clock that moves only when told,
a launcher whose processes the test scripts line by line, and an event recorder that lets a
test await an event instead of sleeping."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trainer import protocol
from trainer.settings import TrainingSettings
from tui.config.cluster import ClusterConfig, HostSpec, Job, TaskSpec
from tui.core.events import ControllerEvent, Notice, TaskStateChanged
from tui.core.task_state import TaskState
from tui.launch.base import ConnectReport, PortProblem, PortReservation
from tui.launch.lines import OutputBatch, Stream


class FakeClock:
    """Time stands still until :meth:`advance`. :meth:`sleeping` waits until someone sleeps
    for a given duration, so a test knows the supervisor reached that wait."""

    def __init__(self) -> None:
        self._now = 0.0
        self._sleepers: list[tuple[float, float, asyncio.Future[None]]] = []
        self._waiters: list[asyncio.Future[None]] = []

    def monotonic(self) -> float:
        return self._now

    def time(self) -> float:
        return 1_700_000_000.0 + self._now

    async def sleep(self, seconds: float) -> None:
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        entry = (self._now + seconds, seconds, future)
        self._sleepers.append(entry)
        for waiter in self._waiters:
            if not waiter.done():
                waiter.set_result(None)
        self._waiters.clear()
        try:
            await future
        finally:
            self._sleepers.remove(entry)

    def advance(self, seconds: float) -> None:
        self._now += seconds
        for deadline, _, future in list(self._sleepers):
            if deadline <= self._now and not future.done():
                future.set_result(None)

    async def sleeping(self, duration: float) -> None:
        """Return once some coroutine sleeps for exactly ``duration``."""
        while not any(d == duration and not f.done() for _, d, f in self._sleepers):
            waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._waiters.append(waiter)
            await waiter


class FakeProcess:
    """A task process whose output and exit the test controls."""

    def __init__(self, task: TaskSpec, argv: Sequence[str], env: Mapping[str, str], pid: int,
                 record: Callable[[tuple[str, Any]], None]) -> None:
        self.task = task
        self._record = record
        self.sent: list[str] = []
        self.argv = tuple(argv)
        self.env = dict(env)
        self._pid = pid
        self._lines: asyncio.Queue[OutputBatch | None] = asyncio.Queue()
        self._exit: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        self.terminated = 0
        self.killed = 0
        self.ignore_term = False

    @property
    def pid(self) -> int | None:
        return self._pid

    async def output(self) -> AsyncIterator[OutputBatch]:
        while True:
            batch = await self._lines.get()
            if batch is None:
                return
            yield batch

    async def wait(self) -> int:
        return await asyncio.shield(self._exit)

    async def send(self, line: str) -> None:
        if self.exited:
            raise BrokenPipeError("gone")
        self.sent.append(line)
        self._record(("send", f"{self.task.name} {line}"))

    async def terminate(self) -> None:
        self.terminated += 1
        if not self.ignore_term:
            self.exit(-15)

    async def kill(self) -> None:
        self.killed += 1
        self.exit(-9)

    # -- scripting --

    def say(self, text: str, stream: Stream = Stream.STDOUT) -> None:
        self._lines.put_nowait(OutputBatch(stream, (text,)))

    def say_lines(self, texts: list[str], stream: Stream = Stream.STDOUT) -> None:
        """Several lines as one read of the task's pipe delivers them."""
        self._lines.put_nowait(OutputBatch(stream, tuple(texts)))

    def emit(self, event: protocol.Event) -> None:
        self.say(event.to_json())

    def loaded(self) -> None:
        self.emit(protocol.Loaded(role=self.task.job.value, index=self.task.index, pid=self._pid,
                                  seconds=1.0))

    def ready(self) -> None:
        """Report `loaded` and `ready` at once (the supervisor's `go` in between is not
        waited for: tests of the hold handshake use :meth:`loaded` and :attr:`sent`)."""
        self.loaded()
        self.emit(protocol.Ready(role=self.task.job.value, index=self.task.index, pid=self._pid,
                                 address=f"localhost:{self.task.port}"))

    def step(self, global_step: int, loss: float = 1.0, target: int = 0) -> None:
        self.emit(protocol.Step(role=self.task.job.value, index=self.task.index,
                                global_step=global_step, local_step=global_step, loss=loss,
                                examples_per_sec=100.0, step_time=0.01, target=target))

    def done(self, global_step: int = 0, loss: float | None = None, accuracy: float | None = None) -> None:
        self.emit(protocol.Done(role=self.task.job.value, index=self.task.index,
                                reason=protocol.REASON_TARGET_REACHED, global_step=global_step,
                                loss=loss, accuracy=accuracy))

    def exit(self, code: int) -> None:
        if not self._exit.done():
            self._lines.put_nowait(None)
            self._exit.set_result(code)

    def lose(self, error: Exception) -> None:
        """Its connection went before its exit came: ``wait`` raises ``error``."""
        if not self._exit.done():
            self._lines.put_nowait(None)
            self._exit.set_exception(error)

    @property
    def exited(self) -> bool:
        return self._exit.done()


@dataclass
class FakeReservation:
    port: int
    record: Callable[[tuple[str, Any]], None]
    released: bool = False

    def release(self) -> None:
        if not self.released:
            self.released = True
            self.record(("release", self.port))


@dataclass
class FakeLauncher:
    """Records launches in order; the test fetches each process with :meth:`started`."""

    port_problems: list[PortProblem] = field(default_factory=list)
    log: list[tuple[str, Any]] = field(default_factory=list)
    processes: dict[str, list[FakeProcess]] = field(default_factory=dict)
    _next_pid: int = 1000
    _next_port: int = 40000
    _waiters: list[asyncio.Future[None]] = field(default_factory=list)
    #: Starts held until the test sets their event: (task name, launch number) -> gate.
    gates: dict[tuple[str, int], asyncio.Event] = field(default_factory=dict)

    def record(self, entry: tuple[str, Any]) -> None:
        """Log what happened (launches, sends, releases) and wake whoever waits for it."""
        self.log.append(entry)
        for waiter in self._waiters:
            if not waiter.done():
                waiter.set_result(None)
        self._waiters.clear()

    async def logged(self, entry: tuple[str, Any]) -> None:
        """Return once ``entry`` is in the log."""
        while entry not in self.log:
            waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._waiters.append(waiter)
            await waiter

    @property
    def starts(self) -> list[str]:
        return [name for kind, name in self.log if kind == "start"]

    async def start(self, task: TaskSpec, host: HostSpec, argv: Sequence[str],
                    env: Mapping[str, str], cwd: str | None) -> FakeProcess:
        if (gate := self.gates.get((task.name, len(self.processes.get(task.name, [])) + 1))) is not None:
            self.record(("held", task.name))
            await gate.wait()
        self._next_pid += 1
        process = FakeProcess(task, argv, env, self._next_pid, self.record)
        self.processes.setdefault(task.name, []).append(process)
        self.record(("start", task.name))
        return process

    async def started(self, name: str, launch: int = 1) -> FakeProcess:
        """The ``launch``-th process of task ``name``, once it exists."""
        while len(self.processes.get(name, [])) < launch:
            waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._waiters.append(waiter)
            await waiter
        return self.processes[name][launch - 1]

    async def check_ports(self, host: HostSpec, ports: Sequence[int]) -> list[PortProblem]:
        self.record(("check", tuple(ports)))
        return [p for p in self.port_problems if p.port in ports]

    async def free_ports(self, host: HostSpec, n: int,
                         avoid: frozenset[int] = frozenset()) -> list[PortReservation]:
        held: list[PortReservation] = []
        while len(held) < n:
            self._next_port += 1
            if self._next_port not in avoid:
                held.append(FakeReservation(self._next_port, self.record))
        return held

    async def connect_all(self, hosts: Iterable[HostSpec]) -> ConnectReport:
        return ConnectReport()

    async def close(self) -> None:
        return None


class Recorder:
    """A sink that keeps every event and lets a test await one."""

    def __init__(self) -> None:
        self.events: list[ControllerEvent] = []
        self._waiters: list[tuple[Callable[[ControllerEvent], bool], asyncio.Future[ControllerEvent]]] = []

    def __call__(self, event: ControllerEvent) -> None:
        self.events.append(event)
        for predicate, future in list(self._waiters):
            if not future.done() and predicate(event):
                future.set_result(event)
                self._waiters.remove((predicate, future))

    async def wait_for(self, predicate: Callable[[ControllerEvent], bool]) -> ControllerEvent:
        for event in self.events:
            if predicate(event):
                return event
        future: asyncio.Future[ControllerEvent] = asyncio.get_running_loop().create_future()
        self._waiters.append((predicate, future))
        return await future

    async def state(self, task: str, state: TaskState, nth: int = 1) -> TaskStateChanged:
        """The ``nth`` change of ``task`` into ``state``, once it happened."""
        seen = 0

        def match(e: ControllerEvent) -> bool:
            nonlocal seen
            if isinstance(e, TaskStateChanged) and e.task == task and e.new is state:
                seen += 1
            return seen >= nth

        event = await self.wait_for(match)
        assert isinstance(event, TaskStateChanged)
        return event

    def states(self, task: str) -> list[TaskState]:
        return [e.new for e in self.events if isinstance(e, TaskStateChanged) and e.task == task]

    def of(self, kind: type) -> list[Any]:
        return [e for e in self.events if isinstance(e, kind)]


def make_config(tmp_path: Path, num_ps: int = 1, num_workers: int = 2,
                ports: Sequence[int | None] | None = None, **training: Any) -> ClusterConfig:
    """A validated-looking config built directly (load_config is someone else's)."""
    specs = [(Job.PS, i) for i in range(num_ps)] + [(Job.WORKER, i) for i in range(num_workers)]
    chosen = list(ports) if ports is not None else [None] * len(specs)
    tasks = tuple(TaskSpec(job=job, index=i, host="localhost", port=port)
                  for (job, i), port in zip(specs, chosen, strict=True))
    settings = TrainingSettings().replace(**training) if training else TrainingSettings()
    return ClusterConfig(path=tmp_path / "hosts.yaml", hosts={}, tasks=tasks, training=settings)


async def start_all(launcher: FakeLauncher, names: list[str], launch: int = 1) -> dict[str, FakeProcess]:
    """Make every named task's ``launch``-th start report ready, in start order."""
    processes = {}
    for name in names:
        processes[name] = await launcher.started(name, launch=launch)
        processes[name].ready()
    return processes


async def running(launcher: FakeLauncher, recorder: Recorder, names: list[str],
                  launch: int = 1) -> dict[str, FakeProcess]:
    """Bring every named task up, and wait for the supervisor to see the whole cluster up
    (for the ``launch``-th time)."""
    processes = await start_all(launcher, names, launch)
    seen = 0

    def up(event: object) -> bool:
        nonlocal seen
        seen += isinstance(event, Notice) and event.text.startswith(f"all {len(names)} tasks up")
        return seen >= launch

    await recorder.wait_for(up)
    return processes


async def finish_cleanly(processes: dict[str, FakeProcess]) -> None:
    for name, process in processes.items():
        if name.startswith("worker"):
            process.step(100, loss=0.5, target=100)
            process.done(global_step=100, loss=0.25 if name == "worker0" else 0.3,
                         accuracy=0.9 if name == "worker0" else None)
            process.exit(0)
    for name, process in processes.items():
        if name.startswith("ps"):
            process.exit(0)
