"""What ``tfdist-tui check`` asks of an SSH host (tui.launch.ssh.look), against the real sshd:
the copies a run would use are found absent and uploadable, then (once a run's preparation
placed them) present, then changed where a file in one was edited; a workdir that cannot be
made is a problem. Nothing is placed or left running by looking."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from tests.support.ssh import SshServer, describe, kill, wait_nothing_left
from tui.config.cluster import HostSpec
from tui.launch.look import CopyState, HostLook
from tui.launch.ssh.deploy import local_package
from tui.launch.ssh.launcher import SSHLauncher

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]


async def look(sshd: SshServer, host: HostSpec, folder: Path, *, prepare: bool = False) -> HostLook:
    """One controller's look at ``host`` (its run's preparation first, with ``prepare``);
    nothing it started may be left on the host afterwards."""
    ssh = SSHLauncher(upload=folder, warm=False, check_tensorflow=False)
    try:
        if prepare:
            report = await ssh.connect_all([host])
            assert not report.failures, report.failures
        return await ssh.look(host)
    finally:
        await ssh.close()
        left = await wait_nothing_left(sshd.pid)
        kill(left)
        assert not left, f"left running on the host: {describe(left)}"


def test_copies_absent_then_present_then_changed(sshd: SshServer, tmp_path: Path) -> None:
    folder = tmp_path / "prog"
    folder.mkdir()
    (folder / "train.py").write_text("print('hello')\n")
    work = tmp_path / "work"
    host = sshd.host("far", workdir=work)

    fresh = asyncio.run(look(sshd, host, folder))
    assert [(c.name, c.state) for c in fresh.copies] == [("trainer", CopyState.UPLOAD),
                                                         ("prog", CopyState.UPLOAD)]
    assert fresh.copies[0].path == f"{work}/{local_package().dirname}"
    assert fresh.copies[0].size > 10_000 and "would be uploaded" in fresh.copies[0].describe()
    assert fresh.resources.cores >= 1
    assert not work.exists()  # looking placed nothing, not even the folder

    placed = asyncio.run(look(sshd, host, folder, prepare=True))
    assert [(c.name, c.state) for c in placed.copies] == [("trainer", CopyState.PRESENT),
                                                          ("prog", CopyState.PRESENT)]
    assert all(c.ok for c in placed.copies)

    edited = work / local_package().dirname / "trainer" / "protocol.py"
    edited.write_text(edited.read_text() + "# edited on the host\n")
    changed = asyncio.run(look(sshd, host, folder))
    trainer = changed.copies[0]
    assert trainer.state is CopyState.CHANGED and not trainer.ok
    assert "trainer/protocol.py differs from this controller's copy" in trainer.describe()
    assert changed.copies[1].state is CopyState.PRESENT


def test_a_workdir_that_cannot_be_made_is_a_problem(sshd: SshServer, tmp_path: Path) -> None:
    folder = tmp_path / "prog"
    folder.mkdir()
    (folder / "train.py").write_text("print('hello')\n")
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder\n")
    found = asyncio.run(look(sshd, sshd.host("far", workdir=blocker / "work"), folder))
    assert {c.state for c in found.copies} == {CopyState.CANNOT_UPLOAD}
    assert f"the upload would fail: {blocker} cannot hold it" in found.copies[0].describe()
