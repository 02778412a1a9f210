"""A user's program on a "remote" host over SSH: its folder uploaded (content-addressed,
without the run directory), the command run in the copy with the host's Python, under the
shim, and measured from its log."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
import yaml

from tests.program.helpers import program_folder, run_program
from tests.support.ssh import SshServer, describe, kill, wait_nothing_left
from tui.common.exit_codes import ExitCode
from tui.config.cluster import HostKind
from tui.config.load import load_config
from tui.core.supervisor.lifecycle import Supervisor
from tui.launch.package import upload_package
from tui.launch.router import Router
from tui.launch.ssh.deploy import MARKER

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]


async def test_an_uploaded_program_runs_in_its_copy(sshd: SshServer, tmp_path: Path) -> None:
    host = sshd.host("far", sshd.addresses[0], workdir=tmp_path / "work")
    hosts_yaml = program_folder(tmp_path, "plain.py", yaml.safe_dump({
        "hosts": {"far": {**sshd.yaml_entry(host), "kind": "ssh"}},
        "program": {"command": "python plain.py --job={job} --index={index} --steps={steps}",
                    "upload": ".", "metrics": [r"Step: (?P<step>\d+).*Cost: (?P<loss>[0-9.]+)"]},
        "cluster": {"ps": ["far:auto"], "worker": ["far:auto"]},
        "training": {"steps": 4},
    }))
    config = load_config(hosts_yaml)
    assert config.hosts["far"].launch_kind is HostKind.SSH
    (config.run_dir / "old-run").mkdir(parents=True)  # never uploaded
    package = upload_package(hosts_yaml.parent, exclude=(config.run_dir,))
    router = Router.for_config(config)
    supervisor = Supervisor(config, runs_root=config.run_dir, launcher=router)
    try:
        run = await asyncio.wait_for(run_program(config, config.run_dir, supervisor), 150)
    finally:
        await supervisor.close()
    assert run.code is ExitCode.OK, run.out[-3000:]
    copy = tmp_path / "work" / package.dirname
    assert f"worker0 | cwd {copy}" in run.out
    assert sorted(p.name for p in copy.iterdir()) == [MARKER, "hosts.yaml", "plain.py"]
    (finished,) = [e.summary for e in run.events if hasattr(e, "summary")]
    assert (finished.global_step, finished.final_loss) == (4, 0.25)
    left = await wait_nothing_left(sshd.pid)
    kill(left)
    assert not left, describe(left)
