"""A worker's host cut off, on a lab of real hosts (tests/launch/netfaults.py), with
``restart: {policy: on-failure}``:

- cut for 20 s (the ps's link paced until the controller hears from the host again, so that
  the run is still training then): it is unreachable, not failed; the run ends exit 0, and
  the tasks on the other hosts are never stopped;
- cut past its lease: its worker stops itself; once the host is back (one notice) it restarts,
  forked again from the host's warm pool;
- cut for good: its task stops itself within its lease, the run fails once the host was
  unreachable for ``network: unreachable_timeout``, saying so, and once the link is back
  nothing of the run is left on that host.

Each run reports what it measured (link back to stepping again) on stdout (``pytest -s``)."""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest

from tests.launch.netfaults import (
    CUT,
    PACE,
    PACED_STEPS,
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
from tests.support.netlab import NetLab
from tests.support.netlab_fixture import MakeLab

pytestmark = [pytest.mark.integration, pytest.mark.timeout(420)]
__all__ = ["controllers"]  # the fixture, used by name


def test_a_worker_host_cut_off_for_20_s_is_unreachable_and_the_run_ends_well(
        netlab: MakeLab, tmp_path: Path, controllers: list[Controller]) -> None:
    lab = netlab(3)
    lab.cap("h0", PACE)
    controller = start(controllers, lab, tmp_path, {"lease": 30, "unreachable_timeout": 120}, PACED_STEPS)
    stepping(controller, "worker1")
    back = cut_for(lab, "h2", CUT)
    # Still paced until the controller has heard from h2 again (some seconds after the link's
    # return): worker1 may have trained on through the cut, and the run must not end first.
    wait_until(lambda: "answers again" in controller.text() or "reconnected" in controller.text()
               or controller.process.poll() is not None, 60, lambda: controller.text()[-3000:])
    lab.uncap("h0")
    code = controller.finish()
    text = controller.text()
    assert code == 0, text[-4000:]
    assert "host h2" in text and "unreachable: no answer" in text, text[-4000:]
    assert "worker1 | -- unreachable" in text
    assert "answers again" in text or "reconnected" in text, text[-4000:]
    for healthy in ("ps0", "worker0"):
        states = controller.states(healthy)
        assert not {"stopping", "stopped", "failed", "backoff", "unreachable"} & set(states), states
    incidents = [(i["kind"], i["task"], i["reason"]) for i in summary_of(controller)["incidents"]]
    print(f"\nworker host cut {CUT:g} s: exit {code}; {back_in_training(controller, 'worker1', back)}; "
          f"incidents: {incidents}")
    # worker1's links may have timed out (gRPC's 20 s TCP user timeout), or the refill of its
    # input for the step it tried again hung (trainer/loop.py): it is then restarted, once.
    assert [task for _, task, _ in incidents] in ([], ["worker1"]), incidents
    assert trained_after(controller, back), "the run was not still training when worker1's link came back"
    assert "SIGHUP" not in text
    assert_hosts_empty(lab, within=60)


def test_a_worker_host_back_past_its_lease_restarts_its_worker_from_a_new_warm_pool(
        netlab: MakeLab, tmp_path: Path, controllers: list[Controller]) -> None:
    lab = netlab(3)
    lab.cap("h0", PACE)
    controller = start(controllers, lab, tmp_path, {"lease": 6, "unreachable_timeout": 60}, PACED_STEPS)
    stepping(controller, "worker1")
    lab.cut("h2")
    try:  # the controller gives up on the connection once the lease surely ran out
        wait_until(lambda: "have stopped themselves" in controller.text()
                   or controller.process.poll() is not None, 60, lambda: controller.text()[-3000:])
    finally:
        lab.restore("h2")
    text = restarted_to_the_end(lab, controller)
    # The host's pool ended with its connection: the restart on the new one is forked from a
    # new pool (it started cold, with a notice to check that the host's Python runs the pool).
    starts = re.findall(r"^worker1 +\| -- starting \(pid \d+(, warm start)?\)", text, re.M)
    assert starts == [", warm start", ", warm start"], text[-4000:]
    assert "warm start on h2 unavailable" not in text, text[-4000:]
    back = re.findall(r"host h2 (?:answers again|reconnected) after", text)
    assert back == ["host h2 reconnected after"], back
    assert_hosts_empty(lab, within=60)


def test_a_host_cut_for_good_fails_the_run_and_its_task_stops_itself(
        netlab: MakeLab, tmp_path: Path, controllers: list[Controller]) -> None:
    lab = netlab(3)
    lease, limit = 6, 20  # (the shortest limit this lease allows: past lease + 10 s)
    # worker0 trains on alone until the run fails; a target it could reach first (~350 steps/s
    # on a quiet machine) would end the run another way.
    controller = start(controllers, lab, tmp_path, {"lease": lease, "unreachable_timeout": limit},
                       steps=10**7)
    stepping(controller, "worker1")
    assert trainers(lab, "h2")
    lab.cut("h2")
    cut_at = time.monotonic()
    try:
        # Its lease runs out: the task stops itself although no signal can reach it.
        wait_until(lambda: not trainers(lab, "h2"), lease + 15, lambda: trainers(lab, "h2"))
        stopped_after = time.monotonic() - cut_at
        code = controller.finish()
        failed_after = time.monotonic() - cut_at
    finally:
        lab.restore("h2")
    text = controller.text()
    assert code == 1, text[-4000:]
    reason = f"host h2 (root@{lab.hosts['h2'].address}:22) unreachable for more than {limit} s " \
             f"(network: unreachable_timeout)"
    assert reason in text, text[-4000:]
    assert summary_of(controller)["reason"] == reason
    assert "SIGHUP" not in text
    print(f"\nhost cut for good: worker1 stopped itself {stopped_after:.1f} s after the cut "
          f"(lease {lease} s); the run failed {failed_after:.1f} s after it (unreachable_timeout {limit} s)")
    assert_hosts_empty(lab, within=120)  # its sshd sessions end once the link says they are gone


def test_a_worker_host_back_on_the_same_connection_past_its_lease_starts_its_pool_again(
        netlab: MakeLab, tmp_path: Path, controllers: list[Controller]) -> None:
    """A cut as long as the lease: the host's pool and worker stop themselves, and the link is
    back before the controller gives up on the connection. The restart there forked cold
    (81 s to running on the lab) with a notice to check the pool's Python: it forks warm
    from a pool started again, and the notice says so."""
    lab = netlab(3)
    lab.cap("h0", PACE)
    controller = start(controllers, lab, tmp_path, {"lease": 6, "unreachable_timeout": 60}, PACED_STEPS)
    stepping(controller, "worker1")
    assert trainers(lab, "h2")
    lab.cut("h2")
    try:  # the lease ran out there: no trainer left, neither the pool nor worker1
        wait_until(lambda: not trainers(lab, "h2"), 30, lambda: trainers(lab, "h2"))
    finally:
        lab.restore("h2")
    text = restarted_to_the_end(lab, controller)
    back = re.findall(r"host h2 (?:answers again|reconnected) after", text)
    assert back == ["host h2 answers again after"], back  # the same connection
    starts = re.findall(r"^worker1 +\| -- starting \(pid \d+(, warm start)?\)", text, re.M)
    assert starts == [", warm start", ", warm start"], text[-4000:]
    assert "the warm pool on h2 had ended on its connection; started again" in text, text[-4000:]
    assert "warm start on h2 unavailable" not in text, text[-4000:]
    assert_hosts_empty(lab, within=60)


def restarted_to_the_end(lab: NetLab, controller: Controller) -> str:
    """Once worker1 runs again (its restart after its host's lease ran out), lift the ps
    link's pace and let the run end: its output, after asserting exit 0."""
    wait_until(lambda: controller.text().count("worker1 | -- running") >= 2
               or controller.process.poll() is not None, 120, lambda: controller.text()[-3000:])
    lab.uncap("h0")
    code = controller.finish()
    text = controller.text()
    assert code == 0, text[-4000:]
    return text
