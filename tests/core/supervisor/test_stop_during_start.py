"""A stop asked for while a run is being started or relaunched (a SIGTERM, the app closing):
it waits for the run being made and ends it before any of its tasks starts, instead of
returning at once and leaving the new run to start its tasks after the controller closed.
Scripted fake processes and a fake clock (tui/core/supervisor/lifecycle.py)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from pathlib import Path

from tests.core.supervisor.test_lifecycle import make
from tests.support.fakes import FakeLauncher, running
from tui.config.cluster import HostSpec
from tui.core.events import RunOutcome
from tui.core.task_state import TaskState as S
from tui.launch.base import ConnectReport

NAMES = ["ps0", "worker0", "worker1"]


def hold_preparation(launcher: FakeLauncher) -> tuple[asyncio.Event, asyncio.Event]:
    """From now on, preparing the hosts (the start's first step) waits for the returned gate;
    the other event says a preparation is waiting on it."""
    gate, waiting = asyncio.Event(), asyncio.Event()

    async def connect_all(hosts: Iterable[HostSpec]) -> ConnectReport:
        waiting.set()
        await gate.wait()
        return ConnectReport()

    launcher.connect_all = connect_all  # type: ignore[method-assign]
    return gate, waiting


async def test_closing_during_a_relaunch_leaves_no_new_run_starting(tmp_path: Path) -> None:
    supervisor, launcher, _, recorder = make(tmp_path)
    await supervisor.start()
    await running(launcher, recorder, NAMES)
    gate, waiting = hold_preparation(launcher)
    relaunch = asyncio.ensure_future(supervisor.relaunch(supervisor.settings))
    await waiting.wait()  # the old run is over, the new one is being prepared
    closing = asyncio.ensure_future(supervisor.close())
    await asyncio.sleep(0.05)
    assert not closing.done()  # it waits for the run being made, to stop it
    gate.set()
    await asyncio.wait_for(closing, 10)
    await asyncio.wait_for(relaunch, 10)
    assert not supervisor.is_running
    assert launcher.starts == NAMES  # the new run launched nothing
    summary = await supervisor.wait()
    assert summary.outcome is RunOutcome.STOPPED and summary.reason == "controller closing"


async def test_a_stop_while_the_old_run_ends_holds_off_the_new_one(tmp_path: Path) -> None:
    supervisor, launcher, _, recorder = make(tmp_path)
    await supervisor.start()
    first = await running(launcher, recorder, NAMES)
    for process in first.values():
        process.ignore_term = True  # the old run's stop takes its grace period
    relaunch = asyncio.ensure_future(supervisor.relaunch(supervisor.settings))
    await recorder.state("worker1", S.STOPPING)
    stopping = asyncio.ensure_future(supervisor.stop_all(RunOutcome.INTERRUPTED, "interrupted by SIGTERM"))
    await asyncio.sleep(0.05)
    for process in first.values():
        process.exit(-15)
    summary = await asyncio.wait_for(stopping, 10)
    await asyncio.wait_for(relaunch, 10)
    assert summary is not None and summary.reason == "relaunched with new settings"
    assert not supervisor.is_running and launcher.starts == NAMES


async def test_a_stop_during_a_first_start_ends_that_run_before_any_task(tmp_path: Path) -> None:
    supervisor, launcher, _, _ = make(tmp_path)
    gate, waiting = hold_preparation(launcher)
    starting = asyncio.ensure_future(supervisor.start())
    await waiting.wait()
    stopping = asyncio.ensure_future(supervisor.stop_all(RunOutcome.INTERRUPTED, "interrupted by SIGTERM"))
    gate.set()
    summary = await asyncio.wait_for(stopping, 10)
    await starting
    assert summary is not None and summary.outcome is RunOutcome.INTERRUPTED
    assert launcher.starts == []
