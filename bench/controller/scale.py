"""What watching many tasks costs the controller: lightweight tasks
(:mod:`bench.controller.scale_task`: a ``program:`` that binds its port and prints ``step N loss X``,
``metrics:`` reading it, ``shim: false``), idle (a line every 5 s each) and stepping (5 lines/s
each), for 16 / 64 / 256 tasks, under the headless controller (``--no-ui``) and the app
(:mod:`bench.controller.scale_app`: its process and its core's). Once every task is running and a settling
pause has passed, the controller's own CPU time is read from ``/proc/PID/stat`` (utime + stime:
its tasks are not counted) over a window, and printed as a share of one core, per task, and
per output line (the lines the tasks' logs grew by in the window). With the app, the key-press
latency (tab, p99) is measured after the CPU window, the run still going.

    python -m bench.controller.scale [--tasks 16,64,256] [--modes idle,stepping] [--fronts headless,app]
                          [--window 30] [--settle 5] [--keys 10] [--busy N]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from enum import Enum
from pathlib import Path

from bench.controller.cores import add_load_arguments, busy_loops
from bench.harness.processes import Child, environment, kill_tagged, wait
from bench.harness.stats import percentile

#: At its default size, on 2 cores.
RUN_TIME = "about 15 min"

TASK = Path(__file__).with_name("scale_task.py")
#: How long all tasks may take to show running, seconds.
UP_LIMIT = 300.0
_TICK = os.sysconf("SC_CLK_TCK")


class Mode(Enum):
    """How often each task prints its step line (seconds between lines)."""

    IDLE = 5.0
    STEPPING = 0.2

    @property
    def label(self) -> str:
        return f"{self.name.lower()} ({1 / self.value:g} lines/s each)"


class Front(str, Enum):
    HEADLESS = "headless"
    APP = "app"


@dataclass(frozen=True)
class Case:
    tasks: int
    mode: Mode
    front: Front


@dataclass(frozen=True)
class Result:
    case: Case
    #: Seconds from the controller's start to every task running.
    up: float
    cpu: float
    #: The app's process's share of ``cpu`` (the rest is its core's); the whole with headless.
    front_cpu: float
    window: float
    lines: int
    keys: list[float]

    @property
    def share(self) -> float:
        """The controller's CPU as a share of one core, in percent."""
        return 100 * self.cpu / self.window

    def row(self, headless: Result | None) -> str:
        per_task = self.share / self.case.tasks
        stepping = self.case.mode is Mode.STEPPING and self.lines
        per_line = f"{1e6 * self.cpu / self.lines:.0f} µs" if stepping else "-"
        keys = "-"
        if self.keys:
            keys = f"{percentile(self.keys, 0.5):.0f} / {percentile(self.keys, 0.99):.0f} ms"
        ratio = f"{self.share / headless.share:.2f}x" if headless and headless.share > 0 else ""
        split = ""
        if self.case.front is Front.APP:
            split = (f" (app {100 * self.front_cpu / self.window:.1f} + core "
                     f"{100 * (self.cpu - self.front_cpu) / self.window:.1f})")
        return (f"| {self.case.tasks} | {self.case.mode.label} | {self.case.front.value} | {self.up:.1f} s | "
                f"{self.share:.1f} %{split} | {ratio} | {per_task:.3f} % | {self.lines / self.window:,.0f} | "
                f"{per_line} | {keys} |")


HEADER = ("| tasks | output | front end | all running after | controller CPU, share of one core | "
          "app / headless | per task | lines/s | CPU per line | key p50 / p99 |\n"
          "|---|---|---|---|---|---|---|---|---|---|")


def hosts(folder: Path, tasks: int, mode: Mode) -> Path:
    """hosts.yaml: ``tasks`` local tasks (a sixteenth of them ps), each running the task."""
    ps = max(1, tasks // 16)
    path = folder / "hosts.yaml"
    path.write_text(
        "program:\n"
        f"  command: python {TASK} --address={{address}} --every={mode.value}\n"
        "  shim: false\n"
        "  metrics: ['step (?P<step>\\d+) loss (?P<loss>[0-9.]+)']\n"
        "cluster:\n"
        f"  ps: [{', '.join(['localhost:auto'] * ps)}]\n"
        f"  worker: [{', '.join(['localhost:auto'] * (tasks - ps))}]\n"
        "training: {steps: 1000000000}\n")
    return path


def cpu_seconds(pid: int) -> float:
    """The process's own user + system CPU (all its threads; not its children's)."""
    with open(f"/proc/{pid}/stat", encoding="ascii") as handle:
        fields = handle.read().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / _TICK  # utime, stime: fields 14 and 15


def log_lines(runs: Path) -> int:
    """Lines in every task log of the run (one run under ``runs``)."""
    total = 0
    for log in runs.glob("*/logs/*.log"):
        with open(log, "rb") as handle:
            total += handle.read().count(b"\n")
    return total


class StateWatch:
    """Each task's latest state, from the run's events.jsonl read on from where it was left."""

    def __init__(self, runs: Path) -> None:
        self._runs = runs
        self._offset = 0
        self._partial = b""
        self.states: dict[str, str] = {}

    def running(self) -> int:
        """How many tasks are running now."""
        for events in self._runs.glob("*/events.jsonl"):
            with open(events, "rb") as handle:
                handle.seek(self._offset)
                data = self._partial + handle.read()
            self._offset += len(data) - len(self._partial)
            *lines, self._partial = data.split(b"\n")
            for line in lines:
                if b'"task_state"' in line[:40]:
                    record = json.loads(line)
                    self.states[record["task"]] = record["new"]
        return sum(state == "running" for state in self.states.values())


class Controller:
    """The controller under measure, headless or the app; :attr:`pids` are its processes."""

    def __init__(self, case: Case, folder: Path, tag: str) -> None:
        self.case = case
        self.runs = folder / "runs"
        self.lines: list[str] = []
        config = hosts(folder, case.tasks, case.mode)
        env = environment(tag)
        if case.front is Front.HEADLESS:
            argv = [sys.executable, "-m", "tui", str(config), "--no-ui", "--run-dir", str(self.runs)]
            self.output = folder / "controller.out"
            self.child = Child("controller", argv, env, output=open(self.output, "wb"))  # noqa: SIM115
        else:
            argv = [sys.executable, "-m", "bench.controller.scale_app", str(config), "--runs", str(self.runs)]
            self.child = Child("app", argv, env, on_line=lambda line: self.lines.append(line.strip()))
        self.pids = [self.child.pid]

    def wait_up(self) -> bool:
        if self.case.front is Front.HEADLESS:
            watch = StateWatch(self.runs)
            return wait(lambda: watch.running() == self.case.tasks or self.child.exited.is_set(),
                        UP_LIMIT, every=0.5) and not self.child.exited.is_set()
        if not wait(lambda: "up" in self.lines or "failed" in self.lines or self.child.exited.is_set(),
                    UP_LIMIT) or "up" not in self.lines:
            return False
        self.pids += [int(line.split()[1]) for line in self.lines if line.startswith("core ")]
        return True

    def said(self) -> str:
        """The end of what the controller printed (why it failed)."""
        if self.case.front is Front.HEADLESS:
            return self.output.read_text(errors="replace")[-3000:]
        return "\n".join([*self.lines[-20:], *self.child.stderr_tail])

    def keys(self, seconds: float) -> list[float]:
        """The app's key latencies (ms) pressing tab for ``seconds``."""
        self._send(f"keys {seconds}")
        wait(lambda: any(line.startswith("keys ") for line in self.lines), seconds + 60)
        found = [line for line in self.lines if line.startswith("keys ")]
        return json.loads(found[0][5:]) if found else []

    def cpu(self) -> tuple[float, float]:
        """CPU seconds so far: all the controller's processes, and its first (the app's)."""
        each = [cpu_seconds(pid) for pid in self.pids]
        return sum(each), each[0]

    def stop(self) -> None:
        if self.case.front is Front.HEADLESS:
            self.child.proc.send_signal(signal.SIGINT)
        else:
            self._send("stop")
        if not self.child.exited.wait(60):
            self.child.kill()
        self.child.exited.wait(10)

    def _send(self, text: str) -> None:
        assert self.child.proc.stdin is not None
        self.child.proc.stdin.write(text.encode() + b"\n")
        self.child.proc.stdin.flush()


def measure(case: Case, window: float, settle: float, keys: float) -> Result:
    """One controller on one cluster: up, settle, the CPU window, then (app) the keys."""
    tag = f"scale-{uuid.uuid4().hex[:8]}"
    with tempfile.TemporaryDirectory() as tmp:
        begin = time.monotonic()
        controller = Controller(case, Path(tmp), tag)
        try:
            if not controller.wait_up():
                raise RuntimeError(f"{case}: not every task came up: {controller.said()}")
            up = time.monotonic() - begin
            time.sleep(settle)
            lines0, cpu0, t0 = log_lines(controller.runs), controller.cpu(), time.monotonic()
            time.sleep(window)
            cpu1, t1, lines1 = controller.cpu(), time.monotonic(), log_lines(controller.runs)
            latencies = controller.keys(keys) if case.front is Front.APP and keys > 0 else []
        finally:
            controller.stop()
            kill_tagged(tag)
    return Result(case, up, cpu1[0] - cpu0[0], cpu1[1] - cpu0[1], t1 - t0, lines1 - lines0, latencies)


def run(tasks: list[int], modes: list[Mode], fronts: list[Front], window: float, settle: float,
        keys: float) -> Iterator[str]:
    """The table's rows, as each is measured."""
    for count in tasks:
        for mode in modes:
            headless: Result | None = None
            for front in fronts:
                result = measure(Case(count, mode, front), window, settle, keys)
                headless = result if front is Front.HEADLESS else headless
                yield result.row(headless if front is Front.APP else None)


def loadavg() -> str:
    with open("/proc/loadavg", encoding="ascii") as handle:
        return handle.read().strip()


@contextmanager
def _noted_load() -> Iterator[None]:
    print(f"load before: {loadavg()}", flush=True)
    yield
    print(f"load after: {loadavg()}", flush=True)


def _list(kind: type, text: str) -> list:
    return [kind(part.strip()) for part in text.split(",") if part.strip()]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.controller.scale", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tasks", default="16,64,256")
    parser.add_argument("--modes", default="idle,stepping")
    parser.add_argument("--fronts", default="headless,app")
    parser.add_argument("--window", type=float, default=30.0, help="CPU window, seconds")
    parser.add_argument("--settle", type=float, default=5.0, help="pause once all run, seconds")
    parser.add_argument("--keys", type=float, default=10.0, help="key presses with the app, seconds")
    add_load_arguments(parser, cores=False)
    args = parser.parse_args(argv)
    modes = [Mode[name.strip().upper()] for name in args.modes.split(",") if name.strip()]
    with busy_loops(args.busy), _noted_load():
        print(HEADER, flush=True)
        for row in run(_list(int, args.tasks), modes, _list(Front, args.fronts), args.window,
                       args.settle, args.keys):
            print(row, flush=True)
    if args.busy:
        print(f"({args.busy} busy loops beside it throughout)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
