"""Warm starts through the local launcher, with real processes: a pool that dies mid-run
takes its tasks along and later tasks start cold with one notice; a SIGKILLed controller
leaves no pool and no task behind, whether the pool was still importing or serving; a pool
started ahead of its task (a prestart) is the one the task forks from."""

from __future__ import annotations

import asyncio
import os
import select
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import psutil

from tests.support.warm_pool import spawned_pool
from trainer.shim import BOOTSTRAP
from tui.config.cluster import HostSpec, Job, TaskSpec
from tui.launch.local.launcher import LocalLauncher, LocalTask
from tui.launch.local.warm import WarmTask
from tui.launch.streams import each_line
from tui.launch.warm_mode import servable_mode

REPO = Path(__file__).resolve().parents[2]
LOCAL = HostSpec(name="localhost", address="localhost")
TASK = TaskSpec(job=Job.WORKER, index=0, host="localhost", port=None)
ENV = {"PYTHONPATH": str(REPO)}
#: Under the shim, a program that needs no TensorFlow of its own: a cold start is quick.
SLEEPER = "import time\nprint('up', flush=True)\ntime.sleep(120)\n"


def wait_gone(pids: list[int], timeout: float) -> list[int]:
    """The pids still alive after ``timeout`` s; waits on each process's pidfd (readable
    once it has exited), not by polling."""
    fds = {}
    for pid in pids:
        try:
            fds[os.pidfd_open(pid)] = pid
        except ProcessLookupError:
            continue
    try:
        ready, _, _ = select.select(list(fds), [], [], timeout) if fds else ([], [], [])
        pending = [fd for fd in fds if fd not in ready]
        while pending:
            more, _, _ = select.select(pending, [], [], timeout)
            if not more:
                break
            pending = [fd for fd in pending if fd not in more]
        return [fds[fd] for fd in pending]
    finally:
        for fd in fds:
            os.close(fd)


def test_what_is_served() -> None:
    python = sys.executable

    def servable(argv: list[str]) -> tuple[str, tuple[str, ...]] | None:
        return servable_mode(argv, None)

    assert servable([python, "-m", "trainer", "--hold"]) == ("trainer", ("--hold",))
    assert servable([python, "-m", "trainer.shim", "train.py"]) == ("shim", ("train.py",))
    # The shim as the controller starts it (a user's own package called trainer must win).
    assert servable([python, "-c", BOOTSTRAP, "train.py", "--x"]) == ("shim", ("train.py", "--x"))
    assert servable([python, "-u", "-c", BOOTSTRAP, "-m", "pkg.task"]) == ("shim", ("-m", "pkg.task"))
    assert servable([python, "-c", "print(1)"]) is None
    assert servable([python, "train.py"]) is None              # shim: false
    assert servable([python, "-m", "other"]) is None
    # Which interpreter runs it is the pool's question (tests/launch/test_warm_venv.py).
    assert servable_mode([python, "-m", "trainer"], "/other/python") is None


async def test_a_pool_killed_mid_run_takes_its_task_and_later_tasks_start_cold(tmp_path: Path) -> None:
    script = tmp_path / "sleeper.py"
    script.write_text(SLEEPER)
    argv = [sys.executable, "-m", "trainer.shim", str(script)]
    launcher = LocalLauncher()
    try:
        task = await launcher.start(TASK, LOCAL, argv, ENV, str(tmp_path))
        assert isinstance(task, WarmTask)
        output = each_line(task.output())
        assert (await anext(output)).text == "up"
        pools = launcher.warm_pools
        assert pools is not None and pools.pools[0].pid is not None
        os.kill(pools.pools[0].pid, signal.SIGKILL)
        assert await task.wait() == -signal.SIGKILL  # its parent-death signal
        assert wait_gone([task.pid], 10) == []

        again = await launcher.start(TASK, LOCAL, argv, ENV, str(tmp_path))
        assert isinstance(again, LocalTask)
        assert "warm start unavailable" in again.launch_notice
        third = await launcher.start(TASK, LOCAL, argv, ENV, str(tmp_path))
        assert isinstance(third, LocalTask) and third.launch_notice == ""  # one notice
        for cold in (again, third):
            await cold.kill()
            await cold.wait()
    finally:
        await launcher.close()



async def test_a_prestarted_pool_is_the_one_its_task_forks_from(tmp_path: Path) -> None:
    script = tmp_path / "sleeper.py"
    script.write_text(SLEEPER)
    argv = [sys.executable, "-m", "trainer.shim", str(script)]
    launcher = LocalLauncher()
    try:
        launcher.prestart(LOCAL, argv, ENV)
        pool = await spawned_pool(launcher)  # before any task asked
        task = await launcher.start(TASK, LOCAL, argv, ENV, str(tmp_path))
        assert isinstance(task, WarmTask)
        assert (await anext(each_line(task.output()))).text == "up"
        assert launcher.warm_pools is not None and launcher.warm_pools.pools == (pool,)
        assert psutil.Process(task.pid).ppid() == pool.pid
        await task.kill()
        await task.wait()
    finally:
        await launcher.close()


async def test_nothing_is_prestarted_that_no_task_would_fork_from(tmp_path: Path) -> None:
    plain = [sys.executable, str(tmp_path / "train.py")]  # shim: false
    shim = [sys.executable, "-m", "trainer.shim", "train.py"]
    for launcher, host, argv in ((LocalLauncher(), LOCAL, plain),
                                 (LocalLauncher(warm=False), LOCAL, shim),
                                 (LocalLauncher(), HostSpec(name="localhost", address="localhost",
                                                            warm=False), shim)):
        launcher.prestart(host, argv, ENV)
        for _ in range(20):  # the prestart's own steps, without a pool to wait for
            await asyncio.sleep(0)
        assert launcher.warm_pools is None or launcher.warm_pools.pools == ()
        await launcher.close()


async def test_cold_when_switched_off(tmp_path: Path) -> None:
    script = tmp_path / "quick.py"
    script.write_text("print('hi')\n")
    argv = [sys.executable, "-m", "trainer.shim", str(script)]
    for launcher, host in ((LocalLauncher(warm=False), LOCAL),
                           (LocalLauncher(), HostSpec(name="localhost", address="localhost", warm=False))):
        task = await launcher.start(TASK, host, argv, ENV, str(tmp_path))
        assert isinstance(task, LocalTask) and launcher.warm_pools is None
        assert await task.wait() == 0
        await launcher.close()


CONTROLLER = textwrap.dedent("""
    import asyncio, sys
    from tui.config.cluster import HostSpec, Job, TaskSpec
    from tui.launch.local.launcher import LocalLauncher

    async def main(script, when):
        launcher = LocalLauncher()
        host = HostSpec(name="localhost", address="localhost")
        task = TaskSpec(job=Job.WORKER, index=0, host="localhost", port=None)
        argv = [sys.executable, "-m", "trainer.shim", script]
        start = asyncio.ensure_future(launcher.start(task, host, argv, {}, None))
        while launcher.warm_pools is None or not launcher.warm_pools.pools \\
                or launcher.warm_pools.pools[0].pid is None:
            await asyncio.sleep(0.01)
        print("pool", launcher.warm_pools.pools[0].pid, flush=True)
        if when == "serving":
            started = await start
            print("task", started.pid, type(started).__name__, flush=True)
        await asyncio.Event().wait()

    asyncio.run(main(sys.argv[1], sys.argv[2]))
""")


def _controller_sigkilled(tmp_path: Path, when: str) -> None:
    script = tmp_path / "sleeper.py"
    script.write_text(SLEEPER)
    controller = subprocess.Popen([sys.executable, "-c", CONTROLLER, str(script), when],
                                  stdout=subprocess.PIPE, text=True, cwd=REPO,
                                  env={**os.environ, **ENV})
    try:
        assert controller.stdout is not None
        pids = [int(controller.stdout.readline().split()[1])]
        if when == "serving":
            words = controller.stdout.readline().split()
            assert words[2] == "WarmTask", words
            pids.append(int(words[1]))
    finally:
        controller.kill()
        controller.wait()
    assert wait_gone(pids, 15) == []


def test_a_sigkilled_controller_leaves_nothing_while_the_pool_imports(tmp_path: Path) -> None:
    _controller_sigkilled(tmp_path, "importing")


def test_a_sigkilled_controller_leaves_nothing_while_the_pool_serves(tmp_path: Path) -> None:
    _controller_sigkilled(tmp_path, "serving")


async def test_the_leftover_sweep_finds_and_stops_a_pool_whose_controller_is_gone(tmp_path: Path) -> None:
    from trainer.warm import POOL_RUN_ID
    from tui.launch import leftover_search as sweep
    from tui.launch.leftovers import controller_gone
    from tui.launch.owner import CONTROLLER_ENV, RUN_ID_ENV, ControllerId, boot_id

    gone = ControllerId(boot_id(), 2**22 + 1, 1.0)  # no such process
    env = {**os.environ, **ENV, RUN_ID_ENV: POOL_RUN_ID, CONTROLLER_ENV: str(gone)}
    pool = subprocess.Popen([sys.executable, "-m", "trainer.warm", "shim"], env=env, cwd=REPO,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    try:
        # Swept once it serves: before that it re-execs itself (a new command line under the
        # same pid, which the stop rightly takes for another process).
        assert pool.stdout is not None and b"ready" in pool.stdout.readline()
        found = [t for t in await sweep.find_local_leftovers() if t.pid == pool.pid]
        assert found and found[0].run_id == POOL_RUN_ID and controller_gone(found[0], tmp_path)
        (stopped,) = await sweep.stop_local_leftovers(found, grace=1.0)
        assert stopped.result in (sweep.StopResult.STOPPED, sweep.StopResult.KILLED)
        assert pool.wait(timeout=10) != 0
    finally:
        if pool.poll() is None:
            pool.kill()
            pool.wait()
