"""Whole runs in a real Slurm allocation with real TensorFlow: the built-in trainer and one
example program (``examples/tf_config_monitored``, TF_CONFIG style), side by side in two
allocations of the test Slurm, each to a clean end with every task succeeded, and the
allocation released by the time the controller exits."""

from __future__ import annotations

import asyncio
import re
import shutil
from pathlib import Path

import pytest
import yaml

from tests.support.clirun import REPO
from tests.support.slurm import PARTITION, SlurmCluster
from tests.support.slurm_helpers import our_jobs, run_controller, slurm_hosts

pytestmark = [pytest.mark.slurm, pytest.mark.integration, pytest.mark.timeout(240)]


def example_on_slurm(tmp_path: Path) -> Path:
    """examples/tf_config_monitored with its tasks in a Slurm allocation."""
    folder = tmp_path / "example"
    shutil.copytree(REPO / "examples" / "tf_config_monitored", folder)
    hosts = folder / "hosts.yaml"
    document = yaml.safe_load(hosts.read_text())
    document["hosts"] = {"hpc": {"kind": "slurm", "partition": PARTITION, "time": "10"}}
    # One ps and one worker each: the point is Slurm, and TensorFlow imports are the time.
    document["cluster"] = {"ps": ["hpc:auto"], "worker": ["hpc:auto"]}
    document["training"].update(steps=30, mode="async", partitions=1)
    document["run_dir"] = str(tmp_path / "example-runs")
    hosts.write_text(yaml.safe_dump(document, sort_keys=False))
    return hosts


async def test_the_trainer_and_an_example_run_to_a_clean_end(slurm: SlurmCluster, tmp_path: Path) -> None:
    trainer = slurm_hosts(tmp_path / "hosts.yaml", workers=1)
    example = example_on_slurm(tmp_path)
    (code, out), (example_code, example_out) = await asyncio.gather(
        run_controller(["--no-ui", str(trainer)], tmp_path, timeout=200),
        run_controller(["--no-ui", str(example)], example.parent, timeout=200))
    assert code == 0, out[-4000:]
    assert example_code == 0, example_out[-4000:]
    for text, tasks in ((out, ("ps0", "worker0")), (example_out, ("ps0", "worker0"))):
        assert "run succeeded" in text
        for task in tasks:
            assert re.search(rf"^\s+{task}\s+succeeded, exit code 0$", text, re.MULTILINE), text[-2000:]
        assert "hpc/localhost job " in text  # each task's node and job id in the headless lines
        assert "Traceback" not in text
    # Released when the controller exits, not later (a job COMPLETING has ended: Slurm is
    # still cleaning up after it).
    assert not [job for job in our_jobs(slurm) if " COMPLETING " not in job], slurm.jobs()
