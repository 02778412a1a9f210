"""Measured network traffic of each parameter server, from the kernel's TCP counters.

Every ``interval`` seconds the monitor asks each ps host for its established TCP sockets
(``ss -tinpH state established``, from one sampler process per host that lives as long as the
run, locally or over the run's SSH connection: :mod:`tui.core.traffic_sampler`) and sums
the ``bytes_sent`` and ``bytes_received`` counters of the sockets each ps process owns. A ps
is known by its host and port, and its process by host and pid: in the usual layout every ps
listens on the same port of its own host. Both
directions matter and both kinds of socket: TensorFlow's gRPC runtime *pulls* tensors (the
consumer calls ``RecvTensor`` on the producer), so a ps sends variables over the channels
the workers opened to its port and fetches gradients over channels it opened to theirs.
Where ``ss`` shows no owner (another user's process) a socket on a ps port counts for that
ps. A socket that closes between two samples loses its last increment; gRPC channels live
for the whole run, and training reaching its target, a worker's ``done`` and a task ending or
stopping each trigger a sample at once, while the ps's channels are still open. The summary's
bytes cover the whole run, its rates the training.

Beside the measurement stands the placement's prediction: every step a worker reads every
variable and sends back a gradient of the same size, so a ps holding ``B`` bytes of dense
variables moves ``B x 2 x steps/s``. The measured figure adds gRPC's per-call overhead
(and, in sync mode, the accumulators' and token queue's traffic).

The monitor is a supervisor subscriber like any front end; it writes ``traffic.jsonl``
(one sample a line) and ``traffic.json`` (the run's totals) into the run directory.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from trainer import protocol
from trainer.settings import PlacementStrategy
from tui.common.private import private_opener
from tui.common.units import format_bytes, format_rate
from tui.config.cluster import ClusterConfig, HostSpec, Job
from tui.core.background import Background
from tui.core.events import (
    ControllerEvent,
    ProgressUpdate,
    RunFinished,
    RunStarted,
    TaskOutput,
    TaskStateChanged,
    TrainerEvent,
)
from tui.core.task_state import TaskState
from tui.core.traffic_sampler import (
    CommandOpener,
    CommandRunner,
    HostSampler,
    SamplingFailed,
    SocketCounters,
)

SAMPLE_INTERVAL = 0.5
TRAFFIC_SAMPLES = "traffic.jsonl"
TRAFFIC_SUMMARY = "traffic.json"

@dataclass(frozen=True)
class PsTraffic:
    """One ps task in one sample: bytes per second since the previous sample, and totals
    since the run started."""

    task: str
    sent_per_sec: float
    received_per_sec: float
    sent_total: int
    received_total: int

    @property
    def per_sec(self) -> float:
        return self.sent_per_sec + self.received_per_sec

    @property
    def total(self) -> int:
        return self.sent_total + self.received_total


@dataclass(frozen=True)
class TrafficSample:
    """Every ps task at one moment, and the global step then."""

    t: float
    global_step: int
    ps: tuple[PsTraffic, ...]


@dataclass(frozen=True)
class PsTrafficSummary:
    """One ps: bytes over the whole run (each direction), and bytes per second (both
    directions) over the training window beside the placement's prediction."""

    task: str
    bytes_sent: int
    bytes_received: int
    measured_per_sec: float
    expected_per_sec: float | None
    placed_bytes: int | None


@dataclass(frozen=True)
class TrafficSummary:
    """The run's traffic per ps. The window runs from the first to the last sample taken
    while training advanced; ``measured_imbalance`` is max over mean bytes per ps in it."""

    window_seconds: float
    steps_per_sec: float
    ps: tuple[PsTrafficSummary, ...]
    measured_imbalance: float
    expected_imbalance: float | None

    def lines(self) -> list[str]:
        """The summary's traffic block, one line per ps and one for the imbalance."""
        out = []
        for ps in self.ps:
            expected = (f", expected {format_rate(ps.expected_per_sec)}"
                        if ps.expected_per_sec is not None
                        else ", expected not known" if ps.placed_bytes is not None else "")
            out.append(f"{ps.task:<6} {format_rate(ps.measured_per_sec)} measured{expected} "
                       f"(sent {format_bytes(ps.bytes_sent)}, received {format_bytes(ps.bytes_received)})")
        predicted = (f" (placement predicts {self.expected_imbalance:.2f})"
                     if self.expected_imbalance is not None else "")
        out.append(f"max/mean traffic per ps {self.measured_imbalance:.2f}{predicted}")
        return out


#: Where a ps listens: its host (as hosts.yaml names it) and port. Every ps may listen on the
#: same port of its own host (``ps: [h1:2222, h2:2222]``), so a port alone names none.
PsAddress = tuple[str, int]
#: A process on a host: pids of different hosts may be equal.
HostPid = tuple[str, int]


class TrafficMeter:
    """Turns successive socket listings, one per host, into per-ps increments. Pure
    bookkeeping. ``ports``: each ps task by its address; ``pids``: each ps process by host
    and pid (kept up to date as tasks start)."""

    def __init__(self, ports: Mapping[PsAddress, str], pids: Mapping[HostPid, str] | None = None) -> None:
        self._ports = dict(ports)
        self.pids: dict[HostPid, str] = dict(pids or {})
        self._tasks = sorted(set(ports.values()), key=lambda name: (len(name), name))
        self._last: dict[str, dict[tuple[str, str], SocketCounters]] = {}
        self._totals = {task: [0, 0] for task in self._tasks}
        self._t: float | None = None

    def owner(self, host: str, sock: SocketCounters) -> str | None:
        """The ps task a socket on ``host`` belongs to: by owning process, else (no owner
        shown: another user's process) by the port it listens on there."""
        if sock.pids:
            return next((self.pids[(host, p)] for p in sock.pids if (host, p) in self.pids), None)
        return self._ports.get((host, sock.local_port))

    def update(self, t: float, global_step: int,
               listings: Mapping[str, Sequence[SocketCounters]]) -> TrafficSample:
        """A sample from each host's listing now. A host missing from ``listings`` (it did
        not answer in time) keeps its last counters: its increments arrive with its next."""
        increments = {task: [0, 0] for task in self._tasks}
        for host, sockets in listings.items():
            last = self._last.get(host, {})
            seen: dict[tuple[str, str], SocketCounters] = {}
            for sock in sockets:
                task = self.owner(host, sock)
                if task is None:
                    continue
                key = (sock.local, sock.peer)
                seen[key] = sock
                before = last.get(key)
                # A socket first seen counts in full: it opened during the run.
                sent = sock.bytes_sent - (before.bytes_sent if before else 0)
                received = sock.bytes_received - (before.bytes_received if before else 0)
                increments[task][0] += max(sent, 0)
                increments[task][1] += max(received, 0)
            self._last[host] = seen
        elapsed = t - self._t if self._t is not None else 0.0
        self._t = t
        ps = []
        for task, (sent, received) in increments.items():
            totals = self._totals[task]
            totals[0] += sent
            totals[1] += received
            ps.append(PsTraffic(task, sent / elapsed if elapsed > 0 else 0.0,
                                received / elapsed if elapsed > 0 else 0.0, totals[0], totals[1]))
        return TrafficSample(t, global_step, tuple(ps))


def predicts_traffic(placement: protocol.Placement | None) -> bool:
    """Whether bytes placed x 2 x global steps/s is what a ps should carry: true of the
    built-in trainer (each step reads its variables and sends their gradients once), not of a
    user's program, whose traffic per global step depends on what it does (a sync step
    aggregates every replica's gradients; slots or values computed on a worker travel too),
    so its expectation is "not known" rather than a figure 3-10x off."""
    return placement is not None and placement.strategy in {s.value for s in PlacementStrategy}


def summarise(samples: Sequence[TrafficSample],
              placement: protocol.Placement | None) -> TrafficSummary | None:
    """Bytes per ps over the whole run (to the last sample) and rates over the training
    window (None when fewer than two samples fall in it: "not measured")."""
    window = training_window(samples)
    if window is None:
        return None
    first, last = window
    seconds = last.t - first.t
    steps_per_sec = (last.global_step - first.global_step) / seconds
    placed = list(placement.ps_bytes) if placement is not None else None
    rows = []
    for index, (start, end, final) in enumerate(zip(first.ps, last.ps, samples[-1].ps, strict=True)):
        moved = end.total - start.total
        on_ps = placed[index] if placed is not None and index < len(placed) else None
        expected = on_ps * 2 * steps_per_sec if on_ps is not None and predicts_traffic(placement) else None
        rows.append(PsTrafficSummary(final.task, final.sent_total, final.received_total, moved / seconds,
                                     expected, on_ps))
    if not any(row.measured_per_sec for row in rows):
        return None  # training ended between two samples: nothing was measured
    return TrafficSummary(seconds, steps_per_sec, tuple(rows), _max_mean([r.measured_per_sec for r in rows]),
                          placement.max_mean_ratio if placement is not None and predicts_traffic(placement)
                          else None)


def training_window(samples: Sequence[TrafficSample]) -> tuple[TrafficSample, TrafficSample] | None:
    """The first and last sample between which the global step advanced."""
    moving = [s for s in samples if s.global_step > 0]
    if not moving:
        return None
    start = moving[0]
    end = max(moving, key=lambda s: (s.global_step, -s.t))  # the first sample at the final step
    if end.t <= start.t:
        return None
    return start, end


def _max_mean(values: Sequence[float]) -> float:
    mean = sum(values) / len(values) if values else 0.0
    return max(values) / mean if mean > 0 else 1.0


@dataclass(frozen=True)
class TrafficUpdate:
    """A new sample and each ps's expected bytes/s at that moment, as published to the
    monitor's listeners (a front end on another thread gets it through its inbox)."""

    sample: TrafficSample | None
    expected_per_sec: tuple[float | None, ...]
    #: Set once the run is over: the run's traffic (what headless prints after its
    #: summary), which every front end shows from then on instead of an idle sample.
    summary: TrafficSummary | None = None
    #: Set instead once a run is over without one: why its traffic was not measured.
    not_measured: str | None = None

    @property
    def final(self) -> bool:
        """The run is over: this is its traffic (or why there is none), no live sample."""
        return self.summary is not None or self.not_measured is not None

    def lines(self) -> list[str]:
        """The summary's traffic block, as both front ends end a run with it (empty for a
        live sample)."""
        if self.summary is not None:
            return self.summary.lines()
        return [f"not measured: {self.not_measured}"] if self.not_measured else []


class TrafficMonitor:
    """Samples each ps task's traffic while a run is on. Subscribe :meth:`handle` to the
    supervisor, and a listener with :meth:`subscribe` for each sample; :meth:`close` stops the
    sampler (a run's end stops it too). ``open_command`` (a router's) keeps one sampler
    running per ps host; without it each sample runs ``ss`` with ``run_command``."""

    def __init__(self, config: ClusterConfig, run_command: CommandRunner,
                 interval: float = SAMPLE_INTERVAL, open_command: CommandOpener | None = None) -> None:
        self._config = config
        self._run_command = run_command
        self._open_command = open_command
        self._interval = interval
        self._listeners: list[Callable[[TrafficUpdate], None]] = []
        self._sampler = Background()
        self._run_dir: Path | None = None
        self._global_step = 0
        self.placement: protocol.Placement | None = None
        self.samples: list[TrafficSample] = []
        self.failure: str | None = None
        self.summary: TrafficSummary | None = None
        self._hosts: dict[str, list[int]] = {}
        self._task_hosts: dict[str, str] = {}
        self._ps_names: set[str] = set()
        self._meter = TrafficMeter({})
        self._soon = asyncio.Event()

    def handle(self, event: ControllerEvent) -> None:
        """The supervisor's sink."""
        if type(event) is TaskOutput:
            return  # (nearly every event, and it does not matter here)
        if isinstance(event, RunStarted):
            self._start(event)
        elif isinstance(event, TaskStateChanged):
            if event.pid is not None and event.task in self._ps_names:
                self._meter.pids[(self._task_hosts.get(event.task, ""), event.pid)] = event.task
            if event.new.is_finished or event.new is TaskState.STOPPING:
                # The end is near: sample now, while the ps's channels are still open.
                self._soon.set()
        elif isinstance(event, ProgressUpdate):
            progress = event.progress
            if 0 < progress.target <= progress.global_step and self._global_step < progress.target:
                self._soon.set()  # training is over: the ps leave within moments
            self._global_step = max(self._global_step, progress.global_step)
        elif isinstance(event, TrainerEvent):
            if isinstance(event.event, protocol.Placement) and self.placement is None:
                self.placement = event.event
            elif isinstance(event.event, protocol.Done):
                self._soon.set()
        elif isinstance(event, RunFinished):
            self._finish()

    def subscribe(self, listener: Callable[[TrafficUpdate], None]) -> None:
        """Call ``listener`` with each new sample, on the monitor's own loop."""
        self._listeners.append(listener)

    def expected_per_sec(self, span: int = 4) -> list[float | None]:
        """Each ps's expected bytes/s now: bytes placed on it x 2 x the global steps per
        second over the last ``span`` samples."""
        recent = self.samples[-span:]
        if not predicts_traffic(self.placement) or len(recent) < 2 or recent[-1].t <= recent[0].t:
            return []
        assert self.placement is not None  # predicts_traffic checked it
        steps_per_sec = (recent[-1].global_step - recent[0].global_step) / (recent[-1].t - recent[0].t)
        return [size * 2 * steps_per_sec for size in self.placement.ps_bytes]

    @property
    def not_measured(self) -> str | None:
        """Why the finished run has no traffic summary (None when it has one)."""
        if self.summary is not None:
            return None
        if self.failure:
            return self.failure
        if not self._ps_names:
            return "no ps task in this run"
        return "the run was too short to sample (fewer than two samples while training advanced)"

    def record(self) -> dict[str, object]:
        """The run's traffic as ``traffic.json`` and ``--json``'s ``run_finished`` hold it."""
        return {"summary": asdict(self.summary) if self.summary else None, "failure": self.failure,
                "not_measured": self.not_measured}

    def _start(self, event: RunStarted) -> None:
        self._sampler.cancel()
        self._run_dir = event.run_dir
        self._global_step = 0
        self.placement = None
        self.samples = []
        self.summary = None
        self.failure = None
        self._hosts = {}
        self._task_hosts = {info.name: info.host for info in event.tasks}
        ports = {(info.host, info.port): info.name for info in event.tasks if info.job is Job.PS}
        # On each ps host, sockets to or from any cluster port: a ps's own channels to the
        # workers too (those of other processes are told apart by owner).
        every_port = sorted({info.port for info in event.tasks})
        for host, _ in ports:
            self._hosts[host] = every_port
        self._ps_names = set(ports.values())
        self._meter = TrafficMeter(ports)
        if self._hosts:
            self._sampler.start(self._sample_forever)

    @property
    def final_update(self) -> TrafficUpdate:
        """The run's traffic, once it is over, as every front end is given it."""
        return TrafficUpdate(self.samples[-1] if self.samples else None, (), self.summary, self.not_measured)

    def _finish(self) -> None:
        self._sampler.cancel()
        self.summary = summarise(self.samples, self.placement)
        update = self.final_update  # (also when not measured: the app's summary says why)
        for listener in self._listeners:
            listener(update)
        if self._run_dir is not None and self._run_dir.is_dir():
            (self._run_dir / TRAFFIC_SUMMARY).write_text(json.dumps(self.record(), indent=2) + "\n",
                                                         encoding="utf-8")

    async def close(self) -> None:
        """Stop sampling (idempotent)."""
        await self._sampler.close()

    async def _sample_forever(self) -> None:
        loop = asyncio.get_running_loop()
        samplers = [HostSampler(self._config.hosts.get(name) or HostSpec(name=name, address=name), ports,
                                self._run_command, self._open_command) for name, ports in self._hosts.items()]
        # A host slower than this is left out of a sample (its bytes come with its next).
        patience = max(2 * self._interval, 1.0)
        try:
            while True:
                started = loop.time()
                self._soon.clear()
                try:
                    await self._sample(samplers, started, patience)
                except SamplingFailed as exc:
                    self.failure = f"cannot read TCP counters: {exc}"
                    return
                # Every interval from the last sample's start, however long its reads took.
                left = max(0.0, started + self._interval - loop.time())
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(self._soon.wait(), left)
        finally:
            for sampler in samplers:
                sampler.end()  # now: a second cancel may cut the wait below short
            await asyncio.gather(*(sampler.close() for sampler in samplers), return_exceptions=True)

    async def _sample(self, samplers: Sequence[HostSampler], t: float, patience: float) -> None:
        answers = await asyncio.gather(*(sampler.read(patience) for sampler in samplers))
        listings = {sampler.host.name: sockets for sampler, sockets in zip(samplers, answers, strict=True)
                    if sockets is not None}
        self.record_sample(self._meter.update(t, self._global_step, listings))

    def record_sample(self, sample: TrafficSample) -> None:
        """Keep ``sample``, append it to the run's ``traffic.jsonl`` and tell the listeners."""
        self.samples.append(sample)
        if self._run_dir is not None and self._run_dir.is_dir():
            with open(self._run_dir / TRAFFIC_SAMPLES, "a", encoding="utf-8",
                      opener=private_opener) as handle:
                handle.write(json.dumps(asdict(sample), separators=(",", ":")) + "\n")
        update = TrafficUpdate(sample, tuple(self.expected_per_sec()))
        for listener in self._listeners:
            listener(update)
