"""Warm starts on an SSH host (the test sshd, real TensorFlow): a task forked by the host's
pool is the real task (its pid, group, environment, exit code), and a SIGKILLed controller
leaves neither the pool nor its task behind."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
import textwrap
from pathlib import Path

import psutil
import pytest

from tests.launch.test_warm_local import wait_gone
from tests.support.ssh import SshServer, describe, kill, read_environ, task, wait_nothing_left
from tests.support.sshd import sshd  # noqa: F401 (the session's sshd fixture)
from tui.launch.ssh.launcher import SSHLauncher
from tui.launch.streams import each_line

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]

REPO = Path(__file__).resolve().parents[2]
PROGRAM = "import os, sys, time\nprint('up', os.getpid(), flush=True)\ntime.sleep(float(sys.argv[1]))\n"


async def test_a_remote_warm_task_is_the_real_task(sshd: SshServer, tmp_path: Path) -> None:  # noqa: F811
    script = tmp_path / "program.py"
    script.write_text(PROGRAM + "sys.exit(int(sys.argv[2]))\n")
    host = sshd.host("remote", sshd.addresses[1], workdir=tmp_path / "work")
    launcher = SSHLauncher()
    try:
        argv = [host.interpreter, "-m", "trainer.shim", str(script), "0", "7"]
        process = await launcher.start(task(), host, argv, {"T_VALUE": "x y"}, host.workdir)
        assert getattr(process, "warm", False), getattr(process, "launch_notice", "")
        lines = [line.text async for line in each_line(process.output()) if not line.text.startswith("{")]
        assert lines[0] == f"up {process.pid}"  # the pid the controller signals is the task's
        assert await process.wait() == 7

        argv = [host.interpreter, "-m", "trainer.shim", str(script), "60", "0"]
        process = await launcher.start(task(), host, argv, {"T_VALUE": "x y"}, host.workdir)
        assert getattr(process, "warm", False)
        assert (await anext(each_line(process.output()))).text == f"up {process.pid}"
        assert read_environ(process.pid)["T_VALUE"] == "x y"
        assert os.getpgid(process.pid) == process.pid
        await process.kill()
        # kill() closes stdin first, as for a cold task: EOF (143) may win over SIGKILL.
        assert await process.wait() in (143, -signal.SIGKILL)
    finally:
        await launcher.close()
    left = await wait_nothing_left(sshd.pid)
    kill(left)
    assert not left, describe(left)


async def test_a_remote_warm_task_killed_by_sigkill_is_reported_so(sshd: SshServer,  # noqa: F811
                                                                  tmp_path: Path) -> None:
    """The OOM killer's way (issue 33): the host's client used to answer a SIGKILLed task
    with signal.signal(SIGKILL, ...), which raises: "exit code 1" and its traceback."""
    script = tmp_path / "killed.py"
    script.write_text("import os\nprint('up', flush=True)\nos.kill(os.getpid(), 9)\n")
    host = sshd.host("remote", sshd.addresses[1], workdir=tmp_path / "work")
    launcher = SSHLauncher()
    try:
        argv = [host.interpreter, "-m", "trainer.shim", str(script)]
        process = await launcher.start(task(), host, argv, {}, host.workdir)
        assert getattr(process, "warm", False), getattr(process, "launch_notice", "")
        lines = [line.text async for line in each_line(process.output())]
        assert await process.wait() == -signal.SIGKILL, lines
        assert not [line for line in lines if "Traceback" in line or "signal.signal" in line], lines
    finally:
        await launcher.close()
    left = await wait_nothing_left(sshd.pid)
    kill(left)
    assert not left, describe(left)


CONTROLLER = textwrap.dedent("""
    import asyncio, json, sys
    from tui.config.cluster import HostSpec, Job, TaskSpec
    from tui.launch.ssh.launcher import SSHLauncher

    async def main(entry, script):
        spec = HostSpec(name="remote", **entry)
        launcher = SSHLauncher()
        argv = [spec.interpreter, "-m", "trainer.shim", script, "120"]
        process = await launcher.start(TaskSpec(Job.WORKER, 0, "remote", None), spec, argv, {}, spec.workdir)
        print("task", process.pid, getattr(process, "warm", False), flush=True)
        await asyncio.Event().wait()

    asyncio.run(main(json.loads(sys.argv[1]), sys.argv[2]))
""")


async def test_a_sigkilled_controller_leaves_no_remote_pool_or_task(sshd: SshServer,  # noqa: F811
                                                                   tmp_path: Path) -> None:
    script = tmp_path / "program.py"
    script.write_text(PROGRAM)
    host = sshd.host("remote", sshd.addresses[1], workdir=tmp_path / "work")
    controller = await asyncio.create_subprocess_exec(
        sys.executable, "-c", CONTROLLER, json.dumps(sshd.yaml_entry(host)), str(script),
        stdout=asyncio.subprocess.PIPE, cwd=REPO)
    try:
        assert controller.stdout is not None
        words = (await asyncio.wait_for(controller.stdout.readline(), 180)).split()
        assert words[:1] == [b"task"] and words[2] == b"True", words
        pid = int(words[1])
        pool = psutil.Process(pid).ppid()
        assert "trainer.warm" in " ".join(psutil.Process(pool).cmdline())
    finally:
        controller.send_signal(signal.SIGKILL)
        await controller.wait()
    assert await asyncio.to_thread(wait_gone, [pid, pool], 15) == []
    left = await wait_nothing_left(sshd.pid)
    kill(left)
    assert not left, describe(left)
