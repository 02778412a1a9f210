"""A TF2 ParameterServerStrategy program under the shim (:mod:`trainer.shim.functions`):
the coordinator's anatomy of its functions, from what it can know (schedule, a worker taking
the function, its result), each function counted once. The custom-loop example, unchanged,
on a real 1 ps + 2 worker cluster on loopback, started as TensorFlow documents it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.trainer.cluster_runner import REPO
from trainer import protocol
from tui.launch.local.ports import reserve_free_ports

pytestmark = pytest.mark.integration

EXAMPLE = REPO / "examples" / "tf2_coordinator"
FUNCTIONS = 200


def env(cluster: dict[str, list[str]], job: str, index: int, **extra: str) -> dict[str, str]:
    config = {"cluster": cluster, "task": {"type": job, "index": index}}
    return {**os.environ, "TF_CONFIG": json.dumps(config), "PYTHONUNBUFFERED": "1", **extra}


def test_the_coordinator_says_what_it_knows_of_its_functions(tmp_path: Path) -> None:
    reservations = reserve_free_ports(4)
    ps, worker0, worker1, chief = (f"localhost:{r.port}" for r in reservations)
    for reservation in reservations:
        reservation.release()  # the tasks bind them now
    cluster = {"ps": [ps], "worker": [worker0, worker1], "chief": [chief]}
    servers = []
    try:
        for job, index in (("ps", 0), ("worker", 0), ("worker", 1)):
            with (tmp_path / f"{job}{index}.log").open("w") as log:  # the child keeps its own copy
                servers.append(subprocess.Popen(
                    [sys.executable, "train.py"], cwd=EXAMPLE, env=env(cluster, job, index),
                    stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                    start_new_session=True))
        shimmed = env(cluster, "chief", 0, PYTHONPATH=str(REPO), TFDIST_SHIM="1", TFDIST_RUN_ID="test")
        result = subprocess.run(
            [sys.executable, "-m", "trainer.shim", "train.py", "--steps", str(FUNCTIONS)],
            cwd=EXAMPLE, env=shimmed, capture_output=True, text=True, timeout=240)
    finally:
        for server in servers:
            server.kill()
            server.wait(timeout=30)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    events = [e for e in map(protocol.parse_event, result.stdout.splitlines()) if e is not None]
    samples = [e for e in events if isinstance(e, protocol.StepAnatomy)]
    assert samples, result.stdout[-3000:]
    # Every function the program scheduled is in exactly one anatomy (the last one at the end).
    assert sum(s.every for s in samples) == FUNCTIONS
    assert samples[-1].local_step == FUNCTIONS
    for sample in samples:
        assert sample.coordinator and (sample.role, sample.index) == ("chief", 0)
        assert [p.part for p in sample.parts] == ["queued", "function"]
        assert sum(p.seconds for p in sample.parts) == pytest.approx(sample.seconds, abs=1e-5)
        assert sum(p.share for p in sample.parts) == pytest.approx(1.0, abs=0.01)
        assert sample.seconds_of("function") > 0
        # Only the two workers ran functions; a worker's mean is known only where it ran some.
        assert len(sample.by_worker) <= 2 and any(s is not None for s in sample.by_worker)
        assert all(s is None or s > 0 for s in sample.by_worker)
    ran = {w for s in samples for w, seconds in enumerate(s.by_worker) if seconds is not None}
    assert ran == {0, 1}, samples
