"""``tfdist-tui hosts.yaml --no-ui`` with remote hosts, as a user runs it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.support import assert_no_trainers_left
from tests.support.ssh import SshServer

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]

REPO = Path(__file__).resolve().parents[2]
TRAINING = {"model": "mlp", "dataset": "digits", "steps": 30, "log_every": 10, "hidden_units": 16}


def headless(hosts_yaml: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "tui", str(hosts_yaml), "--no-ui", *args], cwd=REPO,
                          capture_output=True, text=True, timeout=200, stdin=subprocess.DEVNULL)


def write(tmp_path: Path, hosts: dict, cluster: dict) -> Path:
    path = tmp_path / "hosts.yaml"
    path.write_text(yaml.safe_dump({"hosts": hosts, "cluster": cluster, "training": TRAINING,
                                    "run_dir": str(tmp_path / "runs")}))
    return path


def test_headless_run_on_remote_hosts(sshd: SshServer, tmp_path: Path) -> None:
    a = sshd.host("a", sshd.addresses[0], workdir=tmp_path / "a")
    b = sshd.host("b", sshd.addresses[1], workdir=tmp_path / "b")
    hosts_yaml = write(tmp_path, {"a": sshd.yaml_entry(a), "b": sshd.yaml_entry(b)},
                       {"ps": ["a:auto"], "worker": ["b:auto", "a:auto"]})
    result = headless(hosts_yaml)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "TensorFlow" in result.stdout
    assert "Traceback" not in result.stdout + result.stderr
    assert_no_trainers_left(tmp_path / "runs")


def test_headless_names_an_unreachable_host_and_exits_2(sshd: SshServer, tmp_path: Path) -> None:
    good = sshd.host("good", sshd.addresses[0], workdir=tmp_path / "good")
    bad = sshd.host("bad", sshd.addresses[1], workdir=tmp_path / "bad")
    entry = sshd.yaml_entry(bad)
    entry["port"] = 1  # nobody listens there
    hosts_yaml = write(tmp_path, {"good": sshd.yaml_entry(good), "bad": entry},
                       {"ps": ["good:auto"], "worker": ["bad:auto"]})
    result = headless(hosts_yaml, "--connect-timeout", "5")
    assert result.returncode == 2, result.stderr
    assert "host bad" in result.stderr and "unreachable" in result.stderr
    assert "Traceback" not in result.stderr


def test_headless_refuses_an_unknown_host_key_with_the_fingerprint(sshd: SshServer, tmp_path: Path) -> None:
    empty = tmp_path / "known_hosts"
    empty.write_text("")
    host = sshd.host("h", sshd.addresses[0], workdir=tmp_path / "h", known_hosts=empty)
    hosts_yaml = write(tmp_path, {"h": sshd.yaml_entry(host)}, {"ps": ["h:auto"], "worker": ["h:auto"]})
    result = headless(hosts_yaml)
    assert result.returncode == 2, result.stderr
    assert "SHA256:" in result.stderr and "--accept-new-host-keys" in result.stderr
    assert empty.read_text() == ""
    accepted = headless(hosts_yaml, "--accept-new-host-keys")
    assert accepted.returncode == 0, accepted.stderr[-3000:]
    assert empty.read_text().strip()
