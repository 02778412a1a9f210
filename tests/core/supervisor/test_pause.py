"""The pause guard on a scripted clock: ticks and a loaded machine's delays are not pauses,
a gap of seconds is, once; a disabled guard (a run on a fake clock) never reports one."""

from __future__ import annotations

from tui.core.supervisor.pause import SLACK, TICK, PauseGuard, thread_run_delay
from tui.program.end_rules import HangWatch


def test_only_a_real_gap_is_a_pause() -> None:
    now = [100.0]
    guard = PauseGuard(lambda: now[0])
    for _ in range(10):
        now[0] += TICK + 0.05  # a loaded machine's late ticks
        assert guard.paused() == 0.0
    now[0] += TICK + SLACK + 7.0  # Ctrl-Z, then fg
    assert guard.paused() == SLACK + 7.0
    now[0] += TICK
    assert guard.paused() == 0.0
    assert guard.total == SLACK + 7.0


def test_a_gap_spent_waiting_for_a_cpu_is_short_of_cpu_not_a_suspension() -> None:
    # It said "paused for 3 s (suspended?)" when the controller was only short of CPU.
    now, delay = [100.0], [5.0]
    guard = PauseGuard(lambda: now[0], run_delay=lambda: delay[0])
    now[0] += TICK + SLACK + 3.0
    delay[0] += SLACK + 2.5  # runnable, waiting for a CPU, most of the gap
    assert guard.paused() == SLACK + 3.0 and guard.starved
    now[0] += TICK + SLACK + 7.0  # stopped: a stopped thread waits for no CPU
    delay[0] += 0.01
    assert guard.paused() == SLACK + 7.0 and not guard.starved
    unknown = PauseGuard(lambda: now[0], run_delay=lambda: None)
    now[0] += TICK + SLACK + 1.0
    assert unknown.paused() and not unknown.starved  # where the kernel does not say: as before


def test_this_kernel_tells_a_threads_wait_for_a_cpu() -> None:
    first = thread_run_delay()
    assert first is not None and first >= 0.0
    second = thread_run_delay()
    assert second is not None and second >= first


def test_a_disabled_guard_never_reports() -> None:
    now = [0.0]
    guard = PauseGuard(lambda: now[0], enabled=False)
    now[0] += 100.0
    assert guard.paused() == 0.0


def test_the_hang_watch_does_not_count_the_pause() -> None:
    watch = HangWatch(target=10, after=5.0)
    watch.started("worker0", 0.0)
    watch.step("worker0", 10, 10, 1.0)
    assert watch.hung(20.0) == ["worker0"]
    watch.paused(30.0)
    assert watch.hung(20.0) == [] and watch.hung(37.0) == ["worker0"]
