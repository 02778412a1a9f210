"""The controller driving the real ``python -m trainer`` (TensorFlow) on loopback ports:
the issue's real-run tests. Same scenarios as test_controller_process.py."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from tests.support import scenarios

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]


async def test_default_hosts_yaml_runs_to_a_clean_exit(tmp_path: Path) -> None:
    await scenarios.default_run_succeeds(tmp_path, fake=False)


async def test_a_task_the_trainer_fails_exits_1(tmp_path: Path) -> None:
    await scenarios.failing_task_exits_1(tmp_path, fake=False)


async def test_a_port_in_use_exits_2(tmp_path: Path) -> None:
    await scenarios.port_in_use_exits_2(tmp_path, fake=False)


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM, signal.SIGKILL], ids=lambda s: s.name)
async def test_no_trainer_survives_the_controller(tmp_path: Path, sig: signal.Signals) -> None:
    await scenarios.signal_stops_everything(tmp_path, fake=False, sig=sig)


async def test_timeout_exits_3(tmp_path: Path) -> None:
    await scenarios.timeout_exits_3(tmp_path, fake=False)
