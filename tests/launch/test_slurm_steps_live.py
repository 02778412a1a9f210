"""The Slurm launcher on its own against the test Slurm: one allocation kept across
connect_all calls (a relaunch runs in it), a step's output streamed and its exit code, a step
stopped gracefully (SIGTERM reaches the task), and the job gone once the launcher closes."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tests.support.slurm import SlurmCluster
from tests.support.slurm_helpers import our_jobs, slurm_hosts, wait_no_jobs
from tui.config.load import load_config
from tui.launch.lines import Stream
from tui.launch.slurm.launcher import SlurmLauncher
from tui.launch.streams import each_line

pytestmark = [pytest.mark.slurm, pytest.mark.timeout(90)]

# Prints on both streams, then waits; exits 7 on SIGTERM.
PROGRAM = ("import signal, sys, time\n"
           "signal.signal(signal.SIGTERM, lambda *_: sys.exit(7))\n"
           "print('out line', flush=True); print('err line', file=sys.stderr, flush=True)\n"
           "time.sleep(60)\n")


async def test_steps_in_one_allocation_kept_until_close(slurm: SlurmCluster, tmp_path: Path) -> None:
    config = load_config(slurm_hosts(tmp_path / "hosts.yaml"))
    host = config.hosts["hpc"]
    launcher = SlurmLauncher(config)
    try:
        first = await launcher.connect_all([host])
        again = await launcher.connect_all([host])  # a relaunch: same job, nothing new asked
        assert first.ok and again.ok, first.failures
        assert first.placement["ps0"].slurm.job_id == again.placement["worker1"].slurm.job_id
        assert len(our_jobs(slurm)) == 1
        placed = first.placement["worker0"]
        task = await launcher.start(config.tasks[1], placed, [sys.executable, "-c", PROGRAM], {}, None)
        lines = each_line(task.output())
        seen = {(await anext(lines)).stream, (await anext(lines)).stream}
        assert seen == {Stream.STDOUT, Stream.STDERR}
        await task.terminate()
        assert await task.wait() == 7  # the task's own exit, after a graceful SIGTERM
        await lines.aclose()
        ports = await launcher.free_ports(host, 3)
        assert len({p.port for p in ports}) == 3
        assert await launcher.check_ports(host, [p.port for p in ports]) == []
    finally:
        await launcher.close()
    wait_no_jobs(slurm, 10)


async def test_a_node_the_allocation_lacks_is_refused(slurm: SlurmCluster, tmp_path: Path) -> None:
    hosts = tmp_path / "hosts.yaml"
    hosts.write_text("hosts:\n  hpc: {kind: slurm, time: '5'}\n"
                     "cluster: {ps: [hpc:auto], worker: [{host: hpc, node: elsewhere}]}\n")
    config = load_config(hosts)
    launcher = SlurmLauncher(config)
    try:
        report = await launcher.connect_all([config.hosts["hpc"]])
    finally:
        await launcher.close()
    (failure,) = report.failures
    assert "has no such node (worker0: elsewhere); it has localhost" in str(failure)
    wait_no_jobs(slurm, 10)
