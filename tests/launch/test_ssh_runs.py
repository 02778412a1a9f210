"""The real trainer (real TensorFlow) on the "remote" hosts: a whole training run through the
supervisor and the router, and a controller that dies under its remote tasks."""

from __future__ import annotations

import asyncio
import importlib.metadata
import json
import signal
import sys
import uuid
from pathlib import Path

import psutil
import pytest
import yaml

from tests.support.ssh import SshServer, describe, kill, read_environ, tagged, wait_nothing_left
from tui.config.load import load_config
from tui.core.events import ControllerEvent, RunOutcome, TaskStateChanged
from tui.core.supervisor.lifecycle import Supervisor
from tui.core.task_state import TaskState
from tui.core.traffic import TrafficMonitor
from tui.launch.owner import RUN_ID_ENV
from tui.launch.router import Router
from tui.launch.ssh.deploy import local_package

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]

REPO = Path(__file__).resolve().parents[2]
CONTROLLER = Path(__file__).resolve().parents[1] / "support" / "ssh_controller.py"
#: Enough steps that the run lasts several of the traffic sampler's 0.2 s intervals (a warm
#: start has the workers stepping within a second; 30 steps were over before a sample).
TRAINING = {"model": "mlp", "dataset": "digits", "steps": 600, "log_every": 100, "hidden_units": 16}


async def test_a_training_run_on_two_remote_hosts(sshd: SshServer, tmp_path: Path) -> None:
    """ps on 127.0.0.2, two workers on 127.0.0.3, all over SSH: exit 0, a complete run
    directory, TensorFlow's version per task, and hosts.yaml values full of shell syntax
    (workdir and env) arrive literally without running anything."""
    trap = tmp_path / "TRAP"
    value = f"$(touch {trap}) ; touch {trap}"
    ps_host = sshd.host("ps-host", sshd.addresses[0], workdir=tmp_path / "ps $(touch TRAP); touch TRAP",
                        env={"T_VALUE": value})
    worker_host = sshd.host("worker-host", sshd.addresses[1], workdir=tmp_path / "workers",
                            env={"T_VALUE": value})
    hosts_yaml = tmp_path / "hosts.yaml"
    hosts_yaml.write_text(yaml.safe_dump({
        "hosts": {"ps-host": sshd.yaml_entry(ps_host), "worker-host": sshd.yaml_entry(worker_host)},
        "cluster": {"ps": ["ps-host:auto"], "worker": ["worker-host:auto", "worker-host:auto"]},
        "training": TRAINING,
    }))
    config = load_config(hosts_yaml)
    router = Router.for_config(config)
    supervisor = Supervisor(config, runs_root=tmp_path / "runs", launcher=router)
    environments: dict[str, dict[str, str]] = {}
    cwds: dict[str, str] = {}

    def look_at_tasks(event: ControllerEvent) -> None:
        # Each task's environment and directory, read from /proc as soon as it runs.
        if isinstance(event, TaskStateChanged) and event.new is TaskState.RUNNING and event.pid:
            environments[event.task] = read_environ(event.pid)
            cwds[event.task] = psutil.Process(event.pid).cwd()

    supervisor.subscribe(look_at_tasks)
    # The ps's TCP counters, read with ss over the SSH connection to its host.
    traffic = TrafficMonitor(config, router.run_command, interval=0.2)
    supervisor.subscribe(traffic.handle)
    run_id = None
    try:
        report = await router.connect_all(config.host_of(t) for t in config.tasks)
        assert report.ok, report.failures
        assert {h.name: h.tf_version for h in report.hosts} == {
            "ps-host": importlib.metadata.version("tensorflow"),
            "worker-host": importlib.metadata.version("tensorflow")}
        await supervisor.start()
        run_id = supervisor.run_id
        summary = await asyncio.wait_for(supervisor.wait(), 180)
    finally:
        await traffic.close()
        await supervisor.close()
    assert summary.outcome is RunOutcome.SUCCEEDED, summary
    assert summary.global_step >= TRAINING["steps"]
    assert traffic.failure is None and traffic.samples
    assert max(sample.ps[0].sent_total for sample in traffic.samples) > 0
    assert max(sample.ps[0].received_total for sample in traffic.samples) > 0

    run_dir = summary.run_dir
    assert sorted(p.name for p in run_dir.iterdir()) == [
        "config.yaml", "controller.lock", "events.jsonl", "logs", "summary.json", "tasks",
        "traffic.json", "traffic.jsonl"]
    names = ("ps0", "worker0", "worker1")
    assert sorted(p.name for p in (run_dir / "logs").iterdir()) == [f"{n}.log" for n in names]
    records = [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines()]
    ready = {r["task"]: r["event"] for r in records
             if r["type"] == "trainer_event" and r["event"]["event"] == "ready"}
    assert set(ready) == set(names)
    assert {e["tf_version"] for e in ready.values()} == {importlib.metadata.version("tensorflow")}
    assert records[-1]["type"] == "run_finished"

    assert set(environments) == set(names)
    for name, env in environments.items():
        assert env["T_VALUE"] == value
        assert env[RUN_ID_ENV] == run_id
        workdir = ps_host.workdir if name == "ps0" else worker_host.workdir
        assert env["PYTHONPATH"].split(":")[0] == f"{workdir}/{local_package().dirname}"
    assert cwds["ps0"] == str(tmp_path / "ps $(touch TRAP); touch TRAP")
    assert not trap.exists() and not [p for p in tmp_path.rglob("TRAP") if p.is_file()]
    left = await wait_nothing_left(sshd.pid, run_id)
    kill(left)
    assert not left, describe(left)


async def test_remote_tasks_end_when_the_controller_is_killed(sshd: SshServer, tmp_path: Path) -> None:
    """SIGKILL the controller: its SSH connection drops, the remote trainer's stdin closes,
    and the trainer is gone within 5 s."""
    host = sshd.host("remote", sshd.addresses[1], workdir=tmp_path / "work")
    run_id = f"killed-{uuid.uuid4().hex[:8]}"
    process = await asyncio.create_subprocess_exec(
        sys.executable, str(CONTROLLER), json.dumps(sshd.yaml_entry(host)), run_id,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, cwd=REPO)
    try:
        assert process.stdout is not None
        line = await asyncio.wait_for(process.stdout.readline(), 120)
        assert line.startswith(b"loaded "), line + await process.stderr.read()  # type: ignore[union-attr]
        pid = int(line.split()[1])
        trainer = psutil.Process(pid)
        assert "-m trainer" in " ".join(trainer.cmdline())
        process.send_signal(signal.SIGKILL)
        await process.wait()
        gone, alive = await asyncio.to_thread(psutil.wait_procs, [trainer], 5)
        assert gone, f"the remote trainer outlived its controller: {describe(alive)}"
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
    left = await wait_nothing_left(sshd.pid)
    kill(left)
    assert not left, describe(left)
    assert not tagged(run_id)
