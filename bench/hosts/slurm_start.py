"""Slurm against localhost: time from ``tfdist-tui hosts.yaml --json`` to every worker
stepping, for 1 ps + 2 workers in an allocation of a real one-node test Slurm
(:mod:`tests.support.slurm`) and as plain localhost tasks, interleaved, same machine, same
run of this script; and, on Slurm, time from the last training step to the allocation's
release (its job no longer RUNNING in squeue) and to the job leaving squeue.

    python -m bench.hosts.slurm_start [--reps 3] [--steps 3000]

Needs munged, slurmctld, slurmd and Slurm's client commands (.ci/run installs them).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import yaml

from tests.support.slurm import PARTITION, SlurmCluster, missing_binaries, running_slurm

#: At its default size, on 2 cores.
RUN_TIME = "about 3 min"

REPO = Path(__file__).resolve().parents[2]
JOB_NAME = "tfdist-hpc"


@dataclass(frozen=True)
class Timing:
    """One run: seconds from launch to every worker's first step; on Slurm, from the last
    step to the job leaving RUNNING, and to its leaving squeue (None where not seen)."""

    kind: str
    every_worker: float | None
    #: Seconds from launch to the run's start (run_started: hosts prepared, ports found): on
    #: Slurm this holds the allocation, the node probe and the port search.
    prepared: float | None = None
    released: float | None = None
    gone: float | None = None


def hosts_file(folder: Path, kind: str, steps: int) -> Path:
    host = "hpc" if kind == "slurm" else "localhost"
    document: dict[str, object] = {
        "cluster": {"ps": [f"{host}:auto"], "worker": [f"{host}:auto", f"{host}:auto"]},
        "training": {"model": "mlp", "dataset": "digits", "steps": steps},
        "run_dir": str(folder / "runs"),
    }
    if kind == "slurm":
        document["hosts"] = {"hpc": {"kind": "slurm", "partition": PARTITION, "time": "10"}}
    path = folder / f"{kind}.yaml"
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    return path


class JobWatch:
    """Polls squeue (every 50 ms, in a thread) for the run's job: when it was last seen
    RUNNING, and last seen at all. squeue is the only witness of a job's state."""

    def __init__(self, slurm: SlurmCluster) -> None:
        self._slurm = slurm
        self.last_running: float | None = None
        self.last_seen: float | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, daemon=True)
        self._thread.start()

    def _poll(self) -> None:
        while not self._stop.is_set():
            states = self._slurm.run("squeue", "-h", "-n", JOB_NAME, "-o", "%T", check=False).stdout.split()
            now = time.time()
            if states:
                self.last_seen = now
            if "RUNNING" in states:
                self.last_running = now
            self._stop.wait(0.05)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()


def run_once(hosts: Path, kind: str, slurm: SlurmCluster | None) -> Timing:
    watch = JobWatch(slurm) if slurm is not None else None
    launched = time.time()
    env = {**os.environ, **(slurm.env if slurm else {})}
    result = subprocess.run([sys.executable, "-m", "tui", str(hosts), "--json"], cwd=REPO,
                            capture_output=True, text=True, env=env, timeout=600, check=False)
    if watch is not None:
        time.sleep(3.0)  # the job's completing phase (KillWait=2) is part of what is measured
        watch.stop()
    if result.returncode != 0:
        raise SystemExit(f"{kind} run failed ({result.returncode}): {result.stderr[-2000:]}")
    first: dict[str, float] = {}
    last_step = 0.0
    prepared: float | None = None
    for line in result.stdout.splitlines():
        record = json.loads(line)
        if record.get("type") == "run_started":
            prepared = record["t"] - launched
        event = record.get("event")
        if record.get("type") == "trainer_event" and isinstance(event, dict) and event.get("event") == "step":
            first.setdefault(record["task"], event["t"])
            last_step = max(last_step, event["t"])
    every = max(first.values()) - launched if len(first) == 2 else None
    if watch is None:
        return Timing(kind, every, prepared)
    released = watch.last_running - last_step if watch.last_running else None
    gone = watch.last_seen - last_step if watch.last_seen else None
    return Timing(kind, every, prepared, released, gone)


def median(values: Sequence[float | None]) -> str:
    seen = [v for v in values if v is not None]
    return f"{statistics.median(seen):.2f} s" if seen else "n/a"


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.hosts.slurm_start",
                                     description=__doc__.split("\n")[0])
    parser.add_argument("--reps", type=int, default=3)
    # Enough that both workers step before the target: under load one worker can do 300 alone.
    parser.add_argument("--steps", type=int, default=3000)
    args = parser.parse_args(argv)
    if missing := missing_binaries():
        raise SystemExit(f"needs Slurm and MUNGE: missing {', '.join(missing)}")
    with tempfile.TemporaryDirectory(prefix="bench-slurm-") as temp:
        folder = Path(temp)
        with running_slurm(folder / "slurm") as slurm:
            files = {kind: hosts_file(folder, kind, args.steps) for kind in ("localhost", "slurm")}
            timings: list[Timing] = []
            for rep in range(args.reps):
                for kind in ("localhost", "slurm"):  # interleaved: both see the same load
                    timing = run_once(files[kind], kind, slurm if kind == "slurm" else None)
                    timings.append(timing)
                    print(f"rep {rep + 1} {timing}", flush=True)
    local = [t.every_worker for t in timings if t.kind == "localhost"]
    on_slurm = [t for t in timings if t.kind == "slurm"]
    pairs = [s.every_worker / lo for s, lo in zip(on_slurm, local, strict=True) if s.every_worker and lo]
    ratio = f"{statistics.median(pairs):.2f}" if pairs else "n/a"
    print(f"every worker stepping: localhost {median(local)}, "
          f"slurm {median([t.every_worker for t in on_slurm])}, ratio slurm/localhost {ratio} "
          f"(per rep: {', '.join(f'{p:.2f}' for p in pairs)})")
    print(f"launch -> run started (hosts ready, ports found): localhost "
          f"{median([t.prepared for t in timings if t.kind == 'localhost'])}, "
          f"slurm {median([t.prepared for t in on_slurm])}")
    print(f"last step -> job not RUNNING: {median([t.released for t in on_slurm])}; "
          f"-> gone from squeue: {median([t.gone for t in on_slurm])}")


if __name__ == "__main__":
    main()
