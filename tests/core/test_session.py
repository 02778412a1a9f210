"""The session every front end uses: typed commands carried out against the fake launcher,
leftover findings delivered as notices through the event stream."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from tests.support.fakes import FakeClock, FakeLauncher, Recorder, make_config, start_all
from tui.config.cluster import HostSpec
from tui.core.commands import Relaunch, RestartTask, StartRun, StartTask, StopAll, StopTask
from tui.core.events import Level, Notice, RunOutcome
from tui.core.session import Session
from tui.core.supervisor.lifecycle import Supervisor
from tui.core.task_state import TaskState
from tui.launch.leftover_search import LeftoverTask
from tui.launch.router import SweepReport

S = TaskState


class SweepingRouter(FakeLauncher):
    """The fake launcher, plus a sweep that finds one task of an earlier run."""

    async def sweep_hosts(self, hosts: Iterable[HostSpec], exclude_run_ids: Iterable[str] = ()
                          ) -> SweepReport:
        found = LeftoverTask("localhost", 4242, 4242, "old-run", ("python", "-m", "trainer"))
        return SweepReport(tasks=(found,))


def make(tmp_path: Path) -> tuple[Session, FakeLauncher, Recorder]:
    launcher, recorder = SweepingRouter(), Recorder()
    (tmp_path / "runs" / "old-run").mkdir(parents=True)  # a run of this folder: its tasks are ours
    config = dataclasses.replace(make_config(tmp_path), run_dir=tmp_path / "runs")
    supervisor = Supervisor(config, runs_root=tmp_path / "runs", launcher=launcher,
                            clock=FakeClock())
    supervisor.subscribe(recorder)
    router: Any = launcher
    return Session(supervisor, router=router), launcher, recorder


async def test_typed_commands_drive_the_run_and_leftovers_arrive_as_notices(tmp_path: Path) -> None:
    session, launcher, recorder = make(tmp_path)
    await session.execute(StartRun())
    found, advice = [n for n in recorder.of(Notice) if "leftover" in n.text]
    assert found.level is Level.WARNING and "pid 4242 of earlier run old-run" in found.text
    assert "--stop-leftovers" in advice.text
    await start_all(launcher, ["ps0", "worker0", "worker1"])
    await recorder.state("worker1", S.RUNNING)
    await session.execute(StopTask("worker1"))
    assert recorder.states("worker1")[-2:] == [S.STOPPING, S.STOPPED]
    await session.execute(StartTask("worker1"))
    (await launcher.started("worker1", launch=2)).ready()
    await recorder.state("worker1", S.RUNNING, nth=2)
    await session.execute(RestartTask("worker0"))
    (await launcher.started("worker0", launch=2)).ready()
    await recorder.state("worker0", S.RUNNING, nth=2)
    await session.execute(StopAll())
    summary = await session.supervisor.wait()
    assert summary.outcome is RunOutcome.STOPPED
    await session.execute(Relaunch(session.supervisor.settings))
    assert len([n for n in recorder.of(Notice) if "leftover" in n.text]) == 2  # swept once
    await session.close()
    assert not session.supervisor.is_running
    assert [c.describe() for c in (StartRun(), StopTask("ps0"), Relaunch(session.supervisor.settings))] \
        == ["start the cluster", "stop ps0", "relaunch"]
