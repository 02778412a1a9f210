"""Log flood into the Textual app: N tasks x R lines/s for D seconds.

Measures what an operator feels and what the record keeps, side by side in one run:
keypress latency (p50/p99, target p99 < 100 ms) while the flood runs versus on an idle app
(the ratio is the number to compare across machines), lines missing from the run directory
(must be 0), and the controller's RSS at the start and the end of the flood; for the app's
core on a thread and in a process of its own (the default), one after the other, optionally
with busy loops beside them (a loaded machine).

    python -m bench.controller.flood [--tasks 8] [--rate 1000] [--seconds 30]
                                     [--cores thread,process] [--busy 0]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from tempfile import TemporaryDirectory

from textual import events
from textual.widgets import TabbedContent

from bench.controller.cores import add_load_arguments, busy_loops, controller_rss_mb, core_factory
from bench.harness.stats import percentile
from tui.app.app import TfdistApp
from tui.config.load import load_config
from tui.core.commands import StartRun
from tui.core.options import RunOptions
from tui.core.supervisor.records import SupervisorOptions

#: At its default size, on 2 cores.
RUN_TIME = "about 3 min"


@dataclass(frozen=True)
class FloodResult:
    core: str
    tasks: int
    rate: float
    seconds: float
    expected_lines: int
    missing_lines: int
    idle_p50_ms: float
    idle_p99_ms: float
    flood_p50_ms: float
    flood_p99_ms: float
    presses: int
    rss_start_mb: float
    rss_end_mb: float
    #: CPU seconds the app's process used over the flood (with the thread core, the core's too).
    app_cpu_s: float

    def table(self) -> str:
        return "\n".join([
            f"| tasks x lines/s x s, core | {self.tasks} x {self.rate:g} x {self.seconds:g}, {self.core} |",
            "|---|---|",
            f"| lines missing from the run directory | {self.missing_lines} of {self.expected_lines:,} |",
            f"| keypress latency idle p50 / p99 | {self.idle_p50_ms:.1f} / {self.idle_p99_ms:.1f} ms |",
            f"| keypress latency under flood p50 / p99 | {self.flood_p50_ms:.1f} / {self.flood_p99_ms:.1f} ms"
            f" ({self.presses} presses) |",
            f"| p99 flood / idle | {self.flood_p99_ms / max(self.idle_p99_ms, 1e-3):.2f} |",
            f"| controller RSS start / end of flood | {self.rss_start_mb:.0f} / {self.rss_end_mb:.0f} MB |",
            f"| the app's process: CPU over the flood | {self.app_cpu_s:.1f} s |",
        ])


#: The longest a key press is waited for, in seconds.
PRESS_LIMIT = 5.0


def _hosts(directory: Path, tasks: int) -> Path:
    ps = max(1, tasks // 4)
    path = directory / "hosts.yaml"
    path.write_text("cluster:\n"
                    f"  ps: [{', '.join(['localhost:auto'] * ps)}]\n"
                    f"  worker: [{', '.join(['localhost:auto'] * (tasks - ps))}]\n"
                    "training: {steps: 1000}\n")
    return path


async def _press_latencies(app: TfdistApp, until: float) -> list[float]:
    """Press tab repeatedly; each latency is from the key event's arrival in the app's queue
    until the pane has changed (Pilot.press would add its own settling waits)."""
    panes = app.query_one("#panes", TabbedContent)
    latencies = []
    while time.monotonic() < until:
        before = panes.active
        start = time.perf_counter()
        app.post_message(events.Key("tab", None))
        # (A limit per press: twice a press was never answered and the benchmark hung;
        # such a press counts as the limit and shows in p99.)
        while panes.active == before and time.perf_counter() - start < PRESS_LIMIT:
            await asyncio.sleep(0.001)
        latencies.append((time.perf_counter() - start) * 1000)
        await asyncio.sleep(0.2)
    return latencies


async def measure(tasks: int, rate: float, seconds: float, core: str = "process") -> FloodResult:
    with TemporaryDirectory() as tmp:
        directory = Path(tmp)
        config = load_config(_hosts(directory, tasks))
        runs = directory / "runs"
        argv = ("-m", "bench.controller.flood_task", "--flood-rate", str(rate),
                "--flood-seconds", str(seconds))
        options = RunOptions(config=config, runs_root=runs)
        supervisor_options = SupervisorOptions(trainer_argv=argv)
        app = TfdistApp(options, autostart=False,
                        core_factory=core_factory(core, options, supervisor_options))
        async with app.run_test(size=(120, 40)) as pilot:
            idle = await _press_latencies(app, time.monotonic() + 3)
            assert app.core is not None
            app.core.send(StartRun())
            while not app.dashboard.rows or any(
                    not r.state.is_active for r in app.dashboard.rows.values()):
                await pilot.pause(0.05)
            while not all(r.state.value == "running" for r in app.dashboard.rows.values()):
                await pilot.pause(0.05)
            rss_start = controller_rss_mb(app)
            cpu_start = time.process_time()
            flood = await _press_latencies(app, time.monotonic() + seconds * 0.9)
            app_cpu = time.process_time() - cpu_start
            rss_end = controller_rss_mb(app)
            while app.dashboard.finished is None:
                await pilot.pause(0.1)
            run_dir = Path(app.dashboard.run_dir)
            await pilot.press("q")
            while app.is_running:
                await pilot.pause(0.1)
        expected = int(rate * seconds)
        missing = 0
        for log in (run_dir / "logs").glob("*.log"):
            text = log.read_text(errors="replace")
            got = text.count(" flood line ")
            missing += expected - got
        return FloodResult(core, tasks, rate, seconds, expected * tasks, missing,
                           statistics.median(idle), percentile(idle, 0.99),
                           statistics.median(flood), percentile(flood, 0.99), len(flood),
                           rss_start, rss_end, app_cpu)


def compare(results: list[FloodResult]) -> str:
    """The cores side by side: each one's key latency under the flood, and their ratio."""
    if len(results) < 2:
        return ""
    first, second = results[0], results[1]
    return "\n".join([
        f"| under the flood | {first.core} core | {second.core} core | {second.core} / {first.core} |",
        "|---|---|---|---|",
        f"| key p50 | {first.flood_p50_ms:.1f} ms | {second.flood_p50_ms:.1f} ms | "
        f"{second.flood_p50_ms / max(first.flood_p50_ms, 1e-3):.2f}x |",
        f"| key p99 | {first.flood_p99_ms:.1f} ms | {second.flood_p99_ms:.1f} ms | "
        f"{second.flood_p99_ms / max(first.flood_p99_ms, 1e-3):.2f}x |",
    ])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.controller.flood", description=__doc__)
    parser.add_argument("--tasks", type=int, default=8)
    parser.add_argument("--rate", type=float, default=1000.0)
    parser.add_argument("--seconds", type=float, default=30.0)
    add_load_arguments(parser)
    args = parser.parse_args(argv)
    results = []
    with busy_loops(args.busy):
        for core in args.cores:
            results.append(asyncio.run(measure(args.tasks, args.rate, args.seconds, core)))
    for result in results:
        print(result.table() + "\n")
    if args.busy:
        print(f"({args.busy} busy loops beside the app throughout)\n")
    print(compare(results))
    return 0 if all(r.missing_lines == 0 for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
