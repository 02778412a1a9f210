"""The two measurements of :mod:`bench.training.scaling`, each over a time-based window: a 1 ps + N
worker cluster of the trainer's own tasks (argv and environment from tui.plan.tasks, with or
without the controller's share of the cores), and N independent :mod:`bench.training.solo`
processes of the same model (the machine's compute limit for it).

The cluster's window is the one every throughput benchmark uses (:mod:`bench.harness.window`),
its run stopped once the window has lasted ``seconds``. Every process carries a
:data:`bench.harness.processes.TAG_ENV` tag and whatever carries it is killed
when the measurement ends, also on error or Ctrl-C."""

from __future__ import annotations

import sys
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import yaml

from bench.harness import window as windows
from bench.harness.processes import Child, environment, kill_tagged
from trainer import protocol
from trainer.settings import TrainingSettings
from tui.config.cluster import ClusterConfig, Job, TaskSpec
from tui.config.load import load_config
from tui.config.resources import ResourceSettings, ThreadsMode
from tui.launch.local.ports import reserve_free_ports
from tui.plan.allocation import Allocation, allocate, host_offers
from tui.plan.tasks import plan_run

#: The longest a measurement may wait for its processes to start and warm up.
START_TIMEOUT = 180.0
#: The models' training settings: seed 000's CNN on synthetic 28x28 input, the MLP on digits.
DATASETS = {"mlp": "digits", "cnn": "synthetic"}


class MeasureError(Exception):
    """A measurement did not get its window (a process failed or never warmed up)."""


@dataclass(frozen=True)
class Measured:
    """Examples per second of all processes together over one window; a cluster's workers'
    sampled step anatomies too (:mod:`trainer.anatomy`)."""

    examples_per_sec: float
    seconds: float
    anatomies: tuple[protocol.StepAnatomy, ...] = ()

    def anatomy(self) -> str:
        """The mean share of each part over the sampled steps, largest first ("" if none)."""
        if not self.anatomies:
            return ""
        shares: dict[str, float] = {}
        for event in self.anatomies:
            for part in event.parts:
                name = part.part if part.ps is None else f"{part.part} ps{part.ps}"
                shares[name] = shares.get(name, 0.0) + part.share / len(self.anatomies)
        shown = sorted(((n, s) for n, s in shares.items() if s >= 0.005), key=lambda item: -item[1])
        # Each worker's latest figure is its tracing's cost over the whole run so far.
        latest = {event.index: event.cost for event in self.anatomies}
        return (" · ".join(f"{name} {share:.0%}" for name, share in shown)
                + f"; tracing cost at most {max(latest.values()):.1%} of a worker's time")


def settings_for(model: str) -> TrainingSettings:
    """The training settings both measurements use for ``model`` (async, batch 64)."""
    return TrainingSettings().replace(model=model, dataset=DATASETS.get(model, "synthetic"),
                                      mode="async", steps=10**9, log_every=10)


def _wait(check: Callable[[], bool], timeout: float, children: list[Child]) -> None:
    """Poll ``check`` until it holds; MeasureError if a process exits or time runs out."""
    deadline = time.monotonic() + timeout
    while not check():
        if any(c.exited.is_set() for c in children):
            tail = " / ".join(line for c in children for line in c.stderr_tail[-2:])[-300:]
            raise MeasureError(f"a process exited early: {tail}")
        if time.monotonic() > deadline:
            raise MeasureError(f"not warm after {timeout:g} s")
        time.sleep(0.05)


def measure_cluster(model: str, workers: int, threads: ThreadsMode, seconds: float,
                    directory: Path, fuse: bool = True) -> tuple[Measured, Allocation]:
    """1 ps + ``workers`` workers on this machine: examples/sec over ``seconds`` once every
    worker is warm, from their step events, and the step anatomies sampled meanwhile; and
    the allocation they ran with."""
    settings = settings_for(model)
    directory.mkdir(parents=True, exist_ok=True)
    document = {
        "cluster": {"ps": ["localhost:auto"], "worker": ["localhost:auto"] * workers},
        "training": {"model": model, "dataset": settings.dataset.value, "mode": "async",
                     "steps": settings.steps, "log_every": settings.log_every, "fuse": fuse},
        "resources": {"threads": threads.value},
        "run_dir": str(directory / "runs"),
    }
    path = directory / "hosts.yaml"
    path.write_text(yaml.safe_dump(document, sort_keys=False), encoding="utf-8")
    cluster = load_config(path)
    allocation = allocate(cluster, host_offers(cluster, {}))
    reservations = reserve_free_ports(len(cluster.tasks))
    ports = {t.name: r.port for t, r in zip(cluster.tasks, reservations, strict=True)}
    plans = plan_run(cluster, cluster.training, ports, "scaling", hold=False,
                     run_dir=directory / "run", allocation=allocation)
    for reservation in reservations:
        reservation.release()
    steps: dict[str, list[protocol.Step]] = {p.name: [] for p in plans if p.spec.job is Job.WORKER}
    anatomies: list[protocol.StepAnatomy] = []
    lock = threading.Lock()

    def collector(name: str) -> Callable[[str], None]:
        def on_line(line: str) -> None:
            event = protocol.parse_event(line)
            if isinstance(event, protocol.Step) and name in steps:
                with lock:
                    steps[name].append(event)
            elif isinstance(event, protocol.StepAnatomy):
                with lock:
                    anatomies.append(event)
        return on_line

    tag = uuid.uuid4().hex
    children: list[Child] = []
    try:
        for plan in plans:
            children.append(Child(plan.name, plan.argv, environment(tag, dict(plan.env)),
                                  on_line=collector(plan.name)))

        def warm() -> bool:
            with lock:
                return windows.warm_point(list(steps.values())) is not None

        def window_done() -> bool:
            with lock:
                return windows.reached(list(steps.values()), seconds)

        _wait(warm, START_TIMEOUT, children)
        _wait(window_done, seconds + 30, children)
        with lock:
            measured = windows.measure(list(steps.values()))
    finally:
        for child in children:
            child.kill()
        kill_tagged(tag)
    assert measured is not None  # window_done held
    # Async: one batch per global step.
    return Measured(measured.examples_per_sec(settings.batch_size), measured.seconds,
                    tuple(anatomies)), allocation


def solo_allocation(workers: int, threads: ThreadsMode) -> Allocation:
    """The shares ``workers`` lone processes get on this machine (no ps among them)."""
    tasks = tuple(TaskSpec(Job.WORKER, i, "localhost", None) for i in range(workers))
    config = ClusterConfig(path=Path("scaling"), hosts={}, tasks=tasks, training=TrainingSettings(),
                           resources=ResourceSettings(threads=threads))
    return allocate(config, host_offers(config, {}))


def measure_limit(model: str, workers: int, threads: ThreadsMode, seconds: float) -> Measured:
    """``workers`` :mod:`bench.training.solo` processes side by side, all measuring the same
    ``seconds`` once every one is warm: their examples/sec together."""
    settings = settings_for(model)
    allocation = solo_allocation(workers, threads)
    results: dict[str, tuple[int, float]] = {}
    warm: set[str] = set()
    lock = threading.Lock()

    def collector(name: str) -> Callable[[str], None]:
        def on_line(line: str) -> None:
            words = line.split()
            with lock:
                if words[:1] == ["warm"]:
                    warm.add(name)
                elif words[:1] == ["result"] and len(words) == 3:
                    results[name] = (int(words[1]), float(words[2]))
        return on_line

    argv = [sys.executable, "-m", "bench.training.solo", "--seconds", f"{seconds:g}", *settings.to_argv()]
    tag = uuid.uuid4().hex
    children: list[Child] = []
    try:
        for i in range(workers):
            share = allocation.shares[f"worker{i}"]
            children.append(Child(f"solo{i}", argv, environment(tag, share.env()),
                                  on_line=collector(f"solo{i}")))
        _wait(lambda: len(warm) == workers, START_TIMEOUT, children)
        for child in children:
            assert child.proc.stdin is not None
            child.proc.stdin.write(b"go\n")
            child.proc.stdin.flush()
        deadline = time.monotonic() + seconds + 60
        while len(results) < workers:
            if time.monotonic() > deadline:
                raise MeasureError("solo processes did not report")
            time.sleep(0.05)
    finally:
        for child in children:
            child.kill()
        kill_tagged(tag)
    total = sum(n * settings.batch_size / s for n, s in results.values())
    return Measured(total, max(s for _, s in results.values()))
