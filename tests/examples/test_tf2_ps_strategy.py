"""The TF2 ParameterServerStrategy example, started by hand as TensorFlow documents it: one
process per task, each with its own TF_CONFIG. The chief (the coordinator) trains and exits
0, reporting its placement and progress through ``tfdist_report``; the worker and ps servers
serve until someone ends them. (Sharding across 2 ps: the test under the controller.)"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from trainer import protocol
from trainer.shim import REPORT_DIR
from tui.launch.local.ports import reserve_free_ports

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "tf2_ps_strategy"
STEPS = 30

pytestmark = pytest.mark.integration


def _env(cluster: dict[str, list[str]], job: str, index: int, **extra: str) -> dict[str, str]:
    config = {"cluster": cluster, "task": {"type": job, "index": index}}
    return {**os.environ, "TF_CONFIG": json.dumps(config), "PYTHONUNBUFFERED": "1", **extra}


def test_coordinator_trains_on_the_servers_and_reports(tmp_path: Path) -> None:
    reservations = reserve_free_ports(3)
    ps, worker, chief = (f"localhost:{r.port}" for r in reservations)
    for reservation in reservations:
        reservation.release()  # the tasks bind them now
    cluster = {"ps": [ps], "worker": [worker], "chief": [chief]}
    servers = []
    try:
        for job, index in (("ps", 0), ("worker", 0)):
            with (tmp_path / f"{job}{index}.log").open("w") as log:  # the child keeps its own copy
                servers.append(subprocess.Popen(
                    [sys.executable, "train.py"], cwd=EXAMPLE, env=_env(cluster, job, index), stdout=log,
                    stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True))
        # tfdist_report on the path and a run id, as the controller gives every task.
        reporting = _env(cluster, "chief", 0, PYTHONPATH=str(REPORT_DIR), TFDIST_RUN_ID="by-hand")
        result = subprocess.run(
            [sys.executable, "train.py", "--steps", str(STEPS), "--log-every", "10"], cwd=EXAMPLE,
            env=reporting, capture_output=True, text=True, timeout=180)
        assert result.returncode == 0, result.stdout + result.stderr
        steps = [int(m) for m in re.findall(r"^loss = [0-9.]+, step = (\d+) \(", result.stdout, re.M)]
        assert steps == [10, 20, 30]
        assert f"done: {STEPS} steps" in result.stdout
        # The servers never end by themselves: that is the controller's (or a person's) job.
        assert [server.poll() for server in servers] == [None, None]
    finally:
        for server in servers:
            server.kill()
            server.wait(timeout=30)
    events = [e for e in map(protocol.parse_event, result.stdout.splitlines()) if e is not None]
    (placement,) = [e for e in events if isinstance(e, protocol.Placement)]
    assert placement.num_ps == 1 and placement.role == "chief" and not placement.unattributed
    assert {v.variable for v in placement.variables} == {
        "hidden/weights", "hidden/biases", "logits/weights", "logits/biases", "global_step"}
    assert placement.ps_bytes == (sum(v.bytes for v in placement.variables),)
    assert next(v for v in placement.variables if v.variable == "hidden/weights").bytes == 64 * 64 * 4
    reported = [e for e in events if isinstance(e, protocol.Step)]
    assert reported and reported[-1].global_step == STEPS and reported[-1].loss is not None
