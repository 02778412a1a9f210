"""``tfdist-tui export`` and a host's ``env:`` secrets: the real command leaves their values
out of ``tf-config`` and ``shell`` unless ``--include-env`` asks, and says so."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SECRET = "wJalrXUtnFEMI-K7MDENG-bPxRfiCYzEXAMPLEKEY"
HOSTS = f"""\
hosts:
  gpu1: {{address: 10.1.2.3, env: {{AWS_SECRET_ACCESS_KEY: "{SECRET}", OMP_NUM_THREADS: "3"}}}}
cluster:
  ps: [gpu1:2222]
  worker: [gpu1:2223]
"""


def export(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    hosts = tmp_path / "hosts.yaml"
    hosts.write_text(HOSTS)
    return subprocess.run([sys.executable, "-m", "tui.cli", "export", str(hosts), *args], cwd=REPO,
                          capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize("fmt", ["tf-config", "shell", "tfjob"])
def test_env_values_are_left_out_and_that_is_said(tmp_path: Path, fmt: str) -> None:
    result = export(tmp_path, "--format", fmt)
    assert result.returncode == 0, result.stderr
    assert SECRET not in result.stdout
    if fmt == "tfjob":
        return  # never had them
    assert "AWS_SECRET_ACCESS_KEY, OMP_NUM_THREADS" in result.stderr and "--include-env" in result.stderr
    if fmt == "tf-config":
        first = json.loads(result.stdout.splitlines()[0])
        assert first["env_left_out"] == ["AWS_SECRET_ACCESS_KEY", "OMP_NUM_THREADS"]
        assert "AWS_SECRET_ACCESS_KEY" not in first["env"]
    else:
        assert "# env: values of hosts.yaml left out" in result.stdout


@pytest.mark.parametrize("fmt", ["tf-config", "shell"])
def test_include_env_writes_them(tmp_path: Path, fmt: str) -> None:
    result = export(tmp_path, "--format", fmt, "--include-env")
    assert result.returncode == 0, result.stderr
    assert SECRET in result.stdout and "left out" not in result.stderr + result.stdout
