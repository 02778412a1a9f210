"""The whole controller as a process (config file, headless front end, signals, exit
codes) with the fake trainer. The same scenarios run against the real trainer in
test_integration_trainer.py."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from tests.support import scenarios


async def test_default_run_succeeds(tmp_path: Path) -> None:
    await scenarios.default_run_succeeds(tmp_path, fake=True)


async def test_failing_task_exits_1(tmp_path: Path) -> None:
    await scenarios.failing_task_exits_1(tmp_path, fake=True)


async def test_port_in_use_exits_2(tmp_path: Path) -> None:
    await scenarios.port_in_use_exits_2(tmp_path, fake=True)


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM, signal.SIGKILL], ids=lambda s: s.name)
async def test_signal_leaves_no_task_behind(tmp_path: Path, sig: signal.Signals) -> None:
    await scenarios.signal_stops_everything(tmp_path, fake=True, sig=sig)


async def test_timeout_exits_3(tmp_path: Path) -> None:
    await scenarios.timeout_exits_3(tmp_path, fake=True)


@pytest.mark.asyncio
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL], ids=lambda s: s.name)
async def test_a_stopped_task_dies_with_its_controller(tmp_path: Path, sig: signal.Signals) -> None:
    await scenarios.stopped_task_dies_with_controller(tmp_path, fake=True, sig=sig)
