"""Hosts that stop answering (tui.core.supervisor.unreachable), with a fake clock and a fake
link per host: a task out of reach is UNREACHABLE, not failed; it carries on when its host
answers again; past its lease the connection is dropped, the host reconnected, and the
restart policy judges the task; past ``unreachable_timeout`` the run fails, saying why.
Healthy tasks elsewhere are never stopped for it. (The real thing, on namespace hosts, is in
tests/launch/test_network_faults.py.)"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Coroutine, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from tests.support.fakes import (
    FakeClock,
    FakeLauncher,
    FakeProcess,
    Recorder,
    finish_cleanly,
    make_config,
    running,
)
from tui.config.cluster import HostSpec, RestartMode, RestartPolicy, TaskSpec
from tui.config.network import LEASE_MARGIN, NetworkSettings
from tui.core.events import IncidentKind, Notice, RunOutcome, RunSummary, TaskHint
from tui.core.hints import SIGKILL_HINT
from tui.core.supervisor.lifecycle import Supervisor
from tui.core.supervisor.unreachable import FIRST_RETRY
from tui.core.task_state import TaskState
from tui.launch.errors import HostError, HostFailure

S = TaskState
NAMES = ["ps0", "worker0", "worker1"]
FAR = "far"
LEASE = 20.0
TIMEOUT = 120.0


class FakeLink:
    """A host's link whose silences the test decides."""

    def __init__(self, launcher: LinkedLauncher) -> None:
        self.launcher = launcher
        self.silent: float | None = None
        self.reachable = True
        self.abandoned = 0
        self.reconnects = 0
        self.hangs = False  # a reconnection that never answers (a connect timeout, stretched)
        self._changed = asyncio.Event()

    host = FAR
    where = "far:22"
    lease = LEASE

    def silent_for(self) -> float | None:
        return self.silent

    def changed(self) -> Coroutine[Any, Any, bool]:
        return self._changed.wait()

    def _flip(self) -> None:
        event, self._changed = self._changed, asyncio.Event()
        event.set()

    def go_silent(self, seconds: float) -> None:
        self.silent, self.reachable = seconds, False
        self._flip()

    def answer(self) -> None:
        self.silent, self.reachable = None, True
        self._flip()

    def abandon(self) -> None:
        self.abandoned += 1
        for process in self.launcher.on_far():
            process.lose(HostError(FAR, self.where, HostFailure.CONNECTION_LOST, "the connection closed"))

    async def reconnect(self) -> None:
        self.reconnects += 1
        if self.hangs:
            await asyncio.Event().wait()
        if not self.reachable:
            raise HostError(FAR, self.where, HostFailure.UNREACHABLE, "no SSH answer within 10 s")
        if self.silent is not None:
            self.answer()
            # As with the SSH launcher, whose new keeper answers before the reconnection
            # returns: the link's watcher hears of it first.
            for _ in range(10):
                await asyncio.sleep(0)


class LinkedLauncher(FakeLauncher):
    """The fake launcher, with host ``far`` behind a :class:`FakeLink`; a stop of a task there
    while it is silent gives up on the connection, as the SSH launcher does."""

    def __init__(self) -> None:
        super().__init__()
        self.far_link = FakeLink(self)
        self.stop_lost: list[str] = []

    def link(self, host: HostSpec) -> FakeLink | None:
        return self.far_link if host.name == FAR else None

    def on_far(self) -> list[FakeProcess]:
        return [p for runs in self.processes.values() for p in runs if p.task.host == FAR and not p.exited]

    async def start(self, task: TaskSpec, host: HostSpec, argv: Sequence[str],
                    env: Mapping[str, str], cwd: str | None) -> FakeProcess:
        process = await super().start(task, host, argv, env, cwd)
        if task.host == FAR:
            link = self.far_link
            original = process.terminate

            async def terminate() -> None:
                if link.silent is not None:
                    link.abandon()
                else:
                    await original()

            process.terminate = terminate  # type: ignore[method-assign]
        return process

    async def find_leftovers(self, host: HostSpec, exclude_run_ids: object = ()) -> list[object]:
        return []

    async def stop_leftovers(self, host: HostSpec, tasks: object, grace: float = 0) -> list[object]:
        return []


def make(tmp_path: Path, far: str, policy: RestartMode = RestartMode.ON_FAILURE
         ) -> tuple[Supervisor, LinkedLauncher, FakeClock, Recorder]:
    config = make_config(tmp_path, steps=1000)
    tasks = tuple(dataclasses.replace(t, host=FAR) if t.name == far else t for t in config.tasks)
    config = dataclasses.replace(config, tasks=tasks, network=NetworkSettings(TIMEOUT, LEASE),
                                 restart=RestartPolicy(policy, max_restarts=2, backoff=5.0))
    launcher, clock, recorder = LinkedLauncher(), FakeClock(), Recorder()
    supervisor = Supervisor(config, runs_root=tmp_path / "runs", launcher=launcher, clock=clock)
    supervisor.subscribe(recorder)
    return supervisor, launcher, clock, recorder


async def cut_off(tmp_path: Path, far: str, policy: RestartMode = RestartMode.ON_FAILURE, hangs: bool = False
                  ) -> tuple[Supervisor, LinkedLauncher, FakeClock, Recorder, dict[str, FakeProcess]]:
    """A run (:func:`make`) with every task up, whose far host then went silent (``hangs``: its
    connection's calls hang, not fail) until ``far`` was unreachable; each task's process too."""
    supervisor, launcher, clock, recorder = make(tmp_path, far, policy)
    await supervisor.start()
    first = await running(launcher, recorder, NAMES)
    launcher.far_link.hangs = hangs
    launcher.far_link.go_silent(5.0)
    await recorder.state(far, S.UNREACHABLE)
    return supervisor, launcher, clock, recorder, first


async def restarted_to_the_end(supervisor: Supervisor, launcher: LinkedLauncher, recorder: Recorder,
                               first: dict[str, FakeProcess], name: str) -> RunSummary:
    """``name`` launched again and up, then the run ended cleanly; its summary (succeeded)."""
    second = await launcher.started(name, launch=2)
    second.ready()
    await recorder.state(name, S.RUNNING, nth=2)
    await finish_cleanly({**first, name: second})
    summary = await supervisor.wait()
    assert summary.outcome is RunOutcome.SUCCEEDED, summary.reason
    return summary


def notice(recorder: Recorder, fragment: str) -> str:
    found = [e.text for e in recorder.of(Notice) if fragment in e.text]
    assert found, [e.text for e in recorder.of(Notice)]
    return found[-1]


def never_stopped(recorder: Recorder, names: list[str]) -> None:
    for name in names:
        assert S.STOPPING not in recorder.states(name), (name, recorder.states(name))


async def test_a_host_that_answers_again_within_the_lease_finds_its_task_carrying_on(tmp_path: Path) -> None:
    supervisor, launcher, clock, recorder, processes = await cut_off(tmp_path, "worker1")
    link = launcher.far_link
    changed = await recorder.state("worker1", S.UNREACHABLE)
    assert "does not answer" in changed.reason and changed.exit_code is None
    text = notice(recorder, "unreachable: no answer for 5 s")
    assert "worker1 keeps running there" in text and f"{LEASE:g} s" in text and "unreachable_timeout" in text
    clock.advance(12.0)
    link.answer()
    await recorder.state("worker1", S.RUNNING, nth=2)
    assert "answers again after 17 s; worker1 carries on" in notice(recorder, "answers again")
    # Both are about the host: a front end showing the warning for a while takes it down
    # once the cause is gone (the app's toast stayed its full time after "answers again").
    (warned,) = [e for e in recorder.of(Notice) if "unreachable: no answer" in e.text]
    (back,) = [e for e in recorder.of(Notice) if "answers again" in e.text]
    assert warned.about == back.about == f"host {link.host}"
    clock.advance(LEASE + LEASE_MARGIN)  # the give-up of that silence must not fire now
    await asyncio.sleep(0)
    assert link.abandoned == 0
    await finish_cleanly(processes)
    summary = await supervisor.wait()
    assert summary.outcome is RunOutcome.SUCCEEDED, summary.reason
    assert launcher.starts == NAMES and not summary.incidents
    never_stopped(recorder, ["ps0", "worker0"])


async def test_a_task_lost_past_its_lease_is_restarted_once_its_host_is_back(tmp_path: Path) -> None:
    supervisor, launcher, clock, recorder, first = await cut_off(tmp_path, "worker1")
    link = launcher.far_link
    await clock.sleeping(LEASE + LEASE_MARGIN - 5.0)
    clock.advance(LEASE + LEASE_MARGIN - 5.0)
    await recorder.wait_for(lambda e: isinstance(e, Notice) and "stopped themselves" in e.text)
    assert link.abandoned == 1
    await clock.sleeping(FIRST_RETRY)  # the first reconnection failed: the backoff
    assert link.reconnects == 1
    link.reachable = True
    clock.advance(FIRST_RETRY)
    failed = await recorder.state("worker1", S.FAILED)
    assert failed.exit_code is None
    assert "lost: its connection closed while host far was unreachable" in failed.reason
    assert "SIGHUP" not in failed.reason and "-1" not in failed.reason
    await clock.sleeping(5.0)  # the restart policy's backoff
    clock.advance(5.0)
    summary = await restarted_to_the_end(supervisor, launcher, recorder, first, "worker1")
    assert [i.kind for i in summary.incidents] == [IncidentKind.TASK_RESTART]
    never_stopped(recorder, ["ps0", "worker0"])
    assert launcher.starts == [*NAMES, "worker1"]
    # One notice of its return: the new connection's first answer is the reconnection's news
    # (seen on the lab: "host h2 answers again after 30 s", then "host h2 reconnected after 30 s").
    back = [e.text for e in recorder.of(Notice) if "answers again" in e.text or "reconnected" in e.text]
    assert len(back) == 1 and "reconnected" in back[0], back


async def test_a_ps_lost_past_its_lease_restarts_the_cluster(tmp_path: Path) -> None:
    supervisor, launcher, clock, recorder, _ = await cut_off(tmp_path, "ps0")
    assert S.STOPPING not in recorder.states("worker0")  # nothing stopped while out of reach
    launcher.far_link.reachable = True  # back just as the lease runs out
    await clock.sleeping(LEASE + LEASE_MARGIN - 5.0)
    clock.advance(LEASE + LEASE_MARGIN - 5.0)
    await recorder.state("ps0", S.FAILED)
    await recorder.state("worker0", S.STOPPED)  # the cluster restart stops them, in order
    await clock.sleeping(5.0)
    clock.advance(5.0)
    second = await running(launcher, recorder, NAMES, launch=2)
    await finish_cleanly(second)
    summary = await supervisor.wait()
    assert summary.outcome is RunOutcome.SUCCEEDED, summary.reason
    assert [i.kind for i in summary.incidents] == [IncidentKind.CLUSTER_RESTART]


async def test_a_worker_that_fails_while_its_ps_host_does_not_answer_restarts_once_it_answers(
        tmp_path: Path) -> None:
    # Started during the cut, it would only fail again (seen on the lab: a ps host cut for
    # 20 s, a worker restarted twice).
    supervisor, launcher, clock, recorder, first = await cut_off(tmp_path, "ps0")
    link = launcher.far_link
    first["worker1"].exit(1)
    await recorder.state("worker1", S.BACKOFF)
    await clock.sleeping(5.0)  # the restart policy's backoff
    clock.advance(5.0)
    await recorder.wait_for(lambda e: isinstance(e, Notice) and e.task == "worker1"
                            and "the restart waits for host far (ps0), which does not answer" in e.text)
    clock.advance(10.0)  # the backoff long past: still not while its ps's host is silent
    for _ in range(20):
        await asyncio.sleep(0)
    assert launcher.starts == NAMES and recorder.states("worker1")[-1] is S.BACKOFF
    link.answer()
    summary = await restarted_to_the_end(supervisor, launcher, recorder, first, "worker1")
    assert [(i.kind, i.task) for i in summary.incidents] == [(IncidentKind.TASK_RESTART, "worker1")]
    never_stopped(recorder, ["ps0", "worker0"])


@pytest.mark.parametrize("hangs", [False, True])
async def test_a_host_unreachable_past_the_limit_fails_the_run_saying_so(tmp_path: Path, hangs: bool) -> None:
    supervisor, launcher, clock, recorder, _ = await cut_off(tmp_path, "worker1", hangs=hangs)
    elapsed = 5.0
    while elapsed < TIMEOUT + 5:
        step = 10.0
        await asyncio.sleep(0.01)
        clock.advance(step)
        elapsed += step
        if not supervisor.is_running or supervisor._run.stop_requested:  # type: ignore[union-attr]
            break
        await asyncio.sleep(0)
    assert elapsed <= TIMEOUT + 10.0, elapsed  # on time, even while an attempt hangs
    # (The other tasks exit as stopped once the run fails.)
    for name in ("ps0", "worker0"):
        await recorder.state(name, S.STOPPED)
    summary = await supervisor.wait()
    assert summary.outcome is RunOutcome.FAILED
    assert summary.reason == (f"host far (far:22) unreachable for more than {TIMEOUT:g} s "
                              f"(network: unreachable_timeout)")
    lost = next(t for t in summary.tasks if t.name == "worker1")
    assert lost.exit_code is None and "SIGHUP" not in lost.reason
    assert launcher.far_link.reconnects == 1 if hangs else launcher.far_link.reconnects >= 3  # with backoff
    assert launcher.starts == NAMES


async def test_an_exit_that_came_while_out_of_reach_says_so_and_is_restarted(tmp_path: Path) -> None:
    supervisor, launcher, clock, recorder, first = await cut_off(tmp_path, "worker1")
    clock.advance(LEASE)
    first["worker1"].exit(-15)  # its lease ran out; the exit came in as the link came back
    failed = await recorder.state("worker1", S.FAILED)
    assert failed.reason == ("was killed by SIGTERM while its host was unreachable: its 20 s lease had "
                             "run out, so it stopped itself")
    await recorder.state("worker1", S.BACKOFF)
    launcher.far_link.answer()
    await recorder.wait_for(lambda e: isinstance(e, Notice) and "answers again" in e.text)
    await clock.sleeping(5.0)
    clock.advance(5.0)
    await restarted_to_the_end(supervisor, launcher, recorder, first, "worker1")
    never_stopped(recorder, ["ps0", "worker0"])


@pytest.mark.parametrize("code", [-9, -15])
async def test_a_task_whose_lease_ran_out_gets_no_hint_of_its_exit_code(tmp_path: Path, code: int) -> None:
    supervisor, _, clock, recorder, first = await cut_off(tmp_path, "worker1", policy=RestartMode.NEVER)
    clock.advance(LEASE)
    first["worker1"].exit(code)  # its watcher's TERM, or the KILL 5 s after a TERM it ignored
    failed = await recorder.state("worker1", S.FAILED)
    assert failed.reason.endswith("while its host was unreachable: its 20 s lease had run out, so it "
                                  "stopped itself"), failed.reason
    # Seen on the lab: "hint: killed by SIGKILL: out of memory?" beside that reason.
    assert [h.hint for h in recorder.of(TaskHint) if h.task == "worker1"] == []
    await asyncio.wait_for(supervisor.stop_all(), 10)


async def test_a_sigkill_while_out_of_reach_within_the_lease_keeps_its_hint(tmp_path: Path) -> None:
    supervisor, _, _, recorder, first = await cut_off(tmp_path, "worker1", policy=RestartMode.NEVER)
    first["worker1"].exit(-9)  # not its lease: something on the host killed it
    failed = await recorder.state("worker1", S.FAILED)
    assert failed.reason == "was killed by SIGKILL while its host was unreachable", failed.reason
    assert [h.hint for h in recorder.of(TaskHint) if h.task == "worker1"] == [SIGKILL_HINT]
    await asyncio.wait_for(supervisor.stop_all(), 10)


async def test_stopping_a_run_while_a_host_is_out_of_reach_does_not_wait_for_it(tmp_path: Path) -> None:
    supervisor, launcher, _, _, _ = await cut_off(tmp_path, "worker1", policy=RestartMode.NEVER)
    summary = await asyncio.wait_for(supervisor.stop_all(), 10)
    assert summary is not None and summary.outcome is RunOutcome.STOPPED
    lost = next(t for t in summary.tasks if t.name == "worker1")
    assert lost.state is S.STOPPED and "stops itself within its 20 s lease" in lost.reason
    assert launcher.far_link.abandoned == 1 and launcher.far_link.reconnects == 0


@pytest.mark.parametrize("state", [S.STARTING, S.RUNNING])
def test_unreachable_goes_back_to_where_it_was_and_is_active(state: TaskState) -> None:
    from tui.core.task_state import check_task_transition

    check_task_transition("t", state, S.UNREACHABLE)
    check_task_transition("t", S.UNREACHABLE, state)
    assert S.UNREACHABLE.is_active and not S.UNREACHABLE.is_finished
