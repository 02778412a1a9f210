"""One training run of a 1 ps + N worker cluster on loopback, launched one of four ways
("sides"), with what the benchmarks read from it: each worker's ``step`` events, each
process's exit, and for a controller its CPU time and the events it handled.

- ``bare``: the very ``python -m trainer`` tasks the controller would start (argv and
  environment from :func:`tui.plan.plan_run`, without ``--hold``), all at once, each in its
  own session as the controller's local launcher does, stdin a pipe held open, stdout read
  here line by line. The floor: nothing supervises them.
- ``headless``: the real CLI, ``python -m tui HOSTS.yaml --no-ui``, in its own session.
- ``app``: the Textual app, headless under Textual's test driver (:mod:`bench.app_driver`).
- ``seed``: the seed-style program (:mod:`bench.seed_style`), stopped by the benchmark once
  it has trained long enough (its ps never exits by itself).

Every process gets :data:`TAG_ENV` in its environment (a controller's tasks inherit it), and
whatever carries the tag is killed when the run ends, also on error or Ctrl-C.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import IO, Any

import psutil
import yaml

from trainer import protocol
from trainer.settings import TrainingSettings
from tui.config import load_config
from tui.launch.local_ports import reserve_free_ports
from tui.plan import plan_run

REPO = Path(__file__).resolve().parents[1]
#: Marks every process a benchmark run starts, so that none can outlive the run.
TAG_ENV = "TFDIST_BENCH_TAG"
#: A worker's throughput counts from its first step event at or after this local step:
#: the first steps pay for graph optimisation and connection set-up.
WARMUP_LOCAL_STEPS = 20
#: How often the controller's CPU time is sampled.
CPU_SAMPLE_SECONDS = 0.1
#: After SIGTERM, how long a controller gets to stop its tasks before SIGKILL.
CONTROLLER_GRACE = 10.0
#: Start-up events whose times a run keeps.
MILESTONES = (protocol.Loaded, protocol.Ready, protocol.Initialized)


class Side(str, Enum):
    """How the cluster is launched (see the module docstring)."""

    BARE = "bare"
    HEADLESS = "headless"
    APP = "app"
    SEED = "seed"

    @property
    def label(self) -> str:
        """How the report names the side."""
        return {Side.BARE: "bare trainer", Side.HEADLESS: "controller --no-ui",
                Side.APP: "Textual app", Side.SEED: "seed-style"}[self]

    @property
    def is_controller(self) -> bool:
        """Our controller supervises the tasks (it has a run directory and a CPU figure)."""
        return self in (Side.HEADLESS, Side.APP)


@dataclass(frozen=True)
class RunConfig:
    """What is trained, on how many tasks, for how many global steps."""

    model: str = "mlp"
    mode: str = "async"
    steps: int = 1000
    workers: int = 2
    log_every: int = 10
    dataset: str = "digits"

    @property
    def label(self) -> str:
        """``mlp async``."""
        return f"{self.model} {self.mode}"

    def settings(self) -> TrainingSettings:
        """The trainer's settings for this run (the trainer's defaults otherwise)."""
        return TrainingSettings().replace(model=self.model, mode=self.mode, steps=self.steps,
                                          log_every=self.log_every, dataset=self.dataset)

    @property
    def examples_per_global_step(self) -> int:
        """A sync global step applies one batch from every worker; an async one, one batch."""
        batch = self.settings().batch_size
        return batch * (self.workers if self.mode == "sync" else 1)


@dataclass
class TaskRecord:
    """One process of the cluster: its step events (in order) and how it ended."""

    name: str
    steps: list[protocol.Step] = field(default_factory=list)
    exited_at: float | None = None
    exit_code: int | None = None
    #: When it emitted ``loaded``, ``ready``, ``initialized`` (its own timestamps).
    milestones: dict[str, float] = field(default_factory=dict)

    @property
    def is_worker(self) -> bool:
        """A worker task (the ps have no step events)."""
        return self.name.startswith("worker")


@dataclass
class RunRecord:
    """Everything one run left for the analyses. Times are wall-clock (``time.time()``),
    the clock the trainer's events carry."""

    side: Side
    config: RunConfig
    rep: int
    launched_at: float
    #: The :data:`TAG_ENV` value of every process of this run.
    tag: str = ""
    tasks: dict[str, TaskRecord] = field(default_factory=dict)
    #: The controller process (headless, app): when it exited and with which code.
    controller_exited_at: float | None = None
    controller_exit_code: int | None = None
    #: The controller's own CPU seconds (user + system, no children), sampled over time.
    cpu_samples: list[tuple[float, float]] = field(default_factory=list)
    #: When the controller received each trainer event (from its run directory).
    event_times: list[float] = field(default_factory=list)
    #: When the controller started its first task process.
    first_task_started_at: float | None = None
    #: Why the run failed; empty when it did what it should.
    failure: str = ""

    @property
    def ok(self) -> bool:
        """The run did what it should (its figures count)."""
        return not self.failure

    @property
    def workers(self) -> list[TaskRecord]:
        """The worker tasks, in order."""
        return [t for t in self.tasks.values() if t.is_worker]


# -- processes ------------------------------------------------------------------------------


class Child:
    """A process in its own session (its pid is its process group). Its stdout, when
    ``capture`` is set, is read line by line on a thread and handed to ``on_line`` with the
    arrival time; its exit time is recorded by another thread as it happens."""

    def __init__(self, name: str, argv: Sequence[str], env: dict[str, str], *,
                 on_line: Callable[[str], None] | None = None, output: IO[bytes] | None = None) -> None:
        self.name = name
        self.exited_at: float | None = None
        self.exited = threading.Event()
        self.stderr_tail: list[str] = []
        self.on_line = on_line
        captured = on_line is not None
        self.proc = subprocess.Popen(
            list(argv), env=env, cwd=REPO, stdin=subprocess.PIPE,
            stdout=subprocess.PIPE if captured else (output or subprocess.DEVNULL),
            stderr=subprocess.PIPE if captured else subprocess.STDOUT if output else subprocess.DEVNULL,
            # Own session and process group, as the controller's local launcher does: with
            # Linux autogroup scheduling, session membership decides CPU shares, so every
            # side must be launched alike.
            start_new_session=True)
        self._threads = [threading.Thread(target=self._watch, daemon=True)]
        if captured:
            self._threads += [threading.Thread(target=self._read, daemon=True),
                              threading.Thread(target=self._read_err, daemon=True)]
        for thread in self._threads:
            thread.start()

    @property
    def pid(self) -> int:
        """The process id, which is also its process group id."""
        return self.proc.pid

    def _read(self) -> None:
        assert self.proc.stdout is not None and self.on_line is not None
        for raw in self.proc.stdout:
            self.on_line(raw.decode("utf-8", "replace"))

    def _read_err(self) -> None:
        assert self.proc.stderr is not None
        for raw in self.proc.stderr:
            self.stderr_tail = [*self.stderr_tail[-19:], raw.decode("utf-8", "replace").rstrip()]

    def _watch(self) -> None:
        self.proc.wait()
        self.exited_at = time.time()
        self.exited.set()

    def signal_group(self, sig: signal.Signals) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, sig)

    def kill(self) -> None:
        """SIGKILL the process group (if still alive) and reap the process."""
        if self.proc.poll() is None:
            self.signal_group(signal.SIGKILL)
        self.proc.wait()
        with contextlib.suppress(OSError):
            if self.proc.stdin is not None:
                self.proc.stdin.close()


def kill_tagged(tag: str) -> list[str]:
    """SIGKILL every process carrying ``tag`` in its environment; returns what was alive."""
    found: list[psutil.Process] = []
    for process in psutil.process_iter(["status"]):
        try:
            if process.pid == os.getpid() or process.info["status"] == psutil.STATUS_ZOMBIE:
                continue
            if process.environ().get(TAG_ENV) == tag:
                found.append(process)
        except psutil.Error:
            continue  # gone meanwhile, or not ours to inspect
    described = []
    for process in found:
        with contextlib.suppress(psutil.Error):
            described.append(" ".join(process.cmdline()))
            process.kill()
    psutil.wait_procs(found, timeout=5)
    return described


def _environment(tag: str, extra: dict[str, str] | None = None) -> dict[str, str]:
    # PYTHONPATH is left alone: every process starts in REPO with ``-m``, which puts REPO on
    # its path, and a bare task's environment stays exactly what plan_run made it.
    return {**os.environ, **(extra or {}), TAG_ENV: tag}


def write_hosts(directory: Path, config: RunConfig) -> Path:
    """A hosts.yaml for ``config``: localhost tasks on auto ports, run dirs in ``directory``."""
    settings = config.settings()
    document = {
        "cluster": {"ps": ["localhost:auto"], "worker": ["localhost:auto"] * config.workers},
        "training": {"model": config.model, "dataset": settings.dataset.value, "mode": config.mode,
                     "steps": config.steps, "log_every": config.log_every},
        "run_dir": str(directory / "runs"),
    }
    path = directory / "hosts.yaml"
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    return path


# -- one run --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Budget:
    """How long a run may take, and (seed only) how long it trains once warm."""

    timeout: float = 300.0
    #: Seed runs have no natural end: stop them this long after every worker is warm
    #: (None: when every worker has taken its first step).
    seed_window: float | None = None


def run(side: Side, config: RunConfig, rep: int, directory: Path, budget: Budget) -> RunRecord:
    """Launch the cluster one way, wait for its end (or the budget), and stop whatever is
    left; a failure is recorded in the result, never raised (Ctrl-C is raised)."""
    directory.mkdir(parents=True, exist_ok=True)
    tag = uuid.uuid4().hex
    record = RunRecord(side=side, config=config, rep=rep, launched_at=0.0, tag=tag)
    try:
        if side is Side.BARE:
            _run_bare(record, directory, tag, budget)
        elif side is Side.SEED:
            _run_seed(record, directory, tag, budget)
        else:
            _run_controller(record, directory, tag, budget)
    except Exception as exc:  # one broken run must not lose the other runs' figures
        record.failure = record.failure or f"{type(exc).__name__}: {exc}"
    finally:
        leftovers = kill_tagged(tag)
    if leftovers and side is not Side.SEED and not record.failure:
        # A seed ps never exits (server.join()); any other survivor is a finding.
        record.failure = f"{len(leftovers)} process(es) still running at the end: {leftovers[0][:200]}"
    return record


def _step_collector(record: RunRecord, name: str) -> Callable[[str], None]:
    task = record.tasks.setdefault(name, TaskRecord(name))

    def on_line(line: str) -> None:
        event = protocol.parse_event(line)
        if isinstance(event, protocol.Step):
            task.steps.append(event)
        elif isinstance(event, MILESTONES):
            task.milestones.setdefault(event.KIND, event.t)

    return on_line


def _wait(until: Callable[[], bool], timeout: float) -> bool:
    """Poll ``until`` until it holds; False if the timeout came first."""
    deadline = time.monotonic() + timeout
    while not until():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def _finish_tasks(record: RunRecord, children: Sequence[Child]) -> None:
    for child in children:
        task = record.tasks.setdefault(child.name, TaskRecord(child.name))
        task.exited_at, task.exit_code = child.exited_at, child.proc.returncode


def _tail(children: Sequence[Child]) -> str:
    failed = [c for c in children if c.proc.returncode not in (0, None)] or list(children)
    lines = [line for c in failed for line in c.stderr_tail[-3:]]
    return " / ".join(lines)[-400:]


def _run_bare(record: RunRecord, directory: Path, tag: str, budget: Budget) -> None:
    cluster = load_config(write_hosts(directory, record.config))
    reservations = reserve_free_ports(len(cluster.tasks))
    ports = {task.name: r.port for task, r in zip(cluster.tasks, reservations, strict=True)}
    # run_dir: the same default checkpoint directory as the controller gives its tasks.
    plans = plan_run(cluster, cluster.training, ports, f"bench-{tag[:8]}", hold=False,
                     run_dir=directory / "run")
    for reservation in reservations:
        reservation.release()  # at the last moment, as the controller does
    children: list[Child] = []
    try:
        record.launched_at = time.time()
        for plan in plans:
            children.append(Child(plan.name, plan.argv, _environment(tag, dict(plan.env)),
                                  on_line=_step_collector(record, plan.name)))
        if not _wait(lambda: all(c.exited.is_set() for c in children), budget.timeout):
            record.failure = f"not finished after {budget.timeout:g} s"
    finally:
        for child in children:
            child.kill()
        _finish_tasks(record, children)
    codes = {c.name: c.proc.returncode for c in children}
    if not record.failure and any(codes.values()):
        record.failure = f"exit codes {codes}: {_tail(children)}"


def _run_seed(record: RunRecord, directory: Path, tag: str, budget: Budget) -> None:
    config = record.config
    reservations = reserve_free_ports(1 + config.workers)
    addresses = [f"localhost:{r.port}" for r in reservations]
    common = [f"--ps_hosts={addresses[0]}", f"--worker_hosts={','.join(addresses[1:])}",
              "--model", config.model, "--dataset", config.dataset,
              "--log_every", str(config.log_every)]
    if config.mode == "sync":
        common.append("--sync_replicas")
    roles = [("ps", 0)] + [("worker", i) for i in range(config.workers)]
    for reservation in reservations:
        reservation.release()
    children: list[Child] = []

    def trained_enough() -> bool:
        if any(c.exited.is_set() for c in children):
            return True  # a seed task never exits by itself before the huge step target
        start = warm_start(record, need_all=True)
        if budget.seed_window is None:
            return all(t.steps for t in record.workers) and len(record.workers) == config.workers
        return start is not None and time.time() - start[0] >= budget.seed_window

    try:
        record.launched_at = time.time()
        for job, index in roles:
            argv = [sys.executable, "-m", "bench.seed_style", *common, f"--job_name={job}",
                    f"--task_index={index}"]
            children.append(Child(f"{job}{index}", argv, _environment(tag, {"PYTHONUNBUFFERED": "1"}),
                                  on_line=_step_collector(record, f"{job}{index}")))
        if not _wait(trained_enough, budget.timeout):
            record.failure = f"did not train long enough within {budget.timeout:g} s"
        elif any(c.exited.is_set() for c in children):
            record.failure = f"a task exited early: {_tail(children)}"
    finally:
        for child in children:
            child.kill()
        _finish_tasks(record, children)


def _run_controller(record: RunRecord, directory: Path, tag: str, budget: Budget) -> None:
    hosts = write_hosts(directory, record.config)
    runs = directory / "runs"
    if record.side is Side.HEADLESS:
        argv = [sys.executable, "-m", "tui", str(hosts), "--no-ui", "--run-dir", str(runs)]
    else:
        argv = [sys.executable, "-m", "bench.app_driver", str(hosts), "--run-dir", str(runs)]
    samples = record.cpu_samples
    with open(directory / "controller.out", "wb") as output:
        record.launched_at = time.time()
        child = Child("controller", argv, _environment(tag), output=output)
        sampler = threading.Thread(target=_sample_cpu, args=(child, samples), daemon=True)
        sampler.start()
        try:
            if not _wait(child.exited.is_set, budget.timeout):
                record.failure = f"not finished after {budget.timeout:g} s"
                # SIGTERM: the controller stops its tasks in order; SIGKILL if it will not.
                child.signal_group(signal.SIGTERM)
                child.exited.wait(CONTROLLER_GRACE)
        finally:
            child.kill()
            sampler.join()
    record.controller_exited_at, record.controller_exit_code = child.exited_at, child.proc.returncode
    _read_run_directory(record, runs)
    if not record.failure and child.proc.returncode != 0:
        tail = (directory / "controller.out").read_text(errors="replace").strip().splitlines()[-3:]
        record.failure = f"controller exit code {child.proc.returncode}: {' / '.join(tail)[-400:]}"


def _sample_cpu(child: Child, samples: list[tuple[float, float]]) -> None:
    try:
        process = psutil.Process(child.pid)
        while not child.exited.is_set():
            times = process.cpu_times()
            samples.append((time.time(), times.user + times.system))
            child.exited.wait(CPU_SAMPLE_SECONDS)
    except psutil.Error:
        pass  # it exited between two samples


def _read_run_directory(record: RunRecord, runs: Path) -> None:
    """The controller's own record of the run: every trainer event with the time the
    controller received it, and each task's state changes."""
    journals = sorted(runs.glob("*/events.jsonl"))
    if not journals:
        record.failure = record.failure or f"no run directory under {runs}"
        return
    for text in journals[-1].read_text(errors="replace").splitlines():
        try:
            entry: dict[str, Any] = json.loads(text)
        except ValueError:
            continue  # a line cut short by a kill
        kind, task = entry.get("type"), entry.get("task")
        if kind == "trainer_event" and isinstance(task, str):
            record.event_times.append(float(entry["t"]))
            event = protocol.parse_event(json.dumps(entry["event"]))
            if isinstance(event, protocol.Step):
                record.tasks.setdefault(task, TaskRecord(task)).steps.append(event)
            elif isinstance(event, MILESTONES):
                record.tasks.setdefault(task, TaskRecord(task)).milestones.setdefault(event.KIND, event.t)
        elif kind == "task_state" and isinstance(task, str):
            state = record.tasks.setdefault(task, TaskRecord(task))
            if entry.get("new") == "starting" and record.first_task_started_at is None:
                record.first_task_started_at = float(entry["t"])
            if entry.get("new") in ("succeeded", "failed", "stopped"):
                state.exited_at, state.exit_code = float(entry["t"]), entry.get("exit_code")


# -- what a run shows -----------------------------------------------------------------------


def warm_start(record: RunRecord, need_all: bool = True) -> tuple[float, int] | None:
    """(time, global step) once every worker has passed :data:`WARMUP_LOCAL_STEPS`: the
    latest of the workers' first step events at or past it. None if some worker never got
    there."""
    points = []
    for task in record.workers:
        warm = next((s for s in task.steps if s.local_step >= WARMUP_LOCAL_STEPS), None)
        if warm is None:
            return None
        points.append(warm)
    if not points or (need_all and len(points) < record.config.workers):
        return None
    last = max(points, key=lambda s: s.t)
    return last.t, last.global_step


@dataclass(frozen=True)
class Window:
    """The stretch of a run in which every worker trains: from the moment all are warm
    until the first of them takes its last step (the target, or the benchmark's stop)."""

    start: float
    end: float
    start_step: int
    end_step: int

    @property
    def seconds(self) -> float:
        """How long the window lasted."""
        return self.end - self.start

    def examples_per_sec(self, config: RunConfig) -> float:
        """Examples trained per second, by every worker together, over the window."""
        return (self.end_step - self.start_step) * config.examples_per_global_step / self.seconds


def window(record: RunRecord) -> Window | None:
    """The run's steady-state window, or None if it has none worth measuring."""
    start = warm_start(record)
    if start is None:
        return None
    ends = [task.steps[-1] for task in record.workers]
    end = min(ends, key=lambda s: s.t)
    if end.t <= start[0] or end.global_step <= start[1]:
        return None
    return Window(start[0], end.t, start[1], end.global_step)


def first_steps(record: RunRecord) -> dict[str, float]:
    """Seconds from launch to each worker's first training step."""
    return {t.name: t.steps[0].t - record.launched_at for t in record.workers if t.steps}


def staged_handoffs(record: RunRecord) -> float | None:
    """A controller's staged start beyond the tasks' own start-up: from the moment every
    task had reported ``loaded`` (imports, data and graph done, waiting for ``go``) until
    every task reported ``ready``. None unless every task reported both."""
    tasks = list(record.tasks.values())
    if not tasks or any({"loaded", "ready"} - set(t.milestones) for t in tasks):
        return None
    return max(t.milestones["ready"] for t in tasks) - max(t.milestones["loaded"] for t in tasks)


def controller_cpu(record: RunRecord, start: float, end: float) -> float | None:
    """The controller's CPU seconds between two instants (interpolated between samples)."""
    samples = record.cpu_samples
    if len(samples) < 2 or samples[0][0] > start or samples[-1][0] < end:
        return None
    return _interpolate(samples, end) - _interpolate(samples, start)


def _interpolate(samples: list[tuple[float, float]], at: float) -> float:
    for (t0, v0), (t1, v1) in itertools.pairwise(samples):
        if t0 <= at <= t1:
            return v0 if t1 == t0 else v0 + (v1 - v0) * (at - t0) / (t1 - t0)
    return samples[-1][1]


def end_seconds(record: RunRecord) -> float | None:
    """Seconds from the last global step until every process has exited: each task for a
    bare run, the controller itself (which waits for every task) for a controller run."""
    steps = [s.t for task in record.workers for s in task.steps]
    if not steps:
        return None
    if record.side.is_controller:
        exits = [record.controller_exited_at]
    else:
        exits = [t.exited_at for t in record.tasks.values()]
    if any(e is None for e in exits):
        return None
    return max(e for e in exits if e is not None) - max(steps)
