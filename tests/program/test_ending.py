"""What ends the training (:class:`RunEnd`), the hang watch (the sync chief that hangs after
its last step), the CPU sample that tells a hung task from a working one, and the port probe."""

from __future__ import annotations

import asyncio
import socket
import subprocess
import sys

from tui.config.cluster import HostSpec, Job
from tui.core.supervisor.busy import CLOCK_TICKS, cores_used, group_cpu_seconds
from tui.launch.local.launcher import LocalLauncher
from tui.program.base import PsEnding
from tui.program.end_rules import HangWatch, RunEnd, port_open


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
        for ending in (PsEnding.EXITS, PsEnding.STOP):
            assert rule.ending_of(job, ending) is PsEnding.STOP
    # Under the shim a TF2 server ends inside join() on `end`: the ps and workers exit 0.
    assert rule.ending_of(Job.PS, PsEnding.END_LINE) is PsEnding.END_LINE
    assert rule.ending_of(Job.WORKER, PsEnding.END_LINE) is PsEnding.END_LINE
    assert rule.ending_of(Job.EVALUATOR, PsEnding.END_LINE) is PsEnding.STOP
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


def test_a_worker_that_stopped_or_never_stepped_long_before_the_target_is_stale() -> None:
    """Hung, not done: one whose last step, or whose launch without a step while a peer
    stepped, came 15 s or more before the target was reached. A worker restarted after a ps
    host's cut that never stepped again had been counted as succeeded past the target."""
    watch = HangWatch(target=100, after=5.0)
    for task in ("worker0", "worker1", "worker2"):
        watch.started(task, 0.0)
    watch.step("worker1", 10, 0, 5.0)      # its last step, 45 s before the target
    watch.started("worker2", 20.0)         # restarted, and never stepped again
    watch.step("worker0", 100, 0, 50.0)    # the target
    assert [watch.stale(t) for t in ("worker0", "worker1", "worker2")] == [False, True, True]
    # Launched shortly before the target and not yet stepping: not judged stale.
    late = HangWatch(target=100, after=5.0)
    late.started("worker0", 0.0)
    late.step("worker0", 1, 0, 1.0)
    late.started("worker1", 45.0)
    late.step("worker0", 100, 0, 50.0)
    assert not late.stale("worker1")
    # Where no task reports steps (a program without the shim), never stepping says nothing.
    silent = HangWatch(target=100, after=5.0)
    silent.started("worker1", 0.0)
    silent.chief_done("worker0", 50.0)
    assert silent.reached and not silent.stale("worker1")


def test_a_worker_found_working_is_looked_at_again_later_and_said_once() -> None:
    watch = HangWatch(target=100, after=3.0)
    watch.started("worker0", 0.0)
    watch.step("worker0", 100, 0, 10.0)
    assert watch.hung(13.0) == ["worker0"]
    assert watch.working("worker0", 15.0) is True  # its CPU sample ended at 15
    assert watch.hung(17.9) == [] and watch.next_check(15.0) == 3.0
    assert watch.hung(18.0) == ["worker0"]
    assert watch.working("worker0", 20.0) is False


def test_cpu_time_of_a_process_group_from_proc_stat_lines() -> None:
    stat = "\n".join([
        # pid (comm) state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt utime stime
        "100 (python) S 1 100 100 0 -1 4194560 10 0 0 0 250 50 0 0 20 0 9",
        "101 (a) b (c)) R 100 100 100 0 -1 4194560 10 0 0 0 30 20 0 0 20 0 1",  # ")" in its name
        "102 (python) S 1 102 102 0 -1 4194560 10 0 0 0 999 999 0 0 20 0 1",   # another group
        "103 (torn",                                                              # cut short
    ])
    assert group_cpu_seconds(stat, 100) == (250 + 50 + 30 + 20) / CLOCK_TICKS
    assert group_cpu_seconds(stat, 104) is None


async def test_cpu_use_is_unknown_where_the_launcher_runs_no_commands_after_the_same_time() -> None:
    slept: list[float] = []

    async def sleep(seconds: float) -> None:
        slept.append(seconds)

    assert await cores_used(object(), HostSpec("h", "h"), 100, sleep, 2.0) is None
    assert slept == [2.0]  # a hang is judged after the same quiet time either way


async def test_the_cores_a_busy_process_group_of_this_machine_uses() -> None:
    busy = subprocess.Popen([sys.executable, "-c", "while True: pass"], start_new_session=True)
    idle = subprocess.Popen(["sleep", "60"], start_new_session=True)
    try:
        local = HostSpec("localhost", "127.0.0.1")
        assert (await cores_used(LocalLauncher(), local, busy.pid, asyncio.sleep, 1.0) or 0) > 0.2
        assert await cores_used(LocalLauncher(), local, idle.pid, asyncio.sleep, 1.0) == 0.0
    finally:
        for process in (busy, idle):
            process.kill()
            process.wait()
    assert await cores_used(LocalLauncher(), local, busy.pid, asyncio.sleep, 1.0) is None  # gone


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


def test_once_the_chief_finished_a_worker_left_behind_is_judged_whatever_the_target() -> None:
    """A program that never said its target: nobody is judged until the chief exited 0; then
    a non-chief that never stepped (waiting for a session the chief no longer serves) is."""
    watch = HangWatch(target=0)
    watch.started("worker0", 0.0)
    watch.started("worker1", 0.0)
    watch.step("worker0", 500, 0, 20.0)
    assert watch.hung(100.0) == [] and watch.next_check(100.0) is None
    watch.chief_done("worker0", 30.0)
    assert watch.next_check(30.0) == watch.after
    assert watch.hung(30.0 + watch.after) == ["worker1"]
    assert watch.why == "worker0 finished"
    assert HangWatch(target=40).why == "the target step 40 was reached"
