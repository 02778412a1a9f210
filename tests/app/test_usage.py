"""CPU and memory per task (tui.core.usage): /proc parsing, and a real process group sampled."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest

from tests.launch.test_lab_runs import assert_hosts_empty, endless_session
from tests.support.fakes import make_config
from tests.support.netlab_fixture import MakeLab
from tui.config.cluster import HostSpec, Job
from tui.core.events import RunFinished, RunStarted, TaskStateChanged
from tui.core.task_state import TaskState
from tui.core.usage import (
    FRESH_INTERVALS,
    PAGE_BYTES,
    SAMPLE_SECONDS,
    UsageMonitor,
    UsageSample,
    group_totals,
)
from tui.launch.local.launcher import run_local_command
from tui.plan.tasks import TaskInfo


def stat(pid: int, group: int, utime: int, stime: int, rss: int, name: str = "python") -> str:
    # pid (comm) state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt utime
    # stime cutime cstime priority nice threads itrealvalue starttime vsize rss
    return (f"{pid} ({name}) S 1 {group} {group} 0 -1 0 0 0 0 0 {utime} {stime} 0 0 20 0 1 0 0 0 "
            f"{rss} 0 0")


def test_group_totals_sum_a_groups_processes() -> None:
    lines = "\n".join([stat(10, 10, 100, 50, 1000), stat(11, 10, 5, 5, 200, "a b) c"),
                       stat(12, 12, 7, 7, 9), "garbage"])
    assert group_totals(lines, {10}) == {10: (160, 1200)}


async def test_a_real_busy_process_group_shows_cpu_and_memory(tmp_path: Path) -> None:
    busy = subprocess.Popen([sys.executable, "-c", "while True: pass"], start_new_session=True)
    try:
        async def run_command(host, argv) -> str:
            return await run_local_command(argv)

        monitor = UsageMonitor(make_config(tmp_path), run_command)
        info = TaskInfo("worker0", Job.WORKER, 0, "localhost", 1)
        monitor.handle(RunStarted(run_id="r", run_dir=tmp_path, tasks=(info,),
                                  settings=make_config(tmp_path).training))
        monitor.handle(TaskStateChanged(task="worker0", old=TaskState.STARTING, new=TaskState.RUNNING,
                                        pid=busy.pid))
        first = await monitor.sample_once()
        assert first.tasks["worker0"].cpu_percent is None  # one read says no rate yet
        for _ in range(50):  # (a process that has only just exec'd may not be listed yet)
            if first.tasks["worker0"].rss_bytes:
                break
            first = await monitor.sample_once()
        assert first.tasks["worker0"].rss_bytes >= PAGE_BYTES  # a few MB of Python
        second = None
        for _ in range(50):  # a busy loop uses a core's worth as soon as it is scheduled
            second = await monitor.sample_once()
            if (second.tasks["worker0"].cpu_percent or 0) > 5:
                break
        assert second is not None and (second.tasks["worker0"].cpu_percent or 0) > 5
        assert second.hosts["localhost"].rss_bytes == second.tasks["worker0"].rss_bytes
        monitor.handle(RunFinished(summary=None))  # type: ignore[arg-type]
        await monitor.close()
    finally:
        os.killpg(busy.pid, signal.SIGKILL)
        busy.wait()


async def test_a_sample_reads_each_host_once_for_its_own_tasks_groups_only(tmp_path: Path) -> None:
    """64 hosts of 4 tasks: one read a host a sample, asking for its 4 groups' lines alone
    (the whole /proc of every host, sent and parsed every 2 s, was most of an idle
    controller's CPU), and one line a task is all it takes."""
    calls: list[tuple[str, tuple[str, ...]]] = []

    async def run_command(host: HostSpec, argv: Sequence[str]) -> str:
        calls.append((host.name, tuple(argv)))
        return "".join(stat(group, group, 10, 10, 100) + "\n" for group in map(int, argv[-1].split()))

    monitor = UsageMonitor(make_config(tmp_path), run_command)
    infos = tuple(TaskInfo(f"worker{n}", Job.WORKER, n, f"h{n // 4}", 1) for n in range(256))
    monitor.handle(RunStarted(run_id="r", run_dir=tmp_path, tasks=infos,
                              settings=make_config(tmp_path).training))
    for n, info in enumerate(infos):
        monitor.handle(TaskStateChanged(task=info.name, old=TaskState.STARTING, new=TaskState.RUNNING,
                                        pid=1000 + n))
    for reads in (1, 2):
        sample = await monitor.sample_once()
        assert len(calls) == 64 * reads and len(sample.tasks) == 256 and len(sample.hosts) == 64
    asked = {host: {int(group) for group in argv[-1].split()} for host, argv in calls}
    assert asked == {f"h{h}": {1000 + 4 * h + k for k in range(4)} for h in range(64)}
    monitor.handle(RunFinished(summary=None))  # type: ignore[arg-type]
    await monitor.close()


async def test_a_host_that_stops_answering_loses_its_figures_and_they_come_back(tmp_path: Path) -> None:
    """Seen on the lab: a host cut off (its tasks unreachable) kept its tasks' last cpu% and
    rss, and the header's cpu/mem, on screen. Its figures go once its last answer is old, or
    at once when the controller finds it unreachable, without holding up another host's."""
    sleepers = [subprocess.Popen(["sleep", "600"], start_new_session=True) for _ in range(2)]
    cut, restored = asyncio.Event(), asyncio.Event()
    now = [1000.0]
    try:
        async def run_command(host: HostSpec, argv: Sequence[str]) -> str:
            if host.name == "far" and cut.is_set():
                await restored.wait()  # an SSH read over a cut link: no answer, no error
            return await run_local_command(argv)

        interval = 1.0  # (the clock is fake: it is how long a sample waits for a read)
        monitor = UsageMonitor(make_config(tmp_path), run_command, interval=interval, clock=lambda: now[0])
        samples: list[UsageSample] = []
        monitor.subscribe(samples.append)
        infos = (TaskInfo("worker0", Job.WORKER, 0, "localhost", 1),
                 TaskInfo("worker1", Job.WORKER, 1, "far", 2))
        monitor.handle(RunStarted(run_id="r", run_dir=tmp_path, tasks=infos,
                                  settings=make_config(tmp_path).training))
        for info, sleeper in zip(infos, sleepers, strict=True):
            monitor.handle(TaskStateChanged(task=info.name, old=TaskState.STARTING, new=TaskState.RUNNING,
                                            pid=sleeper.pid))

        async def sample(seconds: float) -> UsageSample:
            now[0] += seconds
            return await asyncio.wait_for(monitor.sample_once(), 10)  # never held up by a host

        first = await sample(0)
        assert set(first.tasks) == {"worker0", "worker1"} and set(first.hosts) == {"localhost", "far"}
        cut.set()
        # Its last answer is a sampling interval old: still shown.
        assert set((await sample(interval)).tasks) == {"worker0", "worker1"}
        # Past FRESH_INTERVALS: not known now (its task's cpu%/rss and its host's totals go).
        old = await sample(FRESH_INTERVALS * interval)
        assert set(old.tasks) == {"worker0"} and set(old.hosts) == {"localhost"}
        # It answers again: its figures are back.
        restored.set()
        cut.clear()
        await asyncio.sleep(0)
        back = await sample(interval)
        assert set(back.tasks) == {"worker0", "worker1"} and set(back.hosts) == {"localhost", "far"}
        # The controller finds it unreachable: its figures go at once, in a sample of their own.
        count = len(samples)
        monitor.handle(TaskStateChanged(task="worker1", old=TaskState.RUNNING, new=TaskState.UNREACHABLE,
                                        pid=sleepers[1].pid))
        assert len(samples) == count + 1 and set(samples[-1].tasks) == {"worker0"}
        assert set(samples[-1].hosts) == {"localhost"}
        assert set((await sample(interval)).tasks) == {"worker0"}  # (and it is not read meanwhile)
        monitor.handle(TaskStateChanged(task="worker1", old=TaskState.UNREACHABLE, new=TaskState.RUNNING,
                                        pid=sleepers[1].pid))
        again = await sample(interval)
        assert again.tasks["worker1"].rss_bytes > 0 and again.tasks["worker1"].cpu_percent is None
        monitor.handle(RunFinished(summary=None))  # type: ignore[arg-type]
        await monitor.close()
    finally:
        for sleeper in sleepers:
            os.killpg(sleeper.pid, signal.SIGKILL)
            sleeper.wait()


@pytest.mark.integration
@pytest.mark.timeout(300)
async def test_on_the_lab_a_cut_hosts_tasks_lose_their_figures_and_get_them_back(
        netlab: MakeLab, tmp_path: Path) -> None:
    """Real hosts (tests/support/netlab.py), read over SSH: h2 (worker1's host) cut off, its
    task's cpu%/rss and its host's totals go within a few samples (as they stayed on screen
    on the lab before), the other hosts' figures go on, and they are back once it answers."""
    lab = netlab(3)
    session = endless_session(lab, tmp_path)
    assert session.usage is not None
    wanted: list[tuple[Callable[[UsageSample], bool], asyncio.Event]] = []

    def listen(sample: UsageSample) -> None:
        for condition, seen in wanted:
            if condition(sample):
                seen.set()

    async def until(condition: Callable[[UsageSample], bool], timeout: float) -> float:
        seen = asyncio.Event()
        wanted.append((condition, seen))
        started = time.monotonic()
        await asyncio.wait_for(seen.wait(), timeout)
        return time.monotonic() - started

    session.usage.subscribe(listen)
    try:
        await session.start()
        await until(lambda s: {"ps0", "worker0", "worker1"} <= set(s.tasks) and "h2" in s.hosts, 200)
        lab.cut("h2")
        try:
            gone = await until(lambda s: "worker1" not in s.tasks and "h2" not in s.hosts
                               and {"ps0", "worker0"} <= set(s.tasks), 60)
        finally:
            lab.restore("h2")
        back = await until(lambda s: "worker1" in s.tasks and "h2" in s.hosts, 90)
        print(f"\nh2 cut: its figures gone after {gone:.1f} s; back {back:.1f} s after its link")
        assert gone <= (FRESH_INTERVALS + 2) * SAMPLE_SECONDS, gone
    finally:
        await session.supervisor.stop_all()
        await session.close()
    await asyncio.to_thread(assert_hosts_empty, lab, 60)
