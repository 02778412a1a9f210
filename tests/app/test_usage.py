"""CPU and memory per task (tui.core.usage): /proc parsing, and a real process group sampled."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from tests.support.fakes import make_config
from tui.config.cluster import Job
from tui.core.events import RunFinished, RunStarted, TaskStateChanged
from tui.core.task_state import TaskState
from tui.core.usage import PAGE_BYTES, UsageMonitor, group_totals
from tui.launch.local import run_local_command
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
