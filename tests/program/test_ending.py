"""What ends the training (:class:`RunEnd`), the hang watch (the sync chief that hangs after
its last step) and the port probe."""

from __future__ import annotations

import socket

from tui.config import Job
from tui.program.base import PsEnding
from tui.program.ending import HangWatch, RunEnd, port_open


def test_without_a_chief_job_every_worker_trains_and_the_ps_end_as_the_program_says() -> None:
    rule = RunEnd.of([Job.PS, Job.WORKER, Job.WORKER, Job.EVALUATOR])
    assert rule is RunEnd.WORKERS
    assert [job for job in Job if rule.trains(job)] == [Job.WORKER]
    assert rule.ending_of(Job.PS, PsEnding.EXITS) is PsEnding.EXITS
    assert rule.ending_of(Job.PS, PsEnding.END_LINE) is PsEnding.END_LINE
    assert rule.ending_of(Job.EVALUATOR, PsEnding.EXITS) is PsEnding.STOP
    assert "after every worker finished" in rule.ended_reason("worker0")
    assert rule.ended_notice("worker0", [("ps0", Job.PS)]) is None


def test_with_a_chief_job_the_chief_alone_trains_and_everything_else_is_stopped() -> None:
    rule = RunEnd.of([Job.PS, Job.CHIEF, Job.WORKER])
    assert rule is RunEnd.CHIEF
    assert [job for job in Job if rule.trains(job)] == [Job.CHIEF]
    for job in (Job.PS, Job.WORKER, Job.EVALUATOR):
        for ending in PsEnding:
            assert rule.ending_of(job, ending) is PsEnding.STOP
    assert rule.ended_reason("chief0") == "ended by the controller: chief0 finished (counted as succeeded)"
    ended = [("ps0", Job.PS), ("evaluator0", Job.EVALUATOR), ("worker1", Job.WORKER), ("worker0", Job.WORKER)]
    assert rule.ended_notice("chief0", ended) == \
        "chief0 finished: ended worker1, worker0, evaluator0, ps0 (counted as succeeded)"
    assert rule.ended_notice("chief0", []) is None


def test_nobody_hangs_before_the_target() -> None:
    watch = HangWatch(target=100, after=5.0)
    watch.started("worker0", 0.0)
    watch.step("worker0", 50, 0, 1.0)
    assert watch.hung(100.0) == [] and watch.next_check(100.0) is None and not watch.reached


def test_a_worker_stuck_after_the_target_is_hung_after_the_grace() -> None:
    watch = HangWatch(target=100, after=5.0)
    for task in ("worker0", "worker1"):
        watch.started(task, 0.0)
    watch.step("worker1", 98, 0, 9.0)
    watch.step("worker0", 100, 0, 10.0)  # the target: worker0's last step
    watch.step("worker0", 100, 0, 12.0)  # the same step again (the shim's reader) is no progress
    assert watch.reached and watch.next_check(10.0) == 5.0
    assert watch.hung(14.9) == []
    watch.step("worker1", 101, 0, 11.0)
    watch.exited("worker1")
    assert watch.hung(15.0) == ["worker0"]


def test_an_unknown_target_judges_nobody_until_a_task_reports_one() -> None:
    watch = HangWatch(target=0)
    watch.started("chief0", 0.0)
    watch.step("chief0", 10_000, 0, 1.0)
    assert watch.hung(1000.0) == []
    watch.step("chief0", 10_001, 10_000, 2.0)
    assert watch.hung(7.0) == ["chief0"]


async def test_port_probe() -> None:
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        port = listener.getsockname()[1]
        assert await port_open("127.0.0.1", port)
    assert not await port_open("127.0.0.1", port)
