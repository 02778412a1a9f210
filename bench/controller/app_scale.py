"""The app at scale, each figure beside its reference in the same run (ratios compare across
machines):

1. 64 lightweight tasks (:mod:`bench.controller.flood_task`, 16 ps + 48 workers): launch to every task
   running, the app versus the bare core (what ``--no-ui`` runs), and the spacing of task
   starts, from the run directory's own event times;
2. key-press latency (tab, p50/p99) with those 64 tasks running, versus the idle app;
   1 and 2 for the app's core on a thread and in a process of its own (the default);
3. the first frame with 20 past runs of a 64-task size in the runs folder (``events.jsonl``
   of about 5 MB each) versus an empty folder, and the time the Runs pane takes to list them.

    python -m bench.controller.app_scale [--tasks 64] [--past-runs 20] [--past-mb 5] [--cores thread,process]
                              [--busy N]   (N busy loops beside it all: a loaded machine)
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from tempfile import TemporaryDirectory

from textual.widgets import TabbedContent

from bench.controller.cores import CORES, add_load_arguments, busy_loops, core_factory
from bench.controller.flood import _hosts, _press_latencies
from bench.harness.stats import percentile
from tui.app.app import TfdistApp
from tui.app.runs import RunsView
from tui.config.cluster import ClusterConfig
from tui.config.load import load_config
from tui.core.commands import StartRun, StopAll
from tui.core.options import RunOptions
from tui.core.supervisor.lifecycle import Supervisor
from tui.core.supervisor.records import SupervisorOptions

#: At its default size, on 2 cores.
RUN_TIME = "about 5 min"

#: The tasks print a line a second for this long: "running" long enough to press keys.
TASK_SECONDS = 600.0
#: How long tab is pressed (one press every 0.2 s) in the idle app, then with the tasks running.
IDLE_SECONDS = 3.0
LOADED_SECONDS = 10.0


@dataclass(frozen=True)
class Launch:
    """Launch to every task running, and the mean gap between two task starts (seconds)."""

    to_running: float
    start_gap: float


def launch_times(run_dir: Path) -> Launch:
    """From the run's events.jsonl: the run's start, each task's first start, each running."""
    started: dict[str, float] = {}
    running: dict[str, float] = {}
    begin = None
    with open(run_dir / "events.jsonl", encoding="utf-8") as handle:
        for line in handle:
            if '"run_started"' in line[:32]:
                begin = json.loads(line)["t"]
            elif '"task_state"' in line[:32]:
                record = json.loads(line)
                target = started if record["new"] == "starting" else running if record["new"] == "running" \
                    else None
                if target is not None:
                    target.setdefault(record["task"], record["t"])
    assert begin is not None
    starts = sorted(started.values())
    gap = (starts[-1] - starts[0]) / max(1, len(starts) - 1)
    return Launch(max(running.values()) - begin, gap)


def _options() -> SupervisorOptions:
    argv = ("-m", "bench.controller.flood_task", "--flood-rate", "1", "--flood-seconds", str(TASK_SECONDS))
    return SupervisorOptions(trainer_argv=argv)


def _supervisor(config: ClusterConfig, runs: Path) -> Supervisor:
    return Supervisor(config, runs_root=runs, options=_options())


async def headless_launch(config: ClusterConfig, runs: Path) -> Launch:
    """The core alone (as ``--no-ui`` runs it): start, wait for every task running, stop."""
    supervisor = _supervisor(config, runs)
    up = asyncio.Event()
    states: dict[str, str] = {}

    def sink(event: object) -> None:
        task, new = getattr(event, "task", None), getattr(event, "new", None)
        if task is not None and new is not None:
            states[task] = new.value
            if len(states) == len(config.tasks) and all(s == "running" for s in states.values()):
                up.set()

    supervisor.subscribe(sink)
    await supervisor.start()
    await up.wait()
    run_dir = supervisor.run_dir
    await supervisor.stop_all()
    await supervisor.close()
    assert run_dir is not None
    return launch_times(run_dir)


async def app_launch(config: ClusterConfig, runs: Path, core: str = "process",
                     idle_seconds: float = IDLE_SECONDS,
                     loaded_seconds: float = LOADED_SECONDS) -> tuple[Launch, list[float], list[float]]:
    """The app: idle key latency, start, every task running, key latency with them, stop
    (keys pressed for ``idle_seconds``, then ``loaded_seconds``)."""
    options = RunOptions(config=config, runs_root=runs)
    app = TfdistApp(options, autostart=False, core_factory=core_factory(core, options, _options()))
    async with app.run_test(size=(120, 40)) as pilot:
        idle = await _press_latencies(app, time.monotonic() + idle_seconds)
        app.query_one(TabbedContent).active = "logs"
        assert app.core is not None
        app.core.send(StartRun())
        while len(app.dashboard.rows) < len(config.tasks) or not all(
                r.state.value == "running" for r in app.dashboard.rows.values()):
            await pilot.pause(0.02)
        loaded = await _press_latencies(app, time.monotonic() + loaded_seconds)
        run_dir = Path(app.dashboard.run_dir)
        app.core.send(StopAll())
        while app.dashboard.finished is None:  # (q would ask while tasks still show as running)
            await pilot.pause(0.05)
        await pilot.press("q")
        while app.is_running:
            await pilot.pause(0.05)
    return launch_times(run_dir), idle, loaded


def write_past_runs(runs: Path, config: ClusterConfig, count: int, megabytes: float) -> None:
    """``count`` finished runs of this config, each with an events.jsonl of ``megabytes``:
    a 64-task run's worth of output lines and step events."""
    tasks = [t.name for t in config.tasks]
    for n in range(count):
        path = runs / f"20240101-{n:06d}-past{n:02d}"
        path.mkdir(parents=True)
        (path / "config.yaml").write_text(f"# resolved from {config.path}\ntraining: {{mode: async}}\n"
                                          f"cluster: {{ps: [a], worker: [b]}}\n")
        (path / "summary.json").write_text(json.dumps({
            "run_id": path.name, "outcome": "succeeded", "started_at": 1000.0, "wall_time": 60.0,
            "global_step": 1000, "target": 1000, "final_loss": 0.5, "final_accuracy": 0.9}))
        lines = []
        size, step = 0, 0
        while size < megabytes * 2**20:
            task = tasks[step % len(tasks)]
            step += 1
            event = {"role": "worker", "index": 0, "event": "step", "t": 1000.0 + step / 100,
                     "global_step": step, "local_step": step, "loss": 1.0, "examples_per_sec": 100.0,
                     "step_time": 0.01, "target": 1000}
            for line in (json.dumps({"type": "trainer_event", "task": task, "event": event,
                                     "t": 1000.0 + step / 100}, separators=(",", ":")),
                         *(json.dumps({"type": "task_output", "task": task, "stream": "stdout",
                                       "text": f"{task} output line {step}.{k} " + "x" * 60,
                                       "t": 1000.0 + step / 100}, separators=(",", ":"))
                           for k in range(4))):
                lines.append(line)
                size += len(line) + 1
        (path / "events.jsonl").write_text("\n".join(lines) + "\n")


async def first_frame(config: ClusterConfig, runs: Path) -> tuple[float, float]:
    """Seconds to the first frame with the task table (the run not started), and from
    opening the Runs pane to its list shown."""
    options = RunOptions(config=config, runs_root=runs)
    begin = time.perf_counter()
    app = TfdistApp(options, autostart=False, core_factory=core_factory("process", options, _options()))
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        frame = time.perf_counter() - begin
        view = app.query_one(RunsView)
        listed = view.listed
        opened = time.perf_counter()
        app.query_one(TabbedContent).active = "runs"
        while view.listed == listed:
            await pilot.pause(0.01)
        listing = time.perf_counter() - opened
        await pilot.press("q")
        while app.is_running:
            await pilot.pause(0.05)
    return frame, listing


def ms(values: list[float]) -> str:
    return f"{statistics.median(values):.1f} / {percentile(values, 0.99):.1f} ms"


async def measure(tasks: int, past_runs: int, past_mb: float, cores: tuple[str, ...] = CORES,
                  idle_seconds: float = IDLE_SECONDS, loaded_seconds: float = LOADED_SECONDS) -> str:
    """The table; keys are pressed for ``idle_seconds`` in the idle app and ``loaded_seconds``
    with the tasks running (a smoke run's are short)."""
    rows = []
    with TemporaryDirectory() as tmp:
        directory = Path(tmp)
        config = load_config(_hosts(directory, tasks))
        # Alternated, the headless reference before and after, so load drifting on a shared
        # machine hits every side.
        headless = [await headless_launch(config, directory / "runs-headless")]
        apps = []
        for core in cores:
            apps.append((core, *await app_launch(config, directory / f"runs-{core}", core,
                                                 idle_seconds, loaded_seconds)))
            headless.append(await headless_launch(config, directory / "runs-headless"))
        bare = min(headless, key=lambda launch: launch.to_running)
        for core, launch, idle, loaded in apps:
            slower = launch.to_running / bare.to_running
            key_ratio = percentile(loaded, 0.99) / max(percentile(idle, 0.99), 1e-3)
            rows += [
                f"| {tasks} tasks: launch to every task running, app ({core} core) / headless | "
                f"{launch.to_running:.2f} s / {bare.to_running:.2f} s | {slower:.2f}x |",
                f"| {tasks} tasks: mean gap between task starts, app ({core} core) / headless | "
                f"{launch.start_gap * 1000:.1f} ms / {bare.start_gap * 1000:.1f} ms | |",
                f"| key-press latency p50 / p99, {tasks} tasks running / idle app ({core} core) | "
                f"{ms(loaded)} / {ms(idle)} | {key_ratio:.2f}x |",
            ]
        empty = directory / "runs-empty"
        empty.mkdir()
        full = directory / "runs-full"
        write_past_runs(full, config, past_runs, past_mb)
        await first_frame(config, empty)  # warm: the first app of a process pays for imports and CSS
        frame_empty, list_empty = await first_frame(config, empty)
        frame_full, list_full = await first_frame(config, full)
        rows += [
            f"| first frame, {past_runs} past runs of {past_mb:g} MB / empty runs folder | "
            f"{frame_full:.2f} s / {frame_empty:.2f} s | {frame_full / frame_empty:.2f}x |",
            f"| Runs pane: opened to listed, {past_runs} past runs / empty | {list_full:.2f} s / "
            f"{list_empty:.2f} s | |",
        ]
    return "\n".join(["| measure | value | ratio |", "|---|---|---|", *rows])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.controller.app_scale", description=__doc__)
    parser.add_argument("--tasks", type=int, default=64)
    parser.add_argument("--past-runs", type=int, default=20)
    parser.add_argument("--past-mb", type=float, default=5.0)
    add_load_arguments(parser)
    args = parser.parse_args(argv)
    with busy_loops(args.busy):
        print(asyncio.run(measure(args.tasks, args.past_runs, args.past_mb, args.cores)))
    if args.busy:
        print(f"\n({args.busy} busy loops beside it throughout)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
