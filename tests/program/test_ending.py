"""The hang watch (the sync chief that hangs after its last step) and the port probe."""

from __future__ import annotations

import socket

from tui.program.ending import HangWatch, port_open


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
