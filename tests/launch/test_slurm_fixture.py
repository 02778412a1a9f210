"""The test Slurm itself: it starts, runs job steps, and accepts batch jobs."""

from __future__ import annotations

import pytest

from tests.support.slurm import PARTITION, SlurmCluster

pytestmark = pytest.mark.slurm


def test_runs_three_tasks_on_its_one_node(slurm: SlurmCluster) -> None:
    result = slurm.run("srun", "-p", PARTITION, "-n", "3", "echo", "hello")
    assert result.stdout.split() == ["hello"] * 3
