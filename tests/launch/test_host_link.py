"""A host's beats and lease (tui.launch.ssh.host_link) against a real sshd: the keeper renews the
lease file and echoes; a keeper that stops answering (SIGSTOP: what a cut link looks like
from both ends) makes the host silent, and a task there stops itself once its lease ran out,
with no signal from the controller; answering again ends the silence; closing the launcher
takes the lease file away. (Real cut links: tests/launch/test_network_faults.py.)"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from pathlib import Path

import psutil
import pytest

from tests.launch.test_ssh import launcher
from tests.support import async_wait_until
from tests.support.ssh import SshServer
from tui.config.cluster import Job, TaskSpec
from tui.launch.ssh.host_link import silent_after

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

LEASE = 4.0


def keeper_of(lease_file: str) -> psutil.Process:
    name = os.path.basename(lease_file)
    for process in psutil.process_iter(["cmdline"]):
        if name in (process.info["cmdline"] or []):
            return process
    raise AssertionError(f"no keeper of {lease_file}")


async def test_a_silent_host_is_noticed_and_its_task_stops_itself(sshd: SshServer, tmp_path: Path,
                                                                 stub_tf: Path) -> None:
    host = sshd.host("far", sshd.addresses[0], workdir=tmp_path / "work", env={"PYTHONPATH": str(stub_tf)})
    async with launcher(sshd, {"far": host}, lease=LEASE, warm=False) as ssh:
        await ssh.prepare(host)
        link = ssh.link(host)
        assert link is not None and link.silent_for() is None
        lease_file = Path(link.lease_file)
        first = lease_file.read_text()
        await async_wait_until(lambda: lease_file.read_text() not in ("", first), 5.0)  # renewed
        task = TaskSpec(Job.WORKER, 0, "far", None)
        sleeper = [sys.executable, "-c", "import time; time.sleep(120)"]
        started = await ssh.start(task, host, sleeper, {}, None)
        keeper = keeper_of(link.lease_file)
        keeper.send_signal(signal.SIGSTOP)
        try:
            change = link.changed()
            await asyncio.wait_for(change, silent_after(LEASE) + 3)
            silent = link.silent_for()
            assert silent is not None and silent >= silent_after(LEASE)
            # No signal reaches it from here: its own lease ends it (TERM from the watcher).
            code = await asyncio.wait_for(started.wait(), LEASE + 8)
            assert code == -signal.SIGTERM
            # Giving up on the connection is no answer (its channels end with an empty read).
            link.abandon()
            echoes = link._loops[1]  # the reader of the keeper's echoes: it ends with the channel
            await asyncio.wait_for(echoes, 5.0)
            assert link.silent_for() is not None
        finally:
            keeper.send_signal(signal.SIGCONT)
        await link.reconnect()  # a new connection, a new keeper, which answers
        assert link.silent_for() is None
    await async_wait_until(lambda: not lease_file.exists(), 10.0)
