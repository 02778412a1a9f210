"""The Slurm launcher against the real test Slurm, with the stand-in trainer (no TensorFlow) so
the scheduling, signals and failures are what takes the time: a killed worker restarted in the
same allocation, a SIGKILLed controller leaving nothing in squeue, a pending allocation given
up with its reason, a partition Slurm does not know refused, Ctrl-C releasing the allocation
(or withdrawing a request still pending)."""

from __future__ import annotations

import asyncio
import json
import os
import signal
from pathlib import Path

import pytest

from tests.support.clirun import (
    all_running,
    kill_all,
    read_json_until,
    start_controller,
    tagged_env,
    wait_no_survivors,
)
from tests.support.slurm import SlurmCluster
from tests.support.slurm_helpers import (
    fake_env,
    occupy_the_node,
    our_jobs,
    run_controller,
    slurm_hosts,
    wait_no_clients,
    wait_no_jobs,
)

pytestmark = [pytest.mark.slurm, pytest.mark.timeout(120)]

TASKS = ("ps0", "worker0", "worker1")
#: A SIGKILLed controller's job is gone from squeue within this many seconds: its holder ends
#: at once (the pipe closes), slurmctld then ends the job and forgets it (measured: about 3 s
#: with this test Slurm's KillWait=2; a site's KillWait adds to it).
SIGKILL_BOUND = 10.0


async def test_a_killed_worker_is_restarted_in_the_same_allocation(slurm: SlurmCluster,
                                                                   tmp_path: Path) -> None:
    hosts = slurm_hosts(tmp_path / "hosts.yaml", restart={"policy": "on-failure", "backoff": 0.2})
    tag, env = tagged_env(**fake_env(tmp_path / "fake", FAKE_STEPS="60", FAKE_STEP_DELAY="0.1"))
    process = await start_controller(["--json", str(hosts)], env, tmp_path, fake=True)
    try:
        records = await read_json_until(process, all_running(TASKS), 60)
        pids = {r["task"]: r["pid"] for r in records if r.get("type") == "task_state" and r.get("pid")}
        os.kill(pids["worker1"], signal.SIGKILL)  # the step's task, on this machine's node
        out, _ = await asyncio.wait_for(process.communicate(), 90)
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
        kill_all(await wait_no_survivors(tag, 10))
    text = out.decode(errors="replace")
    assert process.returncode == 0, text[-3000:]
    later = [json.loads(line) for line in text.splitlines() if line.startswith("{")]
    worker1 = [(r["old"], r["new"]) for r in later
               if r.get("type") == "task_state" and r["task"] == "worker1"]
    assert ("backoff", "starting") in worker1 and worker1[-1][1] == "succeeded", worker1
    started = next(r for r in records if r.get("type") == "run_started")
    # The task's node and job id, as the task table and the headless lines show them.
    assert all(t["placed"].startswith("hpc/localhost job ") for t in started["tasks"]), started
    wait_no_jobs(slurm, 5)


async def test_a_sigkilled_controller_leaves_no_job_in_squeue(slurm: SlurmCluster, tmp_path: Path) -> None:
    hosts = slurm_hosts(tmp_path / "hosts.yaml")
    tag, env = tagged_env(**fake_env(tmp_path / "fake", FAKE_FOREVER="*", FAKE_PS_STAY="*"))
    process = await start_controller(["--json", str(hosts)], env, tmp_path, fake=True)
    try:
        await read_json_until(process, all_running(TASKS), 60)
        assert our_jobs(slurm), "the run has no job in squeue"
        process.kill()
        await process.wait()
        took = await asyncio.to_thread(wait_no_jobs, slurm, SIGKILL_BOUND)
        left = await wait_no_survivors(tag, 5)
        clients = await asyncio.to_thread(wait_no_clients, tag, 5)
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
    kill_all(left + clients)
    assert not left, f"tasks outlived the job: {left}"
    assert not clients, f"Slurm clients outlived the controller: {clients}"
    print(f"job gone from squeue {took:.1f} s after the controller's SIGKILL")


async def test_a_pending_allocation_is_reported_and_given_up(slurm: SlurmCluster, tmp_path: Path) -> None:
    blocker = occupy_the_node(slurm)  # the controller's job pends with reason Resources
    try:
        hosts = slurm_hosts(tmp_path / "hosts.yaml", entry={"pending_timeout": 4})
        code, out = await run_controller(["--no-ui", str(hosts)], tmp_path, fake=True,
                                         **fake_env(tmp_path / "fake"))
    finally:
        slurm.run("scancel", blocker)
    assert code == 2, out
    assert "waiting for its allocation (PENDING/Resources)" in out, out
    assert f"error: host hpc ({hosts}:3:5)" in out and "still pending after 4 s" in out, out
    assert not our_jobs(slurm), "the pending job was not cancelled"


async def test_a_partition_slurm_does_not_know_is_refused(slurm: SlurmCluster, tmp_path: Path) -> None:
    hosts = slurm_hosts(tmp_path / "hosts.yaml", entry={"partition": "nosuch"})
    code, out = await run_controller(["--no-ui", str(hosts)], tmp_path, fake=True,
                                     **fake_env(tmp_path / "fake"))
    assert code == 2, out
    assert f"error: host hpc ({hosts}:4:16)" in out, out  # at the partition's name
    assert "Slurm refused the allocation: invalid partition specified: nosuch" in out, out
    assert "Traceback" not in out
    assert not our_jobs(slurm)


async def test_more_nodes_than_the_partition_has_are_refused_at_once(slurm: SlurmCluster,
                                                                   tmp_path: Path) -> None:
    # Slurm queues such a job (PENDING/PartitionNodeLimit) instead of refusing it; waiting
    # would only end at pending_timeout.
    hosts = slurm_hosts(tmp_path / "hosts.yaml", entry={"nodes": 2})
    code, out = await run_controller(["--no-ui", str(hosts)], tmp_path, fake=True,
                                     **fake_env(tmp_path / "fake"))
    assert code == 2, out
    assert f"error: host hpc ({hosts}:5:12)" in out and "PENDING/PartitionNodeLimit" in out, out
    assert not our_jobs(slurm)


async def test_ctrl_c_stops_the_tasks_and_releases_the_allocation(slurm: SlurmCluster,
                                                                  tmp_path: Path) -> None:
    hosts = slurm_hosts(tmp_path / "hosts.yaml")
    tag, env = tagged_env(**fake_env(tmp_path / "fake", FAKE_FOREVER="*", FAKE_PS_STAY="*"))
    process = await start_controller(["--json", str(hosts)], env, tmp_path, fake=True)
    try:
        await read_json_until(process, all_running(TASKS), 60)
        process.send_signal(signal.SIGINT)
        await asyncio.wait_for(process.communicate(), 60)
        # Released by the time the controller exits: the job is at most completing.
        assert all(" RUNNING " not in line for line in our_jobs(slurm)), our_jobs(slurm)
        await asyncio.to_thread(wait_no_jobs, slurm, SIGKILL_BOUND)
        left = await wait_no_survivors(tag, 5)
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
    kill_all(left)
    assert process.returncode == 130 and not left


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGKILL])
async def test_a_pending_request_ends_with_its_controller(slurm: SlurmCluster, tmp_path: Path,
                                                          signum: signal.Signals) -> None:
    blocker = occupy_the_node(slurm)
    try:
        hosts = slurm_hosts(tmp_path / "hosts.yaml")
        tag, env = tagged_env(**fake_env(tmp_path / "fake"))
        process = await start_controller(["--json", str(hosts)], env, tmp_path, fake=True)
        try:
            await read_json_until(process, lambda r: "waiting for its allocation" in r.get("text", ""), 30)
            process.send_signal(signum)
            await asyncio.wait_for(process.communicate(), 30)
        finally:
            if process.returncode is None:
                process.kill()
                await process.wait()
        # Ctrl-C: the controller withdraws the request; SIGKILL: its watchdog SIGTERMs salloc.
        await asyncio.to_thread(wait_no_jobs, slurm, SIGKILL_BOUND)
        clients = await asyncio.to_thread(wait_no_clients, tag, 5)
    finally:
        slurm.run("scancel", blocker)
    kill_all(clients)
    assert process.returncode == (130 if signum is signal.SIGINT else -9)
    assert not clients, f"Slurm clients outlived the controller: {clients}"
