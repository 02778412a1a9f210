"""Leftovers are only ours when their controller is gone: real processes stand in for
controllers (alive, dead, on another machine) and for the tasks they started."""

from __future__ import annotations

import asyncio
import os
import sys
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import psutil
import pytest

from trainer.settings import TrainingSettings
from tui.config.cluster import ClusterConfig, HostSpec, Job, TaskSpec
from tui.core.rundir import RunDirectory
from tui.launch import leftovers
from tui.launch.leftover_search import StopResult
from tui.launch.owner import CONTROLLER_ENV, RUN_ID_ENV, ControllerId, boot_id, lock_run, run_is_locked
from tui.launch.router import Router

SLEEPER = [sys.executable, "-c", "import time; time.sleep(120)"]


class Processes:
    """Sleeping processes started by a test, all killed at its end."""

    def __init__(self) -> None:
        self.started: list[asyncio.subprocess.Process] = []

    async def start(self, **env: str) -> asyncio.subprocess.Process:
        process = await asyncio.create_subprocess_exec(*SLEEPER, env={**os.environ, **env},
                                                       start_new_session=True)
        self.started.append(process)
        return process

    async def controller(self, alive: bool = True) -> ControllerId:
        """The identity of a process standing in for a controller (killed unless ``alive``)."""
        process = await self.start()
        identity = ControllerId(boot_id(), process.pid, psutil.Process(process.pid).create_time())
        if not alive:
            process.kill()
            await process.wait()
        return identity

    async def close(self) -> None:
        for process in self.started:
            if process.returncode is None:
                process.kill()
                await process.wait()


@pytest.fixture
async def processes() -> AsyncIterator[Processes]:
    started = Processes()
    try:
        yield started
    finally:
        await started.close()


def local_config(tmp_path: Path) -> ClusterConfig:
    return ClusterConfig(path=tmp_path / "hosts.yaml", hosts={},
                         tasks=(TaskSpec(Job.PS, 0, "localhost", None),
                                TaskSpec(Job.WORKER, 0, "localhost", None)),
                         training=TrainingSettings(), run_dir=tmp_path / "runs")


@pytest.mark.asyncio
async def test_only_tasks_of_dead_controllers_are_leftovers(tmp_path: Path, processes: Processes) -> None:
    live = await processes.controller()
    dead = await processes.controller(alive=False)
    elsewhere = ControllerId("another-machine", live.pid, live.started)
    reused = ControllerId(live.boot, live.pid, live.started - 100)  # same pid, another process
    runs = tmp_path / "runs"
    tag = uuid.uuid4().hex[:8]
    ids = {name: f"{name}-{tag}" for name in ("live", "dead", "elsewhere-locked", "elsewhere-free", "reused",
                                              "other-folder", "other-folder-live")}
    owners = {"live": live, "dead": dead, "elsewhere-locked": elsewhere, "elsewhere-free": elsewhere,
              "reused": reused, "other-folder": dead, "other-folder-live": live}
    for name, owner in owners.items():
        await processes.start(**{RUN_ID_ENV: ids[name], CONTROLLER_ENV: str(owner)})
    for name in ("live", "dead", "elsewhere-locked", "elsewhere-free", "reused"):
        (runs / ids[name]).mkdir(parents=True)  # this folder's runs; "other-folder*" are another's
    lock = lock_run(runs / ids["elsewhere-locked"])  # as the other machine's controller would
    (runs / ids["elsewhere-free"] / "controller.lock").touch()  # its controller died: unlocked
    router = Router()
    try:
        report = await router.sweep_hosts([HostSpec(name="localhost", address="localhost")])
        mine = {t.run_id: t for t in report.tasks if t.run_id in ids.values()}
        gone = {name for name, run_id in ids.items() if leftovers.controller_gone(mine[run_id], runs)}
        assert gone == {"dead", "elsewhere-free", "reused", "other-folder"}
        lines = await leftovers.sweep(router, local_config(tmp_path), stop=False, runs_root=runs)
        assert f"host localhost: run {ids['live']} is still controlled by controller pid {live.pid}; " \
               "left alone" in lines
        assert not [line for line in lines if ids["live"] in line and "earlier run" in line]
        assert any(f"of earlier run {ids['dead']} is still running" in line for line in lines)
        # Another folder's runs (dead controller or live) are not this run's business.
        assert not [line for line in lines if "other-folder" in line], lines
        stopped = await router.stop_leftovers(HostSpec(name="localhost", address="localhost"),
                                              [mine[ids["dead"]]], grace=2)
        assert [s.result for s in stopped] == [StopResult.STOPPED]
    finally:
        lock.close()
        await router.close()


@pytest.mark.asyncio
@pytest.mark.skipif(os.geteuid() != 0, reason="starts a process as another user")
async def test_another_users_tasks_are_never_listed(tmp_path: Path, processes: Processes) -> None:
    dead = await processes.controller(alive=False)
    runs = tmp_path / "runs"
    run_id = f"theirs-{uuid.uuid4().hex[:8]}"
    (runs / run_id).mkdir(parents=True)  # even with a run directory of that name here
    theirs = await asyncio.create_subprocess_exec(  # (nobody may not run this python)
        "sleep", "120", env={**os.environ, RUN_ID_ENV: run_id, CONTROLLER_ENV: str(dead)}, user="nobody",
        start_new_session=True)
    processes.started.append(theirs)
    router = Router()
    try:
        report = await router.sweep_hosts([HostSpec(name="localhost", address="localhost")])
        assert not [t for t in report.tasks if t.run_id == run_id]
        lines = await leftovers.sweep(router, local_config(tmp_path), stop=False, runs_root=runs)
        assert not [line for line in lines if run_id in line]
    finally:
        await router.close()


def test_a_run_directory_is_locked_while_its_controller_writes_it(tmp_path: Path) -> None:
    directory = RunDirectory.create(tmp_path, "r")
    assert run_is_locked(tmp_path / "r") is True
    assert (tmp_path / "r/controller.lock").read_text().split("/")[1] == str(os.getpid())
    directory.close()
    assert run_is_locked(tmp_path / "r") is False
    assert run_is_locked(tmp_path / "nothing") is None


def test_controller_ids_round_trip() -> None:
    me = ControllerId(boot_id(), os.getpid(), psutil.Process().create_time())
    assert ControllerId.parse(str(me)) == ControllerId(me.boot, me.pid, round(me.started, 2))
    assert ControllerId.parse(str(me)).liveness().value == "alive"  # type: ignore[union-attr]
    assert ControllerId.parse("garbage") is None and ControllerId.parse("a/b/c") is None
