"""Launching one training run of a 1 ps + N worker cluster on loopback, one of four ways
("sides"), and collecting what the benchmarks read from it into a
:class:`bench.training.run_records.RunRecord`: each worker's ``step`` events, each process's exit,
and for a controller its CPU time and the events it handled.

- ``bare``: the very ``python -m trainer`` tasks the controller would start (argv and
  environment from :func:`tui.plan.tasks.plan_run`, without ``--hold``), all at once, each in its
  own session as the controller's local launcher does, stdin a pipe held open, stdout read
  here line by line. The floor: nothing supervises them.
- ``headless``: the real CLI, ``python -m tui HOSTS.yaml --no-ui``, in its own session.
- ``app``: the Textual app, headless under Textual's test driver (:mod:`bench.training.app_driver`).
- ``seed``: the seed-style program (:mod:`bench.training.seed_style`), stopped by the benchmark once
  it has trained long enough (its ps never exits by itself). A bare run can be stopped the
  same way (:class:`Budget`), which is how a campaign calibrates its runs' length.

Every process gets :data:`bench.harness.processes.TAG_ENV` in its environment (a controller's
tasks inherit it), and whatever carries the tag is killed when the run ends, also on error or Ctrl-C.
"""


from __future__ import annotations

import json
import signal
import sys
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil
import yaml

from bench.harness import window as windows
from bench.harness.processes import Child, environment, kill_tagged, wait
from bench.training.run_records import RunConfig, RunRecord, Side, TaskRecord
from trainer import protocol
from tui.config.load import load_config
from tui.launch.local.ports import reserve_free_ports
from tui.plan.tasks import plan_run

#: How often the controller's CPU time is sampled.
CPU_SAMPLE_SECONDS = 0.1
#: After SIGTERM, how long a controller gets to stop its tasks before SIGKILL.
CONTROLLER_GRACE = 10.0
#: Start-up events whose times a run keeps.
MILESTONES = (protocol.Loaded, protocol.Ready, protocol.Initialized)



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
    """How long a run may take, and (bare and seed runs) how long it trains once warm."""

    timeout: float = 300.0
    #: Stop the run once its window (:mod:`bench.harness.window`) has lasted this long. None: a
    #: bare run ends by itself at its step target; a seed run, which has no natural end,
    #: is stopped when every worker has taken its first step.
    stop_after: float | None = None


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


def _trained_for(record: RunRecord, seconds: float) -> bool:
    """The run's window has lasted ``seconds`` (every configured worker warm)."""
    return len(record.workers) >= record.config.workers and \
        windows.reached([task.steps for task in record.workers], seconds)


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
            children.append(Child(plan.name, plan.argv, environment(tag, dict(plan.env)),
                                  on_line=_step_collector(record, plan.name)))
        stop_after = budget.stop_after

        def over() -> bool:
            return all(c.exited.is_set() for c in children) or \
                (stop_after is not None and _trained_for(record, stop_after))

        if not wait(over, budget.timeout):
            record.failure = f"not finished after {budget.timeout:g} s"
        stopped = not all(c.exited.is_set() for c in children)
    finally:
        for child in children:
            child.kill()
        _finish_tasks(record, children)
    codes = {c.name: c.proc.returncode for c in children}
    if not record.failure and not stopped and any(codes.values()):
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
        if budget.stop_after is None:
            return all(t.steps for t in record.workers) and len(record.workers) == config.workers
        return _trained_for(record, budget.stop_after)

    try:
        record.launched_at = time.time()
        for job, index in roles:
            argv = [sys.executable, "-m", "bench.training.seed_style", *common, f"--job_name={job}",
                    f"--task_index={index}"]
            children.append(Child(f"{job}{index}", argv, environment(tag, {"PYTHONUNBUFFERED": "1"}),
                                  on_line=_step_collector(record, f"{job}{index}")))
        if not wait(trained_enough, budget.timeout):
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
        argv = [sys.executable, "-m", "bench.training.app_driver", str(hosts), "--run-dir", str(runs)]
    samples = record.cpu_samples
    with open(directory / "controller.out", "wb") as output:
        record.launched_at = time.time()
        child = Child("controller", argv, environment(tag), output=output)
        sampler = threading.Thread(target=_sample_cpu, args=(child, samples), daemon=True)
        sampler.start()
        try:
            if not wait(child.exited.is_set, budget.timeout):
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
