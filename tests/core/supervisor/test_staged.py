"""The staged start (tui/core/supervisor/staged.py): each stage's tasks launched together, one
slow launch holding none of the others, and a stop asked for during a launch stopping what
that launch starts."""

from __future__ import annotations

import asyncio
import dataclasses
import io
import re
import sys
from pathlib import Path

import pytest

from tests.core.supervisor.test_lifecycle import make
from tests.support import assert_no_trainers_left
from tests.support.fakes import start_all
from tui.common.exit_codes import ExitCode
from tui.config.load import load_config
from tui.core.events import RunOutcome
from tui.core.options import RunOptions
from tui.core.supervisor.lifecycle import Supervisor
from tui.core.supervisor.records import SupervisorOptions
from tui.core.task_state import TaskState as S
from tui.headless import run_headless


async def test_a_stage_is_launched_together_a_slow_launch_holding_no_other(tmp_path: Path) -> None:
    supervisor, launcher, _, recorder = make(tmp_path, num_ps=2, num_workers=4, hold=False)
    slow_ps = launcher.gates[("ps0", 1)] = asyncio.Event()
    slow_worker = launcher.gates[("worker1", 1)] = asyncio.Event()
    await supervisor.start()
    await launcher.logged(("held", "ps0"))
    ps1 = await launcher.started("ps1")  # while ps0's launch is still under way
    assert launcher.starts == ["ps1"]
    slow_ps.set()
    ps0 = await launcher.started("ps0")
    ps0.ready()
    ps1.ready()
    (await launcher.started("worker0")).ready()  # the chief, then every other worker at once
    await launcher.logged(("held", "worker1"))
    await launcher.started("worker2")
    await launcher.started("worker3")
    assert "worker1" not in launcher.starts
    slow_worker.set()
    await start_all(launcher, ["worker1", "worker2", "worker3"])
    await recorder.state("worker1", S.RUNNING)
    await supervisor.stop_all()


async def test_with_hold_every_task_is_launched_at_once(tmp_path: Path) -> None:
    supervisor, launcher, _, _ = make(tmp_path, num_ps=2, num_workers=2, hold=True)
    gate = launcher.gates[("ps0", 1)] = asyncio.Event()
    await supervisor.start()
    for name in ("ps1", "worker0", "worker1"):
        await launcher.started(name)
    assert "ps0" not in launcher.starts
    gate.set()
    await launcher.started("ps0")
    await supervisor.stop_all()


async def test_a_stop_during_its_launch_stops_the_task_it_started(tmp_path: Path) -> None:
    supervisor, launcher, _, recorder = make(tmp_path, hold=True)
    gate = launcher.gates[("worker1", 1)] = asyncio.Event()
    await supervisor.start()
    await launcher.logged(("held", "worker1"))
    stopping = asyncio.ensure_future(supervisor.stop_task("worker1"))
    gate.set()
    worker1 = await launcher.started("worker1")
    await stopping
    assert worker1.exited
    await recorder.state("worker1", S.STOPPED)
    summary = await supervisor.stop_all()
    assert summary is not None and summary.outcome is RunOutcome.STOPPED


#: A user's program without the shim: its ps works (busy) or sleeps (idle) for the given
#: seconds before it serves on its port, then serves until it is stopped; its worker ends at once.
SLOW_PS = """
import json, os, socket, sys, time
job, seconds, how = sys.argv[1], float(sys.argv[2]), sys.argv[3]
if job == "ps":
    port = int(json.loads(os.environ["TF_CONFIG"])["cluster"]["ps"][0].rpartition(":")[2])
    end = time.monotonic() + seconds
    if how == "busy":
        while time.monotonic() < end:
            pass
    else:
        time.sleep(seconds)
    server = socket.socket()
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    server.bind(("", port))
    server.listen()
    print("serving", flush=True)
    time.sleep(600)
print("trained", flush=True)
"""


@pytest.mark.integration
@pytest.mark.parametrize("how", ["busy", "idle"])
async def test_a_late_task_still_working_is_given_the_time_again_and_an_idle_one_fails(
        tmp_path: Path, how: str) -> None:
    """On a machine short of CPU a task's start-up can outlast the ready time: one whose
    processes use the CPU when it runs out is given it again, with a notice; one that sits
    idle fails the start as before (a real ps process, sampled through /proc)."""
    program = tmp_path / "slow_ps.py"
    program.write_text(SLOW_PS)
    hosts = tmp_path / "hosts.yaml"
    hosts.write_text(f"program:\n  command: {sys.executable} {program} {{job}} 5 {how}\n  shim: false\n"
                     "cluster: {ps: [localhost:auto], worker: [localhost:auto]}\n")
    config = load_config(hosts)
    runs = tmp_path / "runs"
    supervisor = Supervisor(config, runs_root=runs,
                            options=dataclasses.replace(SupervisorOptions(), ready_timeout=2.0))
    out = io.StringIO()
    code = await run_headless(RunOptions(config=config, runs_root=runs), supervisor=supervisor,
                              out=out, err=out, handle_signals=False)
    text = out.getvalue()
    if how == "busy":
        assert code is ExitCode.OK, text[-3000:]
        assert re.search(r"ps0 .*not ready after 2 s but still working \(\d+\.\d\d cores\): given 2 s more",
                         text), text[-3000:]
        assert "worker0 | trained" in text
    else:
        assert code is not ExitCode.OK, text[-3000:]
        assert "start failed: ps0 did not report ready within 2 s" in text, text[-3000:]
        assert "still working" not in text
    assert_no_trainers_left(runs)
