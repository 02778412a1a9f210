"""The TF2 ParameterServerStrategy example, started by hand as TensorFlow documents it: one
process per task, each with its own TF_CONFIG. The chief (the coordinator) trains and exits
0; the worker and ps servers serve until someone ends them."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tui.launch.local_ports import reserve_free_ports

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "tf2_ps_strategy"
STEPS = 30

pytestmark = pytest.mark.integration


def _env(cluster: dict[str, list[str]], job: str, index: int) -> dict[str, str]:
    config = {"cluster": cluster, "task": {"type": job, "index": index}}
    return {**os.environ, "TF_CONFIG": json.dumps(config), "PYTHONUNBUFFERED": "1"}


def test_coordinator_trains_on_the_servers_and_exits_0(tmp_path: Path) -> None:
    reservations = reserve_free_ports(3)
    ps, worker, chief = (f"localhost:{r.port}" for r in reservations)
    for reservation in reservations:
        reservation.release()  # the tasks bind them now
    cluster = {"ps": [ps], "worker": [worker], "chief": [chief]}
    servers = []
    try:
        for job in ("ps", "worker"):
            with (tmp_path / f"{job}.log").open("w") as log:  # the child keeps its own copy
                servers.append(subprocess.Popen(
                    [sys.executable, "train.py"], cwd=EXAMPLE, env=_env(cluster, job, 0), stdout=log,
                    stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True))
        result = subprocess.run(
            [sys.executable, "train.py", "--steps", str(STEPS), "--log-every", "10"], cwd=EXAMPLE,
            env=_env(cluster, "chief", 0), capture_output=True, text=True, timeout=180)
        assert result.returncode == 0, result.stdout + result.stderr
        steps = [int(m) for m in re.findall(r"^loss = [0-9.]+, step = (\d+) \(", result.stdout, re.M)]
        assert steps == [10, 20, 30]
        assert f"done: {STEPS} steps" in result.stdout
        placed = re.findall(r"^placement: (\S+) .* (\S+)$", result.stdout, re.M)
        assert {name for name, _ in placed} >= {"hidden/weights:0", "logits/weights:0", "global_step:0"}
        assert all(device.startswith("/job:ps/") for _, device in placed)
        # The servers never end by themselves: that is the controller's (or a person's) job.
        assert [server.poll() for server in servers] == [None, None]
    finally:
        for server in servers:
            server.kill()
            server.wait(timeout=30)
