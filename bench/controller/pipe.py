"""The log pipe: how fast a task can print through the controller, and whether its pipe slows training.

Each worker of a ``program:`` cluster (``shim: false``, one ps that exits at once) prints
``--lines`` lines of 100 bytes as fast as Python's ``print`` goes (``bench/controller/pipe_task.py``)
and times itself. The same program writing the same bytes into a file, with no controller,
is the baseline (``cat`` of the same bytes into a file, in the same benchmark run). Figures:
lines/s per task and in all, their ratio to the baseline (1.0: the controller never slows a
task), and the controller's CPU over the flood (seconds of CPU per second, and per 100,000
lines). Both front ends: ``--no-ui`` as a separate process (its output to a file), and the
Textual app in-process (Textual's headless driver), for 1 and for 8 flooding tasks.

    python -m bench.controller.pipe [--lines 200000] [--tasks 1,8] [--front-ends --no-ui,app]
                                    [--repo CHECKOUT]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import psutil

#: At its default size, on 2 cores.
RUN_TIME = "about 4 min"

TASK = Path(__file__).with_name("pipe_task.py")
REPO = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class PipeResult:
    front_end: str
    tasks: int
    lines: int            # per task
    task_rate: float      # lines/s, median over the tasks
    total_rate: float     # lines/s, all tasks together
    baseline_rate: float  # lines/s of one task into a file
    cpu_seconds: float    # the controller's CPU over the flood
    wall_seconds: float
    missing: int          # lines not in the run directory
    longest_block: float  # seconds: the longest any task took for BLOCK lines
    baseline_block: float  # the same, into a file

    def row(self) -> str:
        per_second = self.cpu_seconds / max(self.wall_seconds, 1e-9)
        per_lines = self.cpu_seconds / max(self.lines * self.tasks, 1) * 100_000
        return (f"| {self.front_end} | {self.tasks} | {self.lines * self.tasks:,} | {self.task_rate:,.0f} | "
                f"{self.total_rate:,.0f} | {self.task_rate / self.baseline_rate:.3f} | "
                f"{per_second:.2f} | {per_lines:.2f} | {self.longest_block * 1000:.0f} "
                f"({self.baseline_block * 1000:.0f}) | {self.missing} |")


HEADER = ("| front end | tasks | lines | lines/s per task | lines/s in all | per task / into a file | "
          "controller CPU s/s | CPU s per 100k lines | longest 10,000 lines, ms (into a file) | "
          "lines missing from the run dir |\n"
          "|---|---|---|---|---|---|---|---|---|---|")


def hosts(folder: Path, tasks: int, lines: int) -> Path:
    workers = ", ".join(["localhost:auto"] * tasks)
    path = folder / "hosts.yaml"
    path.write_text(f"program:\n  command: {sys.executable} {TASK} {{job}} {{index}} --lines {lines} "
                    f"--times {folder / 'times'}\n  shim: false\n"
                    f"cluster: {{ps: [localhost:auto], worker: [{workers}]}}\n"
                    f"run_dir: {folder / 'runs'}\n")
    return path


def baseline(folder: Path, lines: int) -> tuple[float, float]:
    """Lines/s of the task program into a file (no controller), and its longest block."""
    times = folder / "baseline"
    subprocess.run([sys.executable, str(TASK), "worker", "0", "--lines", str(lines), "--times", str(times),
                    "--to", str(folder / "baseline.out")], check=True)
    record = json.loads((times / "worker0.json").read_text())
    (folder / "baseline.out").unlink()
    return lines / record["seconds"], record["longest_block"]


def task_records(folder: Path) -> list[dict[str, float]]:
    return [json.loads(p.read_text()) for p in sorted((folder / "times").glob("worker*.json"))]


def task_rates(folder: Path) -> list[float]:
    return [record["lines"] / record["seconds"] for record in task_records(folder)]


def longest_block(folder: Path) -> float:
    return max(record["longest_block"] for record in task_records(folder))


def missing(folder: Path, tasks: int, lines: int) -> int:
    (run,) = (folder / "runs").iterdir()
    kept = 0
    for log in (run / "logs").glob("worker*.log"):
        with log.open("rb") as handle:
            kept += sum(1 for line in handle if b" out | " in line)
    return tasks * lines - kept


def flooding(folder: Path) -> bool:
    """Whether a worker's first lines reached the run directory (its log exists)."""
    return any((folder / "runs").glob("*/logs/worker*.log"))


def headless(folder: Path, tasks: int, lines: int, base: tuple[float, float],
             repo: Path = REPO) -> PipeResult:
    """The controller's CPU and wall time are counted from the first flooded line to its
    exit: its own start-up (imports, preflight) is not the pipe's cost."""
    with (folder / "controller.out").open("w") as out:
        process = psutil.Popen([sys.executable, "-m", "tui.cli", str(hosts(folder, tasks, lines)), "--no-ui"],
                               cwd=repo, stdout=out, stderr=subprocess.STDOUT)
        cpu = cpu_began = 0.0
        began: float | None = None
        while process.poll() is None:
            try:
                times = process.cpu_times()
                cpu = times.user + times.system
            except psutil.Error:
                break
            if began is None and flooding(folder):
                began, cpu_began = time.perf_counter(), cpu
            time.sleep(0.05)
        wall = time.perf_counter() - (began or time.perf_counter())
        cpu -= cpu_began
    rates = task_rates(folder)
    return PipeResult("--no-ui", tasks, lines, sorted(rates)[len(rates) // 2], sum(rates), base[0], cpu, wall,
                      missing(folder, tasks, lines), longest_block(folder), base[1])


async def app(folder: Path, tasks: int, lines: int, base: tuple[float, float]) -> PipeResult:
    from tui.app.app import TfdistApp
    from tui.config.load import load_config
    from tui.core.options import RunOptions

    config = load_config(hosts(folder, tasks, lines))
    textual_app = TfdistApp(RunOptions(config=config, runs_root=folder / "runs"))
    began: float | None = None
    cpu_began = 0.0
    async with textual_app.run_test(size=(120, 40)) as pilot:
        while textual_app.dashboard.finished is None:
            if began is None and flooding(folder):
                began, cpu_began = time.perf_counter(), time.process_time()
            await pilot.pause(0.05)
        wall = time.perf_counter() - (began or time.perf_counter())
        cpu = time.process_time() - cpu_began
        await pilot.press("q")
        while textual_app.is_running:
            await pilot.pause(0.1)
    rates = task_rates(folder)
    return PipeResult("app", tasks, lines, sorted(rates)[len(rates) // 2], sum(rates), base[0], cpu, wall,
                      missing(folder, tasks, lines), longest_block(folder), base[1])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.controller.pipe", description=__doc__)
    parser.add_argument("--lines", type=int, default=200_000, help="lines per run, split over its tasks")
    parser.add_argument("--tasks", default="1,8")
    parser.add_argument("--front-ends", default="--no-ui,app")
    parser.add_argument("--repo", type=Path, default=REPO,
                        help="the checkout whose controller --no-ui runs (another one for a before/after; "
                             "the app is always this one's)")
    args = parser.parse_args(argv)
    print(HEADER)
    for tasks in (int(n) for n in args.tasks.split(",")):
        per_task = args.lines // tasks
        for front_end in args.front_ends.split(","):
            with tempfile.TemporaryDirectory() as tmp:
                folder = Path(tmp)
                base = baseline(folder, per_task)
                if front_end == "app":
                    result = asyncio.run(app(folder, tasks, per_task, base))
                else:
                    result = headless(folder, tasks, per_task, base, args.repo.resolve())
                print(result.row(), flush=True)
    print(f"\nbaseline: the task program writing the same lines into a file, no controller; "
          f"load average {psutil.getloadavg()[0]:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
