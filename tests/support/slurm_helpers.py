"""Helpers of the Slurm launcher tests: hosts.yaml files with a ``kind: slurm`` entry, and the
controller run as a separate process against the test Slurm."""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import psutil
import yaml

from tests.support.clirun import TAG_ENV, start_controller, tagged_env
from tests.support.slurm import CPUS, PARTITION, SlurmCluster


def slurm_hosts(path: Path, *, workers: int = 2, entry: dict[str, Any] | None = None,
                training: dict[str, Any] | None = None, restart: dict[str, Any] | None = None,
                extra: dict[str, Any] | None = None) -> Path:
    """A hosts.yaml whose ps and ``workers`` run in one Slurm allocation (entry ``hpc``)."""
    document: dict[str, Any] = {
        "hosts": {"hpc": {"kind": "slurm", "partition": PARTITION, "nodes": 1, "time": "00:10:00",
                          **(entry or {})}},
        "cluster": {"ps": ["hpc:auto"], "worker": ["hpc:auto"] * workers},
        "training": {"model": "mlp", "dataset": "digits", "steps": 30, **(training or {})},
        "run_dir": str(path.parent / "runs"),
        **(extra or {}),
    }
    if restart is not None:
        document["restart"] = restart
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    return path


async def run_controller(args: Sequence[str], cwd: Path, *, fake: bool = False, timeout: float = 120.0,
                         **env: str) -> tuple[int, str]:
    """Run ``tfdist-tui ARGS`` to its end: (exit status, stdout + stderr)."""
    _, environ = tagged_env(**env)
    process = await start_controller(args, environ, cwd, fake=fake)
    out, err = await asyncio.wait_for(process.communicate(), timeout)
    assert process.returncode is not None
    return process.returncode, out.decode(errors="replace") + err.decode(errors="replace")


def our_jobs(slurm: SlurmCluster, prefix: str = "tfdist-hpc") -> list[str]:
    """The test Slurm's jobs that a controller asked for."""
    return [line for line in slurm.jobs() if line.split()[2].startswith(prefix)]


def wait_no_jobs(slurm: SlurmCluster, timeout: float) -> float:
    """Seconds until no controller job is left in squeue (raises AssertionError past
    ``timeout``). squeue is the only witness of a job's end, so this asks it repeatedly."""
    start = time.monotonic()
    while our_jobs(slurm):
        if time.monotonic() - start > timeout:
            raise AssertionError(f"jobs still in squeue after {timeout} s: {our_jobs(slurm)}")
        time.sleep(0.1)
    return time.monotonic() - start


def fake_env(directory: Path, **extra: str) -> dict[str, str]:
    """The fake trainer's settings (tests/core/fake_trainer.py): its marker folder and more."""
    directory.mkdir(parents=True, exist_ok=True)
    return {"FAKE_DIR": str(directory), **extra, "SLURM_CONF": os.environ["SLURM_CONF"]}


def occupy_the_node(slurm: SlurmCluster) -> str:
    """Submit a job that takes every CPU of the one node (for 5 minutes); its id. Cancel it."""
    return slurm.run("sbatch", "--parsable", "-p", PARTITION, "-J", "blocker", f"--cpus-per-task={CPUS}",
                     "--output=/dev/null", "--wrap", "sleep 300").stdout.strip()


def slurm_clients(tag: str) -> list[psutil.Process]:
    """The controller's Slurm clients (salloc, srun, the allocation's watchdog) still alive,
    found by the test's tag in their environment."""
    found = []
    for process in psutil.process_iter(["name", "cmdline", "status"]):
        try:
            if process.info["status"] == psutil.STATUS_ZOMBIE:
                continue
            cmdline = " ".join(process.info["cmdline"] or [])
            if (process.info["name"] in ("salloc", "srun") or "read pid;" in cmdline) \
                    and process.environ().get(TAG_ENV) == tag:
                found.append(process)
        except psutil.Error:
            continue
    return found


def wait_no_clients(tag: str, timeout: float) -> list[psutil.Process]:
    """Poll until no Slurm client of the test is alive; those left after ``timeout``."""
    deadline = time.monotonic() + timeout
    while (left := slurm_clients(tag)) and time.monotonic() < deadline:
        time.sleep(0.1)
    return left
