"""Time until every one of N SSH hosts is ready and every task running, and the controller's
CPU and memory per host, on a lab of N network-namespace hosts (tests/support/netlab.py: own
address and sshd each), N = 8, 32, 64, 4 lightweight tasks per host (bench/controller/scale_task.py: a
``shim: false`` program that binds its port and prints a step line), ``--no-ui --json --cold``.

Per N and mode (idle: a line every 5 s per task; stepping: 5 lines/s per task), from the
command's start: the first ``hosts`` record (the first progress line), every host ready, the
run started (``run_started``: ports checked and reserved on every host), every task running
(the "all N tasks up" notice), and the controller's own CPU seconds until then (its process's
utime + stime: what the controller spends of the start; the rest of the wall time is the
hosts' own work, their sshd sessions, Python starts and the uploads' far side, which on the
lab share this machine's 2 cores with it, and the machine's other load). Then, after a
settling pause, the controller's own CPU over a window (``/proc/PID/stat`` utime + stime of
the controller process: the lab's sshd and tasks are other processes, so the hosts' own work
is not counted) as a share of one core, and its resident memory, each also per host. The
machine is shared: see the load average in the footer (and beside each row: the 1-minute
load when its window ended).

Then, on the largest lab, idle, ``--cut`` hosts (8; workers only) are cut off at once for
``--cut-seconds`` (20) and given back: how many the controller showed out of reach, how
long after the links came back every host was ready again, and whether the run carried on
with every task running.

    python -m bench.hosts [--hosts 8,32,64] [--modes idle,stepping] [--window 20] [--settle 5]
                          [--cut 8] [--cut-seconds 20]

Needs root, iproute2 and openssh-server (as the lab does). Prints its table only.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import yaml

from bench.controller.scale import cpu_seconds
from bench.harness.report import run_footer
from tests.support.netlab import NetLab, missing_requirements

RUN_TIME = "about 25 min"  # 8, 32 and 64 hosts, both modes, and the cut of 8 of 64 (the machine loaded)
REPO = Path(__file__).resolve().parents[2]
TASK = REPO / "bench" / "controller" / "scale_task.py"
TASKS_PER_HOST = 4
#: Seconds between a task's lines: idle and stepping (5 lines/s).
MODES = {"idle": 5.0, "stepping": 0.2}
#: How long the run may take to have every task running.
UP_LIMIT = 600.0


@dataclass
class Result:
    hosts: int
    mode: str
    first: float | None = None      # seconds to the first hosts record
    ready: float | None = None      # to every host ready
    started: float | None = None    # to run_started (ports checked and reserved)
    running: float | None = None    # to every task running
    start_cpu: float | None = None  # the controller's CPU seconds until every task runs
    cpu: float | None = None        # controller's share of one core over the window
    rss_mb: float | None = None
    load: float | None = None       # the 1-minute load average as the window ended


@dataclass
class Cut:
    hosts: int
    of: int
    seconds: float
    out_seen: int = 0                # most hosts shown out of reach (unreachable or lost) at once
    back: float | None = None        # seconds from the links' return to every host ready
    running: int = 0                 # tasks running once every host was back
    tasks: int = 0
    carried_on: bool = False         # no run_finished, the controller still running
    load: float | None = None


class Watch:
    """Reads the controller's --json lines on a thread, noting when each milestone came."""

    def __init__(self, process: subprocess.Popen[bytes], began: float) -> None:
        self.result: dict[str, float] = {}
        self.done = threading.Event()
        self.finished = False
        self.out = 0  # hosts out of reach in the latest picture
        self.all_ready = threading.Event()  # set while every host is ready
        self.states: dict[str, str] = {}  # each task's latest state
        self._process, self._began = process, began
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self._process.stdout is not None
        for raw in self._process.stdout:
            if raw.startswith(b'{"type":"task_state'):
                record = json.loads(raw)
                self.states[record["task"]] = record["new"]
                continue
            if raw.startswith(b'{"type":"task_') or raw.startswith(b'{"type":"trainer'):
                continue  # (most lines: nothing to note)
            now = time.monotonic() - self._began
            try:
                record = json.loads(raw)
            except ValueError:
                continue
            kind = record.get("type")
            if kind == "hosts":
                self.result.setdefault("first", now)
                self.out = sum(h["state"] in ("unreachable", "lost") for h in record["hosts"])
                if all(h["state"] == "ready" for h in record["hosts"]):
                    self.result.setdefault("ready", now)
                    self.all_ready.set()
                else:
                    self.all_ready.clear()
            elif kind == "run_started":
                self.result.setdefault("started", now)
            elif kind == "notice" and " tasks up in " in str(record.get("text")):
                self.result.setdefault("running", now)
                self.result.setdefault("start_cpu", cpu_seconds(self._process.pid))
                self.done.set()
            elif kind == "run_finished":
                self.finished = True
                summary = record.get("summary") or {}
                # (said on stderr: a run that ended early is a row of "not seen")
                print(f"the run ended at {now:.1f} s: {summary.get('outcome')}: "
                      f"{str(summary.get('reason'))[:300]}", file=sys.stderr, flush=True)
                self.done.set()
        self.done.set()


def hosts_file(lab: NetLab, folder: Path, every: float) -> Path:
    names = list(lab.hosts)
    entries = [f"{name}:auto" for name in names for _ in range(TASKS_PER_HOST)]
    ps = max(1, len(entries) // 16)
    (folder / "task.py").write_text(TASK.read_text())
    path = folder / "hosts.yaml"
    path.write_text(yaml.safe_dump({
        # (the hosts' folders outside the uploaded one, which must not change while it is copied)
        "hosts": {name: lab.yaml_entry(name, workdir=folder.parent / "work" / name) for name in names},
        "cluster": {"ps": entries[:ps], "worker": entries[ps:]},
        "program": {"command": f"python task.py --address={{address}} --every={every}", "shim": False,
                    "upload": ".", "metrics": [r"step (?P<step>\d+) loss (?P<loss>[0-9.]+)"]},
        "training": {"steps": 1_000_000_000},
        "run_dir": str(folder.parent / "runs"),
    }, sort_keys=False))
    return path


def measure(lab: NetLab, folder: Path, mode: str, window: float, settle: float,
            cut: Cut | None = None) -> Result:
    result = Result(len(lab.hosts), mode)
    began = time.monotonic()
    process = subprocess.Popen([sys.executable, "-m", "tui", str(hosts_file(lab, folder, MODES[mode])),
                                "--no-ui", "--json", "--cold"], cwd=REPO, stdout=subprocess.PIPE,
                               stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL, start_new_session=True)
    watch = Watch(process, began)
    try:
        watch.done.wait(UP_LIMIT)
        result.first, result.ready = watch.result.get("first"), watch.result.get("ready")
        result.running, result.started = watch.result.get("running"), watch.result.get("started")
        result.start_cpu = watch.result.get("start_cpu")
        if result.running is not None:
            time.sleep(settle)
            cpu0, t0 = cpu_seconds(process.pid), time.monotonic()
            time.sleep(window)
            result.cpu = (cpu_seconds(process.pid) - cpu0) / (time.monotonic() - t0)
            result.rss_mb = _rss_mb(process.pid)
            result.load = os.getloadavg()[0]
            if cut is not None:
                cut_hosts(lab, process, watch, cut)
    finally:
        process.send_signal(signal.SIGINT)  # the controller stops its tasks and exits
        try:
            process.wait(120)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
    return result


#: How long every host may take to be ready again once the links are back.
BACK_LIMIT = 300.0


def cut_hosts(lab: NetLab, process: subprocess.Popen[bytes], watch: Watch, cut: Cut) -> None:
    """Cut the last ``cut.hosts`` hosts of the lab (workers: the ps are on the first) for
    ``cut.seconds``, give them back and note what the controller made of it."""
    names = list(lab.hosts)[-cut.hosts:]
    for name in names:
        lab.cut(name)
    try:
        deadline = time.monotonic() + cut.seconds
        while time.monotonic() < deadline:
            cut.out_seen = max(cut.out_seen, watch.out)
            time.sleep(0.2)
    finally:
        for name in names:
            lab.restore(name)
    restored = time.monotonic()
    time.sleep(0.5)  # (a picture from before the return may still say every host is ready)
    if watch.all_ready.wait(BACK_LIMIT):
        cut.back = time.monotonic() - restored
    cut.tasks = len(watch.states)
    cut.running = sum(state == "running" for state in watch.states.values())
    cut.carried_on = process.poll() is None and not watch.finished
    cut.load = os.getloadavg()[0]


def _rss_mb(pid: int) -> float | None:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return None


def _cell(value: float | None, text: str) -> str:
    return "not seen" if value is None else text.format(value)


def table(results: list[Result]) -> str:
    rows = ["| hosts | tasks | mode | first hosts line | all hosts ready | run started | all tasks running | "
            "controller CPU-s to running | controller CPU (one core) | per host | memory | per host | load |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in results:
        rows.append(f"| {r.hosts} | {r.hosts * TASKS_PER_HOST} | {r.mode} | {_cell(r.first, '{:.2f} s')} | "
                    f"{_cell(r.ready, '{:.1f} s')} | {_cell(r.started, '{:.1f} s')} | "
                    f"{_cell(r.running, '{:.1f} s')} | {_cell(r.start_cpu, '{:.1f} s')} | "
                    f"{_cell(r.cpu, '{:.1%}')} | "
                    f"{_cell(None if r.cpu is None else r.cpu / r.hosts, '{:.2%}')} | "
                    f"{_cell(r.rss_mb, '{:.0f} MB')} | "
                    f"{_cell(None if r.rss_mb is None else r.rss_mb / r.hosts, '{:.2f} MB')} | "
                    f"{_cell(r.load, '{:.1f}')} |")
    return "\n".join(rows)


def cut_table(cut: Cut) -> str:
    rows = ["| hosts cut | of | for | shown out of reach (most at once) | every host ready again after | "
            "tasks running then | run carried on | load |", "|---|---|---|---|---|---|---|---|",
            f"| {cut.hosts} | {cut.of} | {cut.seconds:.0f} s | {cut.out_seen} | "
            f"{_cell(cut.back, '{:.1f} s')} | {cut.running}/{cut.tasks} | "
            f"{'yes' if cut.carried_on else 'no'} | {_cell(cut.load, '{:.1f}')} |"]
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.hosts", description=__doc__.splitlines()[0])
    parser.add_argument("--hosts", default="8,32,64", help="lab sizes, comma-separated")
    parser.add_argument("--modes", default="idle,stepping", help="idle, stepping")
    parser.add_argument("--window", type=float, default=20.0, help="seconds of CPU measured")
    parser.add_argument("--settle", type=float, default=5.0, help="seconds after every task runs")
    parser.add_argument("--cut", type=int, default=8, help="hosts cut at once on the largest lab, idle "
                                                           "(0: none)")
    parser.add_argument("--cut-seconds", type=float, default=20.0, help="how long they are cut off")
    args = parser.parse_args(argv)
    if why := missing_requirements():
        parser.error(f"needs a host lab: {why}")  # (exit code 2)
    started, load = time.time(), os.getloadavg()[0]
    results: list[Result] = []
    counts = [int(n) for n in args.hosts.split(",")]
    cut: Cut | None = None
    for count in counts:
        with tempfile.TemporaryDirectory(prefix="bench-hosts-") as tmp:
            (Path(tmp) / "lab").mkdir()
            with NetLab(count, Path(tmp) / "lab") as lab:
                for mode in args.modes.split(","):
                    folder = Path(tmp) / mode
                    folder.mkdir()
                    here = None
                    if args.cut and count == max(counts) and mode == "idle" and count >= 2 * args.cut:
                        here = cut = Cut(args.cut, count, args.cut_seconds)
                    results.append(measure(lab, folder, mode, args.window, args.settle, here))
                    print(table(results[-1:]).splitlines()[-1], file=sys.stderr, flush=True)
    print(table(results))
    if cut is not None and cut.load is not None:
        print()
        print(cut_table(cut))
    elif cut is not None:
        print()
        print(f"The cut of {cut.hosts} of {cut.of} hosts was not made: that run never had every task "
              "running.")
    print()
    print(run_footer(1, started, load))
    return 0
