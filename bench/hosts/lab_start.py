"""First start over several real hosts, warm against cold: a lab of network-namespace hosts
(:mod:`tests.support.netlab`, each with its own address and sshd), 2 ps and the rest workers,
every task on port 2222 of its own host, the built-in trainer over SSH; ``tfdist-tui
hosts.yaml --json`` (warm, the default) and with ``--cold``, alternating, same lab.

Measured per run, from launch: the run's start (``run_started``: every host checked), every
task up (the supervisor's "all N tasks up" notice) and every worker's first step.

    python -m bench.hosts.lab_start [--hosts 4] [--reps 2] [--steps 400]

Needs root, iproute2 and openssh-server (as the lab does). Prints its table only.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import yaml

from bench.harness.report import run_footer, table
from bench.harness.stats import alternating, spread
from tests.support.netlab import NetLab, missing_requirements

#: At its default size, on 2 cores.
RUN_TIME = "about 5 min"

REPO = Path(__file__).resolve().parents[2]
COMMAND = "python -m bench.hosts.lab_start"
PORT = 2222


@dataclass(frozen=True)
class Start:
    """One run's first start: seconds from launch to ``run_started``, to every task up and to
    every worker's first step (None where not seen)."""

    kind: str
    checked: float | None
    up: float | None
    every_worker: float | None


def hosts_file(lab: NetLab, folder: Path, steps: int) -> Path:
    names = list(lab.hosts)
    document = {
        "hosts": {name: lab.yaml_entry(name, workdir=folder / "work" / name) for name in names},
        "cluster": {"ps": [f"{n}:{PORT}" for n in names[:2]], "worker": [f"{n}:{PORT}" for n in names[2:]]},
        "training": {"model": "mlp", "dataset": "digits", "steps": steps, "log_every": 10},
        "run_dir": str(folder / "runs"),
    }
    path = folder / "hosts.yaml"
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    return path


def run_once(hosts: Path, cold: bool, workers: int) -> Start:
    launched = time.time()
    argv = [sys.executable, "-m", "tui", str(hosts), "--json", *(["--cold"] if cold else [])]
    result = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=600, check=False)
    kind = "cold" if cold else "warm"
    if result.returncode != 0:
        raise SystemExit(f"{kind} run failed ({result.returncode}): {result.stderr[-2000:]}")
    first: dict[str, float] = {}
    checked: float | None = None
    up: float | None = None
    for line in result.stdout.splitlines():
        record = json.loads(line)
        if record.get("type") == "run_started":
            checked = record["t"] - launched
        elif record.get("type") == "notice" and " tasks up in " in record.get("text", ""):
            up = record["t"] - launched
        event = record.get("event")
        if record.get("type") == "trainer_event" and isinstance(event, dict) and event.get("event") == "step":
            first.setdefault(record["task"], event["t"])
    every = max(first.values()) - launched if len(first) == workers else None
    return Start(kind, checked, up, every)


def figure(values: Sequence[float | None]) -> str:
    """The median (min–max) of the repetitions that produced a time."""
    return spread(values, missing="-")


def report(starts: Sequence[Start], hosts: int) -> str:
    lines = [f"First start over {hosts} lab hosts (2 ps, {hosts - 2} workers, each on port {PORT} of its "
             "own host); median (min–max)", ""]
    rows = []
    for kind in ("warm", "cold"):
        mine = [s for s in starts if s.kind == kind]
        rows.append([kind, figure([s.checked for s in mine]), figure([s.up for s in mine]),
                     figure([s.every_worker for s in mine])])
    lines.append(table(["start", "hosts checked (run_started)", "every task up", "every worker stepping"],
                       rows))
    warm = [s.up for s in starts if s.kind == "warm" and s.up]
    cold = [s.up for s in starts if s.kind == "cold" and s.up]
    if warm and cold:
        ratio = statistics.median(warm) / statistics.median(cold)
        lines += ["", f"warm / cold, every task up: {ratio:.2f}"]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog=COMMAND, description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--hosts", type=int, default=4, help="lab hosts (2 ps, the rest workers)")
    parser.add_argument("--reps", type=int, default=2)
    parser.add_argument("--steps", type=int, default=400)
    args = parser.parse_args(argv)
    if args.hosts < 3:
        parser.error("--hosts must be at least 3")
    why = missing_requirements()
    if why:
        print(f"{COMMAND}: {why}", file=sys.stderr)
        return 2
    started, load = time.time(), os.getloadavg()[0]
    starts: list[Start] = []
    with tempfile.TemporaryDirectory(prefix="lab-start-") as temp, NetLab(args.hosts, Path(temp)) as lab:
        hosts = hosts_file(lab, Path(temp), args.steps)
        for _, cold in alternating(args.reps, (False, True)):
            starts.append(run_once(hosts, cold, args.hosts - 2))
            print(f"{starts[-1]}", file=sys.stderr, flush=True)
    print(report(starts, args.hosts))
    print()
    print(run_footer(args.reps, started, load))
    return 0


if __name__ == "__main__":
    sys.exit(main())
