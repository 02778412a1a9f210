"""Warm start (TensorFlow imported once) against cold start, side by side in one run, on this machine:
1 ps + 2 workers (``--workers N``: N), mlp on digits, the controller's own session (the one
every front end uses: ``tui.core.session.Session``, commands from ``tui.core.commands``).

Per repetition and side (warm: the default; cold: ``--cold``), one fresh session:

1. first start: ``StartRun`` until every worker has stepped;
2. resident memory of the task processes then (RSS and PSS; warm: the pool too);
3. one failed worker (SIGKILL) restarted by the restart policy (on-failure, backoff 0):
   from the kill until its next step;
4. a ps failure (SIGKILL): from the kill until every worker steps again after the
   whole-cluster restart;
5. ``R`` after a toggle (sync <-> async), as the app sends it (``Relaunch``): from the
   command until every worker of the new run has stepped;
6. the first start as a user has it: from running ``tfdist-tui HOSTS.yaml --json`` (a new
   process) until every worker has stepped. The controller's own start (its imports, the
   config, the leftover sweep) is part of it, and the warm pool imports meanwhile;
7. the same in the app, the README's command: ``tfdist-tui HOSTS.yaml`` in a terminal
   (:mod:`bench.controller.app_start`). The app's core, and with it the warm pool, starts before
   Textual loads; the app sends the start command once it is up.

Then one seeded run per side (1 ps + 1 worker, sync) for the loss curve: every logged
(step, loss) pair, warm against cold. Sides alternate within a repetition; medians with
min-max; ratios are warm / cold (first start) per repetition.

    python -m bench.training.warm [--reps 3] [--workers 2] [--steps-seeded 200] [--no-write]

Writes its section of BENCHMARKS.md (:data:`TITLE`) unless ``--no-write``.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import os
import signal
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import psutil
import yaml

from bench.controller.app_start import app_start
from bench.harness.processes import stacks_of
from bench.harness.report import (
    Figure,
    Stamp,
    Target,
    load_average,
    ratios,
    table,
    target_lines,
    write_section,
)
from bench.harness.stats import alternating, spread
from trainer import protocol
from trainer.settings import Mode
from tui.config.load import load_config
from tui.core.commands import Relaunch, StartRun
from tui.core.events import ControllerEvent, RunFinished, RunStarted, TaskStateChanged, TrainerEvent
from tui.core.options import RunOptions
from tui.core.session import Session
from tui.core.task_state import TaskState

#: At its default size, on 2 cores.
RUN_TIME = "about 3 min"

COMMAND = "python -m bench.training.warm"
TITLE = "8. Warm start"
#: Warm / cold for a first start, and for a restart or relaunch.
FIRST_START_TARGET = Target("<=", 0.7)
RESTART_TARGET = Target("<=", 0.3)
REPO = Path(__file__).resolve().parents[2]
OUTPUT = REPO / "BENCHMARKS.md"
#: How long one phase may take before the benchmark gives up on it.
PHASE_TIMEOUT = 240.0
#: How long the controller may take to stop its tasks and exit after SIGTERM.
EXIT_TIMEOUT = 60.0
SIDES = ("warm", "cold")


class _Steps:
    """Step events of the session, awaited by predicate (no polling)."""

    def __init__(self, limit: float = PHASE_TIMEOUT) -> None:
        self.limit = limit  # how long one phase may take
        self.events: list[tuple[float, str, protocol.Step]] = []
        self.run_id = ""
        #: When each task was last launched: a step counts for a phase only after it.
        self.launched: dict[str, float] = {}
        #: Each task's last state (and why), and how the last run ended: what a phase that
        #: ran out of time says it saw (a slow restart reads differently from a failed one).
        self.states: dict[str, str] = {}
        self.ended = ""
        self._changed = asyncio.Event()

    def __call__(self, event: ControllerEvent) -> None:
        if isinstance(event, RunStarted):
            self.run_id, self.ended = event.run_id, ""
        if isinstance(event, TaskStateChanged):
            self.states[event.task] = event.new.value + (f" ({event.reason})" if event.reason else "")
            if event.new is TaskState.STARTING:
                self.launched[event.task] = time.time()
        if isinstance(event, RunFinished):
            self.ended = f"{event.summary.outcome.value}: {event.summary.reason}"
            self._changed.set()
        if isinstance(event, TrainerEvent) and isinstance(event.event, protocol.Step):
            self.events.append((time.time(), event.task, event.event))
            self._changed.set()

    async def until(self, done: Callable[[], bool], timeout: float | None = None) -> float:
        """Wait until ``done()``; the wall time then. RuntimeError, with what the run's tasks
        were doing, when ``timeout`` (default: :attr:`limit`) passes first."""
        timeout = self.limit if timeout is None else timeout
        deadline = time.monotonic() + timeout
        while not done():
            if self.ended:  # no step will come: say so now, not at the phase's limit
                raise RuntimeError(f"the run ended ({self.ended}) before the phase did: {self._tasks()}")
            self._changed.clear()
            try:
                await asyncio.wait_for(self._changed.wait(), max(0.1, deadline - time.monotonic()))
            except asyncio.TimeoutError:
                if time.monotonic() < deadline:
                    continue
                raise RuntimeError(f"the phase did not end within {timeout:g} s: {self._tasks()}") from None
        return time.time()

    def _tasks(self) -> str:
        return "; ".join(f"{task} {state}" for task, state in sorted(self.states.items()))

    def stepped_since(self, t: float, tasks: Sequence[str]) -> bool:
        """Every one of ``tasks`` was launched after ``t`` and has stepped since: a step the
        old process logged while it was being stopped does not count."""
        started = {task: self.launched.get(task, 0.0) for task in tasks}
        if any(when < t for when in started.values()):
            return False
        seen = {task for when, task, _ in self.events if task in started and when >= started[task]}
        return set(tasks) <= seen


@dataclass
class Sample:
    """One repetition of one side, in seconds (memory in MiB)."""

    first_start: float = float("nan")
    worker_restart: float = float("nan")
    ps_restart: float = float("nan")
    relaunch: float = float("nan")
    command_start: float = float("nan")
    app_start: float = float("nan")
    rss_mib: float = float("nan")
    pss_mib: float = float("nan")
    warm_tasks: int = 0


@dataclass
class Results:
    samples: dict[str, list[Sample]] = field(default_factory=lambda: {s: [] for s in SIDES})
    losses: dict[str, list[tuple[int, float]]] = field(default_factory=dict)
    workers: int = 2


def _hosts(folder: Path, workers: int, steps: int, mode: str, seed: int = 0) -> Path:
    path = folder / f"hosts-{workers}-{mode}.yaml"
    path.write_text(yaml.safe_dump({
        "cluster": {"ps": ["localhost:auto"], "worker": ["localhost:auto"] * workers},
        "training": {"model": "mlp", "dataset": "digits", "steps": steps, "mode": mode,
                     "log_every": 5, "seed": seed},
        "restart": {"policy": "on-failure", "max_restarts": 5, "backoff": 0},
    }, sort_keys=False))
    return path


def _memory(session: Session) -> tuple[float, float, int]:
    """(RSS, PSS) in MiB of every task process (and warm pools), and how many tasks were warm."""
    pids = [t.pid for t in session.supervisor.tasks() if t.pid]
    parents = {}
    for pid in pids:
        try:
            parents[pid] = psutil.Process(pid).ppid()
        except psutil.Error:
            continue
    pools = set(parents.values()) - {os.getpid()}  # a warm task's parent is its pool
    forked = sum(1 for parent in parents.values() if parent != os.getpid())
    rss = pss = 0.0
    for pid in [*pids, *pools]:
        try:
            info = psutil.Process(pid).memory_full_info()
        except psutil.Error:
            continue
        rss += info.rss / 2**20
        pss += info.pss / 2**20
    return rss, pss, forked


def _kill(session: Session, name: str) -> None:
    pid = next(t.pid for t in session.supervisor.tasks() if t.name == name)
    assert pid is not None, f"{name} has no pid"
    os.kill(pid, signal.SIGKILL)


async def _one_side(side: str, folder: Path, n_workers: int = 2, limit: float = PHASE_TIMEOUT) -> Sample:
    config = load_config(_hosts(folder, n_workers, 10_000_000, "async"))
    session = Session.from_options(RunOptions(config=config, runs_root=folder / "runs", cold=side == "cold"))
    steps = _Steps(limit)
    session.supervisor.subscribe(steps)
    workers = [f"worker{i}" for i in range(n_workers)]
    sample = Sample()
    try:
        t0 = time.time()
        await session.execute(StartRun())
        sample.first_start = await steps.until(lambda: steps.stepped_since(t0, workers)) - t0
        sample.rss_mib, sample.pss_mib, sample.warm_tasks = _memory(session)

        t1 = time.time()
        _kill(session, workers[-1])  # worker1 of the default two: not the chief
        sample.worker_restart = await steps.until(lambda: steps.stepped_since(t1, workers[-1:])) - t1

        t2 = time.time()
        _kill(session, "ps0")
        sample.ps_restart = await steps.until(lambda: steps.stepped_since(t2, workers)) - t2

        settings = session.supervisor.settings
        toggled = dataclasses.replace(settings, mode=Mode.SYNC if settings.mode is Mode.ASYNC else Mode.ASYNC)
        old_run = steps.run_id
        t3 = time.time()
        await session.execute(Relaunch(toggled))
        sample.relaunch = await steps.until(
            lambda: steps.run_id != old_run and steps.stepped_since(t3, workers)) - t3
    finally:
        await session.close()
    return sample


async def _command_start(side: str, folder: Path, n_workers: int = 2, limit: float = PHASE_TIMEOUT) -> float:
    """Seconds from running the controller's command until every worker stepped (item 6)."""
    hosts = _hosts(folder, n_workers, 10_000_000, "async")
    argv = [sys.executable, "-m", "tui", str(hosts), "--json", "--run-dir", str(folder / "runs"),
            *(["--cold"] if side == "cold" else [])]
    # This checkout's controller, not the one an editable install points at: the command runs
    # in the run's folder, where ``-m tui`` would otherwise find whichever tree was installed.
    path = [str(REPO), *filter(None, [os.environ.get("PYTHONPATH")])]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(path)}
    t0 = time.time()
    controller = await asyncio.create_subprocess_exec(
        *argv, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL, cwd=folder, env=env)
    assert controller.stdout is not None
    waiting = {f"worker{i}" for i in range(n_workers)}
    try:
        async with asyncio.timeout(limit):
            while waiting:
                line = await controller.stdout.readline()
                if not line:
                    raise RuntimeError(f"the controller ended before {sorted(waiting)} stepped")
                record = json.loads(line)
                if record.get("type") == "trainer_event" and record["event"].get("event") == "step":
                    waiting.discard(record["task"])
        return time.time() - t0
    finally:
        controller.send_signal(signal.SIGTERM)  # stops its tasks and pool, then exits
        try:
            await asyncio.wait_for(controller.communicate(), EXIT_TIMEOUT)
        except asyncio.TimeoutError:
            stacks = await stacks_of(controller.pid)
            controller.kill()
            await controller.wait()
            raise RuntimeError(f"the controller did not exit within {EXIT_TIMEOUT:g} s of SIGTERM{stacks}") \
                from None


async def _losses(side: str, folder: Path, steps_seeded: int,
                  limit: float = PHASE_TIMEOUT) -> list[tuple[int, float]]:
    config = load_config(_hosts(folder, 1, steps_seeded, "sync", seed=11))
    session = Session.from_options(RunOptions(config=config, runs_root=folder / "runs", cold=side == "cold"))
    steps = _Steps()
    session.supervisor.subscribe(steps)
    try:
        await session.execute(StartRun())
        await asyncio.wait_for(session.supervisor.wait(), limit)
    finally:
        await session.close()
    return [(e.global_step, e.loss) for _, _, e in steps.events if e.loss is not None]


async def measure(reps: int, steps_seeded: int, workers: int = 2,
                  phase_limit: float = PHASE_TIMEOUT) -> Results:
    """Every figure, both sides, ``reps`` times (sides alternating, cold first on odd reps).
    ``phase_limit``: seconds one phase may take before the benchmark gives up on it."""
    results = Results(workers=workers)
    with tempfile.TemporaryDirectory(prefix="bench-warm-") as tmp:
        folder = Path(tmp)
        for rep, side in alternating(reps, SIDES):
            sample = await _one_side(side, folder, workers, phase_limit)
            sample.command_start = await _command_start(side, folder, workers, phase_limit)
            sample.app_start = await app_start(
                _hosts(folder, workers, 10_000_000, "async"), folder / f"app-{side}-{rep}",
                workers, cold=side == "cold", repo=REPO, timeout=phase_limit)
            results.samples[side].append(sample)
        for side in SIDES:
            results.losses[side] = await _losses(side, folder, steps_seeded, phase_limit)
    return results


def report(results: Results) -> str:
    """The BENCHMARKS.md section."""
    warm, cold = results.samples["warm"], results.samples["cold"]

    def pair(name: str) -> tuple[list[float], list[float]]:
        return [getattr(s, name) for s in warm], [getattr(s, name) for s in cold]

    rows = []
    figures = []
    for label, name, target in (
            ("first start, every worker stepping", "first_start", FIRST_START_TARGET),
            ("first start from the command (`tfdist-tui HOSTS.yaml --json`)", "command_start",
             FIRST_START_TARGET),
            ("first start in the app, from the command (`tfdist-tui HOSTS.yaml` in a terminal)",
             "app_start", FIRST_START_TARGET),
            ("R after a toggle → every worker stepping (ratio: warm R / cold first start)",
             "relaunch", RESTART_TARGET),
            ("failed worker restarted → its next step", "worker_restart", RESTART_TARGET),
            ("ps failure → whole cluster stepping again", "ps_restart", RESTART_TARGET)):
        w, c = pair(name)
        base = [s.first_start for s in cold] if name == "relaunch" else c
        of_cold = ratios(zip(w, base, strict=True))
        rows.append([label, spread(w), spread(c), spread(of_cold, 2, ""), str(target)])
        figures.append(Figure(f"warm / cold, {label}", of_cold, target=target))
    w_rss, c_rss = pair("rss_mib")
    w_pss, c_pss = pair("pss_mib")
    for label, (w, c) in (("RSS of the task processes (warm: + pool), MiB", (w_rss, c_rss)),
                          ("PSS of the same, MiB", (w_pss, c_pss))):
        rows.append([label, spread(w, 0, ""), spread(c, 0, ""), spread(ratios(zip(w, c, strict=True)), 2, ""),
                     "report"])
    curve_w, curve_c = results.losses.get("warm", []), results.losses.get("cold", [])
    same = curve_w == curve_c and bool(curve_w)
    common = dict(curve_c)
    diff = max((abs(loss - common[s]) for s, loss in curve_w if s in common), default=float("nan"))
    warm_tasks = sorted({s.warm_tasks for s in warm})
    return "\n".join([
        table(["measure", "warm", "cold", "warm / cold", "target"], rows),
        "",
        *target_lines(figures),
        f"Warm-started tasks per warm first start: {warm_tasks} of {results.workers + 1}. "
        f"Repetitions: {len(warm)}.",
        f"Seeded loss curve (1 ps + 1 worker, sync, seed 11): {len(curve_w)} logged losses warm, "
        f"{len(curve_c)} cold; {'identical' if same else f'largest difference {diff:.3g}'}.",
    ])


INTRO = (
    "Warm (the default: tasks forked from a pool per host that imported TensorFlow once, "
    "`python -m trainer.warm`) against cold (`--cold`: every task imports TensorFlow itself), "
    "1 ps + 2 workers (`--workers N`: N), mlp on digits, async, through the controller's session "
    "as every front end drives it (`R` is the `Relaunch` command the app sends after its confirmation). "
    "Seconds from the action (the start command, the SIGKILL of a task, the relaunch "
    "command) until the workers named stepped again; a relaunch toggles sync/async and is "
    "compared with the cold *first start*, as the issue asks. Memory: the task processes "
    "once every worker steps (warm: plus the pool); PSS divides pages shared copy-on-write "
    "between the processes that share them. Median (min–max) over the repetitions; ratios "
    "within a repetition.")


def section(text: str, conditions: str, stamp: Stamp) -> str:
    """The BENCHMARKS.md section around :func:`report`'s table."""
    return (f"## {TITLE}\n\n{stamp.line()}\n\nOn its own: `{COMMAND}` (not part of `python -m bench`)."
            f"\n\n{INTRO}\n\n{conditions}\n\n{text}\n")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog=COMMAND, description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--steps-seeded", type=int, default=200)
    parser.add_argument("--workers", type=int, default=2,
                        help="workers beside the one ps (a first start imports once per task cold)")
    parser.add_argument("--output", type=Path, default=OUTPUT, help="the report to update")
    parser.add_argument("--no-write", action="store_true", help="print only")
    args = parser.parse_args(argv)
    started, load_before = time.time(), load_average()
    text = report(asyncio.run(measure(args.reps, args.steps_seeded, args.workers)))
    conditions = (f"This run: 1 ps + {args.workers} workers, {args.reps} repetitions, "
                  f"{(time.time() - started) / 60:.1f} minutes, "
                  f"{os.cpu_count()} cores; 1-minute load average {load_before} at its start and "
                  f"{load_average()} at its end (the machine is shared).")
    stamp = Stamp.now(f"1-minute load average {load_before} at the start, {load_average()} at the end")
    markdown = section(text, conditions, stamp)
    print(markdown)
    if not args.no_write:
        write_section(args.output, TITLE, markdown)
    return 0


if __name__ == "__main__":
    sys.exit(main())
