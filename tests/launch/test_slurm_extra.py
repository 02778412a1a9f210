"""``extra:`` against the real test Slurm (issue 33): an abbreviation of an option the
controller sets is refused before salloc is asked, and an salloc that is granted a job but
never runs the controller's holder is reported as that, with the job cancelled, not as
"Slurm refused the allocation: Granted job allocation N" with the job left RUNNING."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.slurm import PARTITION, SlurmCluster
from tests.support.slurm_helpers import fake_env, our_jobs, run_controller, slurm_hosts, wait_no_jobs
from tui.config.cluster import HostKind, HostSpec
from tui.config.slurm import SlurmSettings
from tui.launch.slurm.alloc import Allocation, SlurmError

pytestmark = [pytest.mark.slurm, pytest.mark.timeout(90)]


@pytest.mark.parametrize("word", ["--no-sh", "--job-n=x", "-vN1"])
async def test_an_abbreviated_option_of_ours_is_refused_where_it_is(slurm: SlurmCluster, tmp_path: Path,
                                                                  word: str) -> None:
    hosts = slurm_hosts(tmp_path / "hosts.yaml", entry={"extra": ["--qos=normal", word]})
    code, out = await run_controller(["--no-ui", str(hosts)], tmp_path, fake=True,
                                     **fake_env(tmp_path / "fake"))
    assert code == 2, out
    assert f"{hosts}:" in out and "hosts.hpc.extra[1]" in out and "which the controller sets" in out, out
    assert "Traceback" not in out
    assert not our_jobs(slurm)


async def test_a_granted_job_whose_holder_never_ran_is_cancelled(slurm: SlurmCluster) -> None:
    """``--no-shell`` slipped past the loader (an option this version does not know could do
    the same): salloc says "Granted job allocation N" and exits without the holder."""
    settings = SlurmSettings(partition=PARTITION, time="00:10:00", extra=("--no-shell",))
    host = HostSpec(name="hpc", address="hpc", kind=HostKind.SLURM, slurm=settings)
    with pytest.raises(SlurmError) as caught:
        await Allocation.request(host, "tfdist-hpc-test")
    message = str(caught.value)
    assert "Slurm granted job" in message and "the job is cancelled" in message, message
    assert "refused" not in message
    wait_no_jobs(slurm, 15)
