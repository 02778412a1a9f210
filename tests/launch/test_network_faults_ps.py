"""A ps's host cut off, on a lab of real hosts (tests/launch/netfaults.py), with
``restart: {policy: on-failure}``: cut for 20 s, less than its lease but longer than TCP's
retransmissions back off to, the ps carries on (its lease renewed once the link is back) and
the run ends exit 0; cut past its lease, the cluster restarts once from its checkpoint when
the host is back.

Each run reports what it measured (link back to stepping again) on stdout (``pytest -s``)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tests.launch.netfaults import (
    CUT,
    PS_CUT_STEPS,
    Controller,
    back_in_training,
    controllers,
    cut_for,
    start,
    stepping,
    summary_of,
    trained_after,
    trainers,
)
from tests.launch.test_lab_runs import assert_hosts_empty
from tests.support import wait_until
from tests.support.netlab_fixture import MakeLab

pytestmark = [pytest.mark.integration, pytest.mark.timeout(420)]
__all__ = ["controllers"]  # the fixture, used by name


def test_a_ps_host_cut_for_20_s_keeps_its_ps_and_the_run_ends_well(
        netlab: MakeLab, tmp_path: Path, controllers: list[Controller]) -> None:
    lab = netlab(3)
    # Cut 20 s, lease 25 s. With TCP's own backoff (200 ms doubling: a beat lost at the cut's
    # start resent 6.2, 12.6 and 25.4 s after it was first sent) the first beat after the cut
    # reaches the host past the lease, counted from the last beat before the cut: the ps
    # stopped itself although the link had been back for 5 s, and the cluster restarted. The
    # workers' own links to the ps may time out (gRPC's 20 s TCP user timeout): each is then
    # restarted, once.
    controller = start(controllers, lab, tmp_path, {"lease": 25, "unreachable_timeout": 120}, PS_CUT_STEPS)
    stepping(controller, "worker1")
    back = cut_for(lab, "h0", CUT)
    code = controller.finish()
    text = controller.text()
    assert code == 0, text[-4000:]
    assert "host h0" in text and "unreachable: no answer" in text, text[-4000:]
    incidents = [(i["kind"], i["task"], i["reason"]) for i in summary_of(controller)["incidents"]]
    answered = [e["t"] for e in controller.events()
                if e["type"] == "notice" and "host h0 answers again" in e["text"]]
    after = [t for task in ("worker0", "worker1") for t, _ in controller.steps(task, after=back)]
    print(f"\nps host cut {CUT:g} s (lease 25 s): host answers "
          + (f"{answered[0] - back:.1f} s" if answered else "never")
          + " after the link's return; a worker stepping "
          + (f"{min(after) - back:.1f} s after it" if after else "never again")
          + f"; {back_in_training(controller, 'worker0', back)}; incidents: {incidents}")
    assert answered, text[-4000:]
    # TCP resends within RTO_MAX of the link's return; the keeper answers at once.
    assert answered[0] - back < 5, answered[0] - back
    assert not {"failed", "stopped", "backoff"} & set(controller.states("ps0")), controller.states("ps0")
    restarted = [task for _, task, _ in incidents]
    assert len(restarted) == len(set(restarted)) and set(restarted) <= {"worker0", "worker1"}, incidents
    assert trained_after(controller, back), "the run was not still training when the ps's link came back"
    # Every task ended by itself, none by the controller past the target: a worker whose step
    # in flight at the cut never returned (its connection dead at the ps's end, the reset lost
    # with the link) made no step again and was ended so, counted as succeeded (1 run in 4
    # without the step's deadline, trainer/loop.py); when both workers' steps hung, the run
    # timed out.
    assert sorted((t["name"], t["exit_code"]) for t in summary_of(controller)["tasks"]) == \
        [("ps0", 0), ("worker0", 0), ("worker1", 0)], text[-4000:]
    assert "SIGHUP" not in text
    assert_hosts_empty(lab, within=60)


def test_a_ps_host_cut_past_its_lease_restarts_the_cluster_once_back(
        netlab: MakeLab, tmp_path: Path, controllers: list[Controller]) -> None:
    lab = netlab(3)
    lease = 6
    controller = start(controllers, lab, tmp_path, {"lease": lease, "unreachable_timeout": 120}, PS_CUT_STEPS)
    stepping(controller, "worker1")
    lab.cut("h0")
    try:
        wait_until(lambda: not trainers(lab, "h0"), lease + 15, lambda: trainers(lab, "h0"))
        # The controller gives up on the connection once the lease surely ran out.
        wait_until(lambda: "have stopped themselves" in controller.text(), 30,
                   lambda: controller.text()[-3000:])
    finally:
        back = time.time()
        lab.restore("h0")
    code = controller.finish()
    text = controller.text()
    assert code == 0, text[-4000:]
    incidents = [(i["kind"], i["task"], i["reason"]) for i in summary_of(controller)["incidents"]]
    # Once: a worker's own restart, when the ps's loss explained its failure late, is stopped
    # by it, not launched again beside it.
    assert [(kind, task) for kind, task, _ in incidents].count(("cluster_restart", "ps0")) == 1, incidents
    assert trained_after(controller, back), "the run was not still training when the ps's link came back"
    assert "SIGHUP" not in text
    print(f"\nps host cut past its {lease} s lease: exit {code}; "
          f"{back_in_training(controller, 'worker0', back)}; incidents: {incidents}")
    assert_hosts_empty(lab, within=60)
