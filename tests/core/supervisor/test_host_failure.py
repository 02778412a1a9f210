"""Hosts that failed their preparation (tui/core/supervisor/host_failure.py): the run fails
unless ``network.on_host_failure: start_without`` and the cluster can train without their
tasks; every refusal says why. (The lab test of it: tests/launch/test_lab_hosts.py.)"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from tests.support.fakes import make_config
from trainer.settings import Mode
from tui.config.cluster import ClusterConfig, HostSpec
from tui.config.network import NetworkSettings, OnHostFailure
from tui.core.supervisor.host_failure import leave_out
from tui.launch.base import LaunchError
from tui.launch.errors import HostError, HostFailure
from tui.plan.preflight import PreflightError
from tui.plan.tasks import plan_run


def cluster(tmp_path: Path, policy: OnHostFailure, ports: bool = True) -> ClusterConfig:
    """ps0 on h0, worker0 (the chief) on h1, worker1 and worker2 on h2."""
    config = make_config(tmp_path, num_ps=1, num_workers=3, ports=[2222] * 4 if ports else None)
    placed = tuple(dataclasses.replace(t, host=h) for t, h in zip(config.tasks, ("h0", "h1", "h2", "h2"),
                                                                   strict=True))
    hosts = {f"h{i}": HostSpec(name=f"h{i}", address=f"10.0.0.{i + 1}") for i in range(3)}
    return dataclasses.replace(config, hosts=hosts, tasks=placed,
                               network=NetworkSettings(on_host_failure=policy))


def dead(host: str) -> HostError:
    return HostError(host, "10.0.0.9", HostFailure.UNREACHABLE, "no SSH answer within 10 s")


def refusal(config: ClusterConfig, *failures: LaunchError, mode: Mode = Mode.ASYNC) -> list[str]:
    with pytest.raises(PreflightError) as raised:
        leave_out(config, config.training.replace(mode=mode), failures)
    return [str(p) for p in raised.value.problems]


def test_by_default_a_failed_host_fails_the_run(tmp_path: Path) -> None:
    assert refusal(cluster(tmp_path, OnHostFailure.FAIL), dead("h2")) == [
        "host h2 (10.0.0.9): unreachable: no SSH answer within 10 s"]


def test_start_without_leaves_out_only_workers_other_than_the_chief(tmp_path: Path) -> None:
    config = cluster(tmp_path, OnHostFailure.START_WITHOUT)
    left = leave_out(config, config.training, [dead("h2")])
    assert left.tasks == {"worker1", "worker2"}
    assert left.notice.startswith("started without worker1, worker2: host h2 (10.0.0.9): unreachable")
    # Their addresses stay in the cluster: the others' indices keep their meaning.
    ports = {t.name: 2222 for t in config.tasks}
    plans = plan_run(config, config.training, ports, "r", without=left.tasks)
    assert [p.name for p in plans] == ["ps0", "worker0"]
    assert '"worker":["10.0.0.2:2222","10.0.0.3:2222","10.0.0.3:2222"]' in plans[0].env["TF_CONFIG"]

    for host, why in (("h0", "without ps0 (only workers other than the chief"),
                      ("h1", "without worker0 (only workers other than the chief")):
        assert why in refusal(config, dead(host))[-1]
    assert "sync mode waits for every worker's gradients" in refusal(config, dead("h2"), mode=Mode.SYNC)[-1]
    assert "not every failure is a host's" in refusal(config, LaunchError("no launcher"))[-1]
    auto = cluster(tmp_path, OnHostFailure.START_WITHOUT, ports=False)
    assert "worker1, worker2 on port auto" in refusal(auto, dead("h2"))[-1]
