"""The warm pool of this machine's tasks starts before the run does (a front end calls
:meth:`Supervisor.prestart` once it has a supervisor): its TensorFlow import overlaps the
controller's start, and it is the one pool every task of the run then forks from."""

from __future__ import annotations

import asyncio
from pathlib import Path

import psutil
import pytest

from tests.support.clirun import write_hosts
from tests.support.fakes import Recorder
from tests.support.warm_pool import spawned_pool
from tui.config.load import load_config
from tui.core.commands import StartRun
from tui.core.events import RunOutcome, TaskStateChanged
from tui.core.session import Session
from tui.core.supervisor.lifecycle import Supervisor
from tui.core.task_state import TaskState
from tui.launch.base import WARM_REASON
from tui.launch.local.launcher import LocalLauncher
from tui.launch.router import Router

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]



async def test_the_prestarted_pool_serves_every_task_of_the_run(tmp_path: Path) -> None:
    config = load_config(write_hosts(tmp_path / "hosts.yaml", training={"steps": 30}))
    router = Router.for_config(config)
    supervisor = Supervisor(config, runs_root=tmp_path / "runs", launcher=router)
    session = Session(supervisor, router=router)
    recorder = Recorder()
    supervisor.subscribe(recorder)
    local = router.local
    assert isinstance(local, LocalLauncher)
    try:
        supervisor.prestart()
        pool = await spawned_pool(local)
        assert not recorder.of(TaskStateChanged)  # nothing of the run has started yet
        await session.execute(StartRun())
        starting = [e for e in recorder.of(TaskStateChanged) if e.new is TaskState.STARTING]
        pids = {}
        for name in ("ps0", "worker0", "worker1"):
            started = await recorder.state(name, TaskState.STARTING)
            assert started.reason == WARM_REASON, starting
        for view in supervisor.tasks():
            if view.pid is not None:
                pids[view.name] = psutil.Process(view.pid).ppid()
        summary = await asyncio.wait_for(supervisor.wait(), 180)
        assert summary.outcome is RunOutcome.SUCCEEDED
        assert local.warm_pools is not None and local.warm_pools.pools == (pool,)
        assert pids and set(pids.values()) == {pool.pid}, pids
    finally:
        await session.close()
