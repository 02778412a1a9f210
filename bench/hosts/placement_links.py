"""Seed 000's placement experiment on real links: examples/s of each placement and
partitioning when the ps links are the bottleneck, beside what the bytes predict.

A lab of network-namespace hosts (:mod:`tests.support.netlab`): 2 ps hosts whose links are
capped with ``tc tbf`` (``--rate``), 2 worker hosts, every task on port 2222 of its own host,
the built-in trainer (mlp with a 4096-unit hidden layer on digits, async) over SSH, one
``tfdist-tui hosts.yaml --json`` run per point and repetition. Training speed is the global
step's rate between the first and the last step event times the batch size. The prediction:
a step waits for the busiest ps's link, so a point should run ``B0 / B`` times as fast as
round-robin with 1 partition, where ``B`` is the bytes on its busiest ps (from the
placement the chief reports).

    python -m bench.hosts.placement_links [--rate 100mbit] [--steps 100] [--reps 1]

Needs root, iproute2 (tc tbf) and openssh-server, as the lab does. Prints its table only.
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
from bench.harness.stats import alternating
from tests.support.netlab import NetLab, missing_requirements

#: At its default size, on 2 cores.
RUN_TIME = "about 10 min"

REPO = Path(__file__).resolve().parents[2]
COMMAND = "python -m bench.hosts.placement_links"
PORT = 2222
#: (placement, partitions), the first the baseline.
POINTS: tuple[tuple[str, int], ...] = (("round_robin", 1), ("greedy", 1), ("round_robin", 2), ("greedy", 2))
BATCH_SIZE = 64


@dataclass(frozen=True)
class Point:
    """One run: its examples/s while training, and the bytes on each ps."""

    placement: str
    partitions: int
    examples_per_sec: float
    ps_bytes: tuple[int, ...]
    #: Measured traffic per ps (bytes/s, both directions) and its max/mean, when measured.
    traffic_imbalance: float | None


def hosts_file(lab: NetLab, folder: Path, steps: int, placement: str, partitions: int) -> Path:
    names = list(lab.hosts)
    document = {
        "hosts": {name: lab.yaml_entry(name, workdir=folder / "work" / name) for name in names},
        "cluster": {"ps": [f"{n}:{PORT}" for n in names[:2]], "worker": [f"{n}:{PORT}" for n in names[2:4]]},
        "training": {"model": "mlp", "dataset": "digits", "hidden_units": 4096, "mode": "async",
                     "batch_size": BATCH_SIZE, "steps": steps, "log_every": 10,
                     "placement": placement, "partitions": partitions},
        "run_dir": str(folder / "runs"),
    }
    path = folder / f"{placement}-{partitions}.yaml"
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    return path


def run_point(hosts: Path, placement: str, partitions: int) -> Point:
    argv = [sys.executable, "-m", "tui", str(hosts), "--json"]
    result = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=900, check=False)
    if result.returncode != 0:
        raise SystemExit(f"{placement} x {partitions} failed ({result.returncode}): {result.stderr[-2000:]}")
    steps: list[tuple[float, int]] = []
    ps_bytes: tuple[int, ...] = ()
    imbalance: float | None = None
    for line in result.stdout.splitlines():
        record = json.loads(line)
        event = record.get("event")
        if record.get("type") == "trainer_event" and isinstance(event, dict):
            if event.get("event") == "step":
                steps.append((float(event["t"]), int(event["global_step"])))
            elif event.get("event") == "placement" and not ps_bytes:
                ps_bytes = tuple(int(b) for b in event["ps_bytes"])
        elif record.get("type") == "run_finished":
            summary = (record.get("traffic") or {}).get("summary")
            imbalance = summary["measured_imbalance"] if summary else None
    steps.sort()
    (t0, s0), (t1, s1) = steps[0], steps[-1]
    rate = (s1 - s0) / (t1 - t0) * BATCH_SIZE if t1 > t0 else 0.0
    return Point(placement, partitions, rate, ps_bytes, imbalance)


def report(points: Sequence[Point], rate: str) -> str:
    base = [p for p in points if (p.placement, p.partitions) == POINTS[0]]
    base_rate = statistics.median(p.examples_per_sec for p in base)
    base_busiest = max(base[0].ps_bytes)
    lines = [f"2 ps (links capped at {rate}) and 2 workers on lab hosts, mlp 4096 on digits, async; "
             "medians over repetitions", ""]
    rows = []
    for placement, partitions in POINTS:
        mine = [p for p in points if (p.placement, p.partitions) == (placement, partitions)]
        speed = statistics.median(p.examples_per_sec for p in mine)
        busiest = max(mine[0].ps_bytes)
        imbalances = [p.traffic_imbalance for p in mine if p.traffic_imbalance is not None]
        measured_imbalance = f"{statistics.median(imbalances):.2f}" if imbalances else "-"
        placed = " / ".join(f"{b / 2**20:.2f} MiB" for b in mine[0].ps_bytes)
        rows.append([f"{placement} x {partitions}", placed, f"{speed:.0f}", f"{speed / base_rate:.2f}x",
                     f"{base_busiest / busiest:.2f}x", measured_imbalance])
    lines.append(table(["placement x partitions", "bytes per ps", "examples/s", "measured vs round-robin x 1",
                        "predicted (busiest ps's bytes)", "measured traffic max/mean"], rows))
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog=COMMAND, description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rate", default="100mbit", help="each ps link's cap (tc tbf rate)")
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--reps", type=int, default=1)
    args = parser.parse_args(argv)
    why = missing_requirements()
    if why:
        print(f"{COMMAND}: {why}", file=sys.stderr)
        return 2
    started, load = time.time(), os.getloadavg()[0]
    points: list[Point] = []
    with tempfile.TemporaryDirectory(prefix="placement-links-") as temp, NetLab(4, Path(temp)) as lab:
        for name in ("h0", "h1"):
            lab.cap(name, args.rate)
        for _, (placement, partitions) in alternating(args.reps, POINTS):
            hosts = hosts_file(lab, Path(temp), args.steps, placement, partitions)
            points.append(run_point(hosts, placement, partitions))
            print(f"{points[-1]}", file=sys.stderr, flush=True)
    print(report(points, args.rate))
    print()
    print(run_footer(args.reps, started, load))
    return 0


if __name__ == "__main__":
    sys.exit(main())
