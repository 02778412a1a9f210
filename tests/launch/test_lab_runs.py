"""The built-in trainer over SSH on a lab of real hosts (tests/support/netlab.py), in the
standard layout: every task on port 2222 of its own host."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.support import wait_until
from tests.support.netlab import NetLab
from tests.support.netlab_fixture import MakeLab
from tui.config.load import load_config
from tui.core.options import RunOptions
from tui.core.session import Session

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

REPO = Path(__file__).resolve().parents[2]
TRAINING = {"model": "mlp", "dataset": "digits", "steps": 300, "log_every": 50, "hidden_units": 64}
PORT = 2222


def standard_layout(lab: NetLab, tmp_path: Path, ps: int, workers: int,
                    training: dict[str, object] | None = None) -> Path:
    """hosts.yaml: ps0.. on the first hosts, then the workers, each alone on port 2222 of its host."""
    names = list(lab.hosts)
    assert len(names) >= ps + workers
    hosts = {name: lab.yaml_entry(name, workdir=tmp_path / "work" / name) for name in names[:ps + workers]}
    path = tmp_path / "hosts.yaml"
    path.write_text(yaml.safe_dump({
        "hosts": hosts,
        "cluster": {"ps": [f"{n}:{PORT}" for n in names[:ps]],
                    "worker": [f"{n}:{PORT}" for n in names[ps:ps + workers]]},
        "training": {**TRAINING, **(training or {})},
        "run_dir": str(tmp_path / "runs"),
    }))
    return path


def endless_session(lab: NetLab, tmp_path: Path) -> Session:
    """A session of ps0 and two workers training without end on the lab's first three hosts,
    with a 30 s lease and 120 s before an unreachable host fails the run: for cutting a host
    off while its tasks run."""
    path = standard_layout(lab, tmp_path, ps=1, workers=2, training={"steps": 10_000_000, "log_every": 50})
    config = yaml.safe_load(path.read_text())
    config["network"] = {"lease": 30, "unreachable_timeout": 120}
    path.write_text(yaml.safe_dump(config))
    return Session.from_options(RunOptions(config=load_config(path), runs_root=tmp_path / "runs"))


def headless(hosts_yaml: Path, *args: str, timeout: float = 240) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "tui", str(hosts_yaml), "--no-ui", *args], cwd=REPO,
                          capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)


def assert_hosts_empty(lab: NetLab, within: float = 10.0) -> None:
    """Nothing but each host's own sshd runs in any of the lab's hosts."""
    wait_until(lambda: not any(lab.leftovers(name) for name in lab.hosts), within,
               lambda: {name: lab.leftovers(name) for name in lab.hosts})


def test_the_trainer_on_four_hosts_in_the_standard_layout(netlab: MakeLab, tmp_path: Path) -> None:
    lab = netlab(4)
    result = headless(standard_layout(lab, tmp_path, ps=2, workers=2))
    output = result.stdout[-3000:] + result.stderr[-3000:]
    assert result.returncode == 0, output
    assert "Traceback" not in result.stdout + result.stderr
    (run_dir,) = (tmp_path / "runs").iterdir()
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["global_step"] >= TRAINING["steps"], summary
    assert_hosts_empty(lab)
