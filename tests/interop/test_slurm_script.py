"""``tfdist-tui export --format slurm``: the sbatch script, submitted to the real test Slurm
with ``sbatch --wait``, runs the built-in trainer's cluster to completion by itself."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.clirun import REPO
from tests.support.slurm import SlurmCluster
from tests.support.slurm_helpers import slurm_hosts
from tui.config.load import load_config
from tui.interop.export import export_ports
from tui.interop.slurm_script import sbatch_script


def test_the_script_runs_each_task_as_a_step_with_its_plan(tmp_path: Path) -> None:
    config = load_config(slurm_hosts(tmp_path / "hosts.yaml", entry={"nodes": 2, "account": "proj"}))
    script = sbatch_script(config, export_ports(config))
    assert "#SBATCH --nodes=2\n" in script and "#SBATCH --account=proj\n" in script
    # The ps on the first node, the workers on the second; addresses filled in at run time.
    assert "step ps0 0 " in script and "step worker0 1 " in script and "step worker1 1 " in script
    assert '"ps":["@node0@:2222"],"worker":["@node1@:2223","@node1@:2224"]' in script
    assert "TFDIST_RUN_ID" not in script and "--hold" not in script  # no controller there


@pytest.mark.slurm
@pytest.mark.integration
@pytest.mark.timeout(180)
def test_the_exported_script_runs_to_completion_under_sbatch(slurm: SlurmCluster, tmp_path: Path) -> None:
    hosts = slurm_hosts(tmp_path / "hosts.yaml", workers=1, training={"steps": 30})
    script = tmp_path / "hosts.sbatch"
    exported = subprocess.run([sys.executable, "-m", "tui", "export", str(hosts), "--format", "slurm"],
                              capture_output=True, text=True, cwd=REPO, check=True)
    script.write_text(exported.stdout)
    result = slurm.run("sbatch", "--wait", "--parsable", f"--output={tmp_path}/job.out",
                       f"--chdir={tmp_path}", str(script),
                       timeout=170, check=False)
    out = (tmp_path / "job.out").read_text()
    job = result.stdout.strip().split(";")[0]
    logs = {p.name: p.read_text() for p in (tmp_path / f"tfdist-{job}").glob("*.log")}
    assert result.returncode == 0, (result.stderr, out, logs)
    assert "tfdist: worker0 exited with 0" in out and "status 0" in out, out
    assert set(logs) == {"ps0.log", "worker0.log"}
    assert '"event": "done"' in logs["worker0.log"] or '"event":"done"' in logs["worker0.log"], logs
