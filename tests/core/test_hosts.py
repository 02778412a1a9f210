"""The controller's model of the remote hosts (tui/core/hosts.py) and the progress line both
front ends show (tui.core.events.HostsProgress): every host shown before the first is
contacted, failures and the last host settling at once, other steps a few times a second."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from tests.support.fakes import make_config
from tests.support.netlab_fixture import MakeLab
from tui.config.cluster import ClusterConfig, HostSpec
from tui.core.event_records import to_record
from tui.core.events import HostRow, HostsProgress
from tui.core.host_state import HostState
from tui.core.hosts import HostBoard
from tui.launch.host_steps import HostPhase, HostStep


def remote_config(tmp_path: Path, hosts: int) -> ClusterConfig:
    """``make_config``'s tasks, each on a remote host of its own (h0, h1, ...)."""
    import dataclasses

    config = make_config(tmp_path, num_ps=1, num_workers=hosts - 1)
    specs = {f"h{i}": HostSpec(name=f"h{i}", address=f"10.0.0.{i + 1}") for i in range(hosts)}
    tasks = tuple(dataclasses.replace(task, host=f"h{i}") for i, task in enumerate(config.tasks))
    return dataclasses.replace(config, hosts=specs, tasks=tasks)


def row(name: str, state: HostState, detail: str = "") -> HostRow:
    return HostRow(name, "10.0.0.1", state, detail)


def test_the_line_counts_each_state_and_names_failed_hosts_with_their_reason() -> None:
    rows = (row("h0", HostState.READY), row("h1", HostState.CONNECTING), row("h2", HostState.WAITING),
            row("h3", HostState.FAILED, "unreachable: no SSH answer within 10 s"))
    assert HostsProgress(hosts=rows).line == (
        "hosts: 1/4 ready, 1 connecting, 1 waiting, 1 failed (h3: unreachable: no SSH answer within 10 s)")
    many = tuple(row(f"f{i}", HostState.FAILED, "refused") for i in range(5))
    assert HostsProgress(hosts=many).line == (
        "hosts: 0/5 ready, 5 failed (f0: refused; f1: refused; f2: refused; 2 more)")
    record = to_record(HostsProgress(hosts=rows[:1], t=1.0))
    assert record == {"type": "hosts", "t": 1.0, "hosts": [
        {"name": "h0", "address": "10.0.0.1", "state": "ready", "detail": "", "tasks": [],
        "pool": None, "heard": None}]}


async def test_shown_at_once_then_a_few_times_a_second_and_failures_at_once(tmp_path: Path) -> None:
    shown: list[HostsProgress] = []
    board = HostBoard(remote_config(tmp_path, 3), shown.append, interval=0.2)
    assert [r.tasks for r in board.rows] == [("ps0",), ("worker0",), ("worker1",)]
    board.begin()
    assert [r.state for r in shown[-1].hosts] == [HostState.WAITING] * 3
    board.step(HostStep("h0", HostPhase.CONNECTING))
    board.step(HostStep("h1", HostPhase.CONNECTING))
    assert len(shown) == 1  # within the interval: gathered
    board.step(HostStep("h2", HostPhase.FAILED, "authentication refused: no key"))
    assert len(shown) == 2 and "1 failed (h2: authentication refused: no key)" in shown[-1].line
    board.step(HostStep("h0", HostPhase.PREPARING, "uploading the trainer"))
    while len(shown) < 3:  # the gathered step goes out once the interval has passed
        await asyncio.sleep(0.05)
    assert shown[-1].line == "hosts: 0/3 ready, 1 connecting, 1 preparing, 1 failed (h2: authentication " \
                             "refused: no key)"
    board.step(HostStep("h0", HostPhase.READY))
    board.step(HostStep("h1", HostPhase.READY))  # the last one to settle: shown at once
    assert shown[-1].line.startswith("hosts: 2/3 ready, 1 failed")
    count = len(shown)
    board.step(HostStep("nowhere", HostPhase.READY))  # not a host of this cluster
    board.step(HostStep("h1", HostPhase.READY))  # nothing new
    assert len(shown) == count


def test_local_hosts_are_not_shown(tmp_path: Path) -> None:
    shown: list[HostsProgress] = []
    board = HostBoard(make_config(tmp_path), shown.append)
    board.begin()
    assert board.rows == () and shown == []


def test_the_states_are_one_declared_machine() -> None:
    from tui.core.host_state import TRANSITIONS, can_move

    assert set(TRANSITIONS) == set(HostState)
    assert all(HostState.of(phase).value == phase.value for phase in HostPhase)
    assert can_move(HostState.READY, HostState.UNREACHABLE)
    assert can_move(HostState.UNREACHABLE, HostState.LOST)
    assert can_move(HostState.LOST, HostState.READY)  # reconnected
    # Only a ready host goes out of reach, and only an unreachable one is lost.
    assert not can_move(HostState.PREPARING, HostState.UNREACHABLE)
    assert not can_move(HostState.READY, HostState.LOST)
    assert not can_move(HostState.UNREACHABLE, HostState.CONNECTING)  # (no step while out of reach)


async def test_a_hosts_reach_is_shown_at_once_and_moves_only_as_declared(tmp_path: Path) -> None:
    from tui.core.host_state import HostReach
    from tui.launch.host_steps import HostPool

    shown: list[HostsProgress] = []
    board = HostBoard(remote_config(tmp_path, 3), shown.append, interval=60.0)
    board.begin()
    board.handle(HostReach(host="h0", state=HostState.UNREACHABLE, reason="no answer"))
    assert len(shown) == 1  # a waiting host cannot be out of reach: nothing moved
    for name in ("h0", "h1", "h2"):
        board.step(HostStep(name, HostPhase.READY, pool=HostPool.WARM))
    assert shown[-1].line == "hosts: 3/3 ready"
    count = len(shown)
    board.handle(HostReach(host="h1", state=HostState.UNREACHABLE, reason="no answer for 6 s", heard=100.0))
    assert len(shown) == count + 1, "shown at once, not gathered"
    h1 = shown[-1].hosts[1]
    assert (h1.state, h1.detail, h1.pool, h1.heard) == (HostState.UNREACHABLE, "no answer for 6 s",
                                                        HostPool.WARM, 100.0)
    assert shown[-1].line == "hosts: 2/3 ready, 1 unreachable"
    board.handle(HostReach(host="h1", state=HostState.LOST, reason="past its 30 s lease"))
    assert shown[-1].line == "hosts: 2/3 ready, 1 lost"
    board.handle(HostReach(host="h1", state=HostState.READY, reason="reconnected after 40 s", t=200.0))
    assert (shown[-1].hosts[1].state, shown[-1].hosts[1].heard) == (HostState.READY, 200.0)
    board.handle(HostReach(host="h2", state=HostState.LOST))  # ready -> lost skips unreachable: refused
    assert shown[-1].hosts[2].state is HostState.READY
    record = to_record(HostReach(host="h1", state=HostState.LOST, reason="r", t=1.0))
    assert record == {"type": "host_reach", "host": "h1", "state": "lost", "reason": "r", "heard": None,
                      "t": 1.0}


async def test_a_step_costs_the_same_however_many_hosts(tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """The board's work per step does not grow with the hosts: a step looks at its own host
    only (counted, not timed: the looks at a state's ``settled``, the same per step at 4 and
    at 64 hosts, and no more than the old and the new state's)."""
    import tui.core.hosts as hosts_module
    from tui.core.host_state import HostState as State

    looks = 0
    real_settled = State.settled.fget  # type: ignore[attr-defined]

    def counted(state: State) -> bool:
        nonlocal looks
        looks += 1
        return bool(real_settled(state))

    monkeypatch.setattr(State, "settled", property(counted))

    def work_per_step(count: int) -> float:
        nonlocal looks
        board = HostBoard(remote_config(tmp_path, count), lambda p: None, interval=3600.0)
        board.begin()
        board._last = hosts_module.time.monotonic()  # within the interval: steps gathered, none sent
        looks = 0
        for i in range(count):
            board.step(HostStep(f"h{i}", HostPhase.CONNECTING))
        if board._pending is not None:
            board._pending.cancel()
        return looks / count

    assert work_per_step(64) == work_per_step(4) <= 2


def test_the_view_model_joins_usage_and_ps_traffic_and_shows_no_unknown_figure() -> None:
    from tui.core.host_table import HostSort, StateChanges, host_lines, sort_lines
    from tui.core.traffic import PsTraffic, TrafficSample, TrafficUpdate
    from tui.core.usage import Usage, UsageSample

    rows = (HostRow("a", "10.0.0.1", HostState.READY, tasks=("ps0",), heard=5.0),
            HostRow("b", "10.0.0.2", HostState.UNREACHABLE, "no answer", ("worker0",), heard=3.0),
            HostRow("c", "10.0.0.3", HostState.READY, tasks=("worker1", "worker2"), heard=4.0))
    usage = UsageSample(t=0.0, hosts={"c": Usage(150.0, 2048)}, heard={"c": 9.0})
    measured = TrafficSample(t=0.0, global_step=1, ps=(PsTraffic("ps0", 10.0, 30.0, 0, 0),))
    traffic = TrafficUpdate(sample=measured, expected_per_sec=())
    lines = host_lines(HostsProgress(hosts=rows), usage, traffic)
    a, b, c = lines
    assert (a.in_per_sec, a.out_per_sec, a.cpu_percent) == (30.0, 10.0, None)
    assert (b.in_per_sec, b.cpu_percent, b.rss_bytes, b.heard) == (None, None, None, 3.0)
    assert (c.cpu_percent, c.rss_bytes, c.heard) == (150.0, 2048, 9.0)  # heard: its latest answer
    assert [h.name for h in sort_lines(lines, HostSort.STATE)] == ["b", "a", "c"]
    assert [h.name for h in sort_lines(lines, HostSort.CPU)] == ["c", "a", "b"]  # unknown last
    assert [h.name for h in sort_lines(lines, HostSort.TRAFFIC)] == ["a", "b", "c"]
    assert [h.name for h in sort_lines(lines, HostSort.HEARD)] == ["b", "a", "c"]  # quietest first
    assert [h.name for h in sort_lines(lines, HostSort.TASKS)] == ["c", "a", "b"]
    assert list(HostSort)[-1].next() is HostSort.NAME

    changes = StateChanges()
    assert changes.reach_lines(HostsProgress(hosts=rows)) == ["host b (10.0.0.2): unreachable: no answer"]
    back = (rows[0], HostRow("b", "10.0.0.2", HostState.READY, "answers again after 7 s"), rows[2])
    assert changes.reach_lines(HostsProgress(hosts=back)) == [
        "host b (10.0.0.2): ready: answers again after 7 s"]
    assert changes.reach_lines(HostsProgress(hosts=back)) == []



def test_hosts_sort_as_a_person_counts_and_read_whole_in_a_line() -> None:
    """By name, h2 before h10 (64 hosts sorted as strings put h10-h19 between h1 and h2); a
    host's line (under the Hosts view's table) has its detail and tasks whole."""
    from tui.core.host_table import HostSort, host_lines, line_text, sort_lines

    names = ["h10", "h2", "node-b3", "h1", "node-a12", "node-a2", "h0"]
    rows = tuple(HostRow(name, f"10.0.0.{i}", HostState.READY) for i, name in enumerate(names))
    lines = host_lines(HostsProgress(hosts=rows))
    assert [h.name for h in sort_lines(lines, HostSort.NAME)] == [
        "h0", "h1", "h2", "h10", "node-a2", "node-a12", "node-b3"]
    gone = host_lines(HostsProgress(hosts=(HostRow("h9", "10.0.0.9", HostState.UNREACHABLE,
                                                   "no answer for 26 s", ("ps3", "worker7")),)))
    assert line_text(gone[0]) == "h9 (10.0.0.9): unreachable: no answer for 26 s; tasks ps3, worker7"
    assert line_text(lines[0]) == "h10 (10.0.0.0): ready; no tasks"

@pytest.mark.integration
@pytest.mark.timeout(300)
async def test_on_the_lab_a_cut_host_is_unreachable_then_ready_in_the_one_model(
        netlab: MakeLab, tmp_path: Path) -> None:
    """Real hosts (tests/support/netlab.py): h2 (worker1's host) cut off during a run is
    unreachable in the hosts' model (its reason, when it was last heard), then ready again
    once its link is back, as the pictures both front ends get say; the others stay ready."""
    import time

    from tests.launch.test_lab_runs import assert_hosts_empty, endless_session
    from tui.core.events import ControllerEvent

    lab = netlab(3)
    session = endless_session(lab, tmp_path)
    pictures: list[HostsProgress] = []
    changed = asyncio.Event()

    def listen(event: ControllerEvent) -> None:
        if isinstance(event, HostsProgress):
            pictures.append(event)
            changed.set()

    async def until(state: HostState, timeout: float) -> HostsProgress:
        deadline = time.monotonic() + timeout
        while not (pictures and {r.name: r.state for r in pictures[-1].hosts}.get("h2") is state):
            changed.clear()
            await asyncio.wait_for(changed.wait(), max(0.1, deadline - time.monotonic()))
        return pictures[-1]

    session.supervisor.subscribe(listen)
    try:
        await session.start()
        ready = await until(HostState.READY, 200)
        assert {r.name: r.state for r in ready.hosts} == {n: HostState.READY for n in ("h0", "h1", "h2")}
        cut_at = time.time()
        lab.cut("h2")
        try:
            out = await until(HostState.UNREACHABLE, 60)
        finally:
            lab.restore("h2")
        h2 = {r.name: r for r in out.hosts}["h2"]
        assert h2.detail.startswith("no answer for") and h2.heard is not None and h2.heard <= cut_at + 1
        assert [r.state for r in out.hosts if r.name != "h2"] == [HostState.READY] * 2
        back = {r.name: r for r in (await until(HostState.READY, 90)).hosts}["h2"]
        assert back.detail.startswith(("answers again", "reconnected")) and back.heard > cut_at
    finally:
        await session.supervisor.stop_all()
        await session.close()
    await asyncio.to_thread(assert_hosts_empty, lab, 60)
