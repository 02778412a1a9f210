"""The ``slurm`` pytest fixture: one real test Slurm per test session (per xdist worker), shared by
every test marked ``slurm``. Import it into a folder's conftest.py to use it there."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from tests.support.slurm import SlurmCluster, missing_binaries, running_slurm


@pytest.fixture(scope="session")
def slurm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SlurmCluster]:
    """A running one-node Slurm; ``SLURM_CONF`` is set in this process's environment while it
    runs, so the controller under test and its ``salloc``/``srun`` find it."""
    missing = missing_binaries()
    if missing:
        pytest.skip(f"Slurm/MUNGE not installed (missing {', '.join(missing)}); .ci/run installs "
                    "slurmctld slurmd slurm-client munge")
    # A short path: munged's and slurmd's sockets live in it (sun_path holds 108 bytes).
    with running_slurm(tmp_path_factory.mktemp("slurm")) as cluster:
        previous = os.environ.get("SLURM_CONF")
        os.environ.update(cluster.env)
        try:
            yield cluster
        finally:
            if previous is None:
                os.environ.pop("SLURM_CONF", None)
            else:
                os.environ["SLURM_CONF"] = previous
