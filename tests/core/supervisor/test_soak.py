"""Soak: 20 consecutive start/stop cycles of a local cluster through the real Supervisor and
LocalLauncher (real processes, real ports), with the fast fake trainer standing in for
TensorFlow. Afterwards no task process, controller file descriptor or port is left behind."""

from __future__ import annotations

import asyncio
import socket
from pathlib import Path

import psutil
import pytest

from tests.support import trainer_processes
from tests.support.clirun import FAKE_TRAINER
from tests.support.fakes import make_config
from tui.core.events import ControllerEvent, TaskStateChanged
from tui.core.supervisor.lifecycle import Supervisor
from tui.core.supervisor.records import SupervisorOptions
from tui.core.task_state import TaskState
from tui.launch.owner import RUN_ID_ENV

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

CYCLES = 20
#: Slack for descriptors opened lazily on first use and then kept for the process's life
#: (asyncio's child watcher / self-pipe of the loop's subprocess support, and the like):
#: they appear after the first cycle, not once per cycle, so a leak still shows as 20+.
FD_SLACK = 2


def fake_processes(run_ids: set[str]) -> list[psutil.Process]:
    """Live fake-trainer processes of these runs (tests.support only knows ``-m trainer``)."""
    found = [*trainer_processes(run_ids)]
    for proc in psutil.process_iter(["cmdline", "status"]):
        try:
            if proc.info["status"] == psutil.STATUS_ZOMBIE:
                continue
            if FAKE_TRAINER.name in " ".join(proc.info["cmdline"] or []) \
                    and proc.environ().get(RUN_ID_ENV) in run_ids:
                found.append(proc)
        except psutil.Error:
            continue
    return found


def bindable(port: int) -> bool:
    with socket.socket() as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as gRPC and the trainer do
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


async def test_twenty_start_stop_cycles_leave_nothing_behind(tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAKE_DIR", str(tmp_path))
    monkeypatch.setenv("FAKE_FOREVER", "*")  # the workers train until stopped
    config = make_config(tmp_path)
    names = {task.name for task in config.tasks}
    options = SupervisorOptions(trainer_argv=[str(FAKE_TRAINER)], grace=2.0)
    supervisor = Supervisor(config, runs_root=tmp_path / "runs", options=options)
    running: set[str] = set()
    all_up = asyncio.Event()

    def watch(event: ControllerEvent) -> None:
        if isinstance(event, TaskStateChanged):
            (running.add if event.new is TaskState.RUNNING else running.discard)(event.task)
            if running == names:
                all_up.set()

    supervisor.subscribe(watch)
    me = psutil.Process()
    fds_before = me.num_fds()
    run_ids: set[str] = set()
    ports: set[int] = set()
    try:
        for cycle in range(CYCLES):
            all_up.clear()
            await supervisor.start()
            await asyncio.wait_for(all_up.wait(), 30)
            assert supervisor.run_id is not None
            run_ids.add(supervisor.run_id)
            ports |= {view.port for view in supervisor.tasks()}
            summary = await supervisor.stop_all()
            assert summary is not None, cycle
            assert {t.state for t in summary.tasks} == {TaskState.STOPPED}, (cycle, summary.tasks)
    finally:
        await supervisor.close()
    assert len(run_ids) == CYCLES
    assert fake_processes(run_ids) == []  # stop_all waited for every exit: no polling needed
    fds_after = me.num_fds()
    assert fds_after <= fds_before + FD_SLACK, (fds_before, fds_after)
    assert ports and [p for p in sorted(ports) if not bindable(p)] == []
