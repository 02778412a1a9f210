"""An ``upload:`` folder's copies on a host, against the real sshd: an edit makes a new copy,
and the earlier ones go once nothing uses them (they used to stay forever, a full copy per
edit), but never while a task runs in one or a controller has just used it."""

from __future__ import annotations

import os
import shutil
import sys
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

from tests.support.ssh import SshServer, describe, kill, task, wait_nothing_left
from tui.config.cluster import HostSpec
from tui.launch.base import RunningTask
from tui.launch.package import upload_package
from tui.launch.snippets import copies as copies_snippet
from tui.launch.ssh import upload, upload_copies
from tui.launch.ssh.launcher import SSHLauncher
from tui.launch.streams import each_line

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    folder = tmp_path / "prog"
    folder.mkdir()
    (folder / "train.py").write_text("print('version 1')\n")
    return folder


@pytest.fixture
def host(sshd: SshServer, tmp_path: Path, stub_tf: Path) -> HostSpec:
    return sshd.host("far", workdir=tmp_path / "work", env={"PYTHONPATH": str(stub_tf)})


@asynccontextmanager
async def controller(sshd: SshServer, host: HostSpec, folder: Path,
                     alone: bool = True) -> AsyncIterator[SSHLauncher]:
    """A controller with ``folder`` as its upload, the host prepared (so the folder placed);
    afterwards nothing may be left on the host (when it is the ``alone`` one)."""
    ssh = SSHLauncher(upload=folder, warm=False)
    try:
        report = await ssh.connect_all([host])
        assert not report.failures, report.failures
        yield ssh
    finally:
        await ssh.close()
        left = await wait_nothing_left(sshd.pid) if alone else []
        kill(left)
        assert not left, f"left running on the host: {describe(left)}"


async def first_line(process: RunningTask) -> str:
    async for line in each_line(process.output()):
        return line.text
    return ""


def copies(host: HostSpec) -> set[str]:
    """The folder's copies in the host's workdir (anything else there would be a leftover)."""
    found = {p.name for p in Path(host.workdir).iterdir() if p.name.startswith("prog")}
    assert not {name for name in found if ".partial-" in name}, found
    return found


def edit(folder: Path, version: int) -> str:
    """Change the folder; the name its next copy will have."""
    (folder / "train.py").write_text(f"print('version {version}')\n")
    return upload_package(folder).dirname


def unused_for_long(host: HostSpec, copy: str) -> None:
    """As if no controller had used ``copy`` for an hour."""
    unused_for_long_path(Path(host.workdir) / copy)


async def test_an_edit_leaves_the_copy_before_and_no_older_one(sshd: SshServer, host: HostSpec,
                                                               folder: Path) -> None:
    first = upload_package(folder).dirname
    async with controller(sshd, host, folder):
        pass
    second = edit(folder, 2)
    async with controller(sshd, host, folder):
        pass
    # The first copy was used a moment ago: another controller may be about to start in it.
    assert copies(host) == {first, second}
    unused_for_long(host, first)
    third = edit(folder, 3)
    async with controller(sshd, host, folder):
        pass
    assert copies(host) == {second, third}
    assert (Path(host.workdir) / third / "train.py").read_text() == "print('version 3')\n"


async def test_a_copy_a_task_runs_in_stays_until_the_task_ends(sshd: SshServer, host: HostSpec,
                                                               folder: Path) -> None:
    first = upload_package(folder).dirname
    async with controller(sshd, host, folder) as running:
        code = "import sys; print('started', flush=True); sys.stdin.read()"
        process = await running.start(task(host="far"), host, [sys.executable, "-c", code], {},
                                      f"{host.workdir}/{first}")
        assert await first_line(process) == "started"
        unused_for_long(host, first)
        second = edit(folder, 2)
        async with controller(sshd, host, folder, alone=False):  # another controller, meanwhile
            pass
        assert copies(host) == {first, second}  # the running task's files stay
        await process.terminate()
        await process.wait()
    unused_for_long(host, first)
    third = edit(folder, 3)
    async with controller(sshd, host, folder):
        pass
    assert copies(host) == {second, third}  # its task gone, the first copy went too


async def test_a_copy_removed_behind_the_controller_is_uploaded_again(
        sshd: SshServer, host: HostSpec, folder: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    copy = Path(host.workdir) / upload_package(folder).dirname
    async with controller(sshd, host, folder) as ssh:
        assert (copy / upload.MARKER).is_file()
        shutil.rmtree(copy)
        # Past the time a controller trusts its copy without looking (RECHECK), a task's start
        # looks again and puts it back.
        monkeypatch.setattr(upload_copies, "RECHECK", 0.0)
        process = await ssh.start(task(host="far"), host, [sys.executable, "train.py"], {}, str(copy))
        assert await first_line(process) == "version 1"
        assert await process.wait() == 0


def test_the_snippet_knows_the_marker() -> None:
    assert copies_snippet.MARKER == upload.MARKER


def test_a_copy_marked_used_while_it_is_removed_stays(tmp_path: Path) -> None:
    # The snippet's last check, run here as on a host: a controller marked the copy used
    # after the snippet chose it, so the copy is put back instead of removed.
    copy = tmp_path / "prog-0123456789ab"
    copy.mkdir()
    (copy / "train.py").write_text("print(1)\n")
    assert not copies_snippet.remove(str(copy), unused_for=600)
    assert sorted(p.name for p in tmp_path.iterdir()) == [copy.name]
    unused_for_long_path(copy)
    assert copies_snippet.remove(str(copy), unused_for=600)
    assert list(tmp_path.iterdir()) == []


def test_a_planted_link_or_file_named_like_a_copy_is_left_alone(tmp_path: Path) -> None:
    """Issue 33: a symlink (to a folder elsewhere) or a plain file under a copy's name was
    renamed to *.partial-gone-PID, left there, and counted as removed."""
    workdir, elsewhere = tmp_path / "workdir", tmp_path / "elsewhere"
    workdir.mkdir()
    elsewhere.mkdir()
    (elsewhere / "keep.txt").write_text("mine\n")
    link, plain, old = (workdir / f"prog-{d * 12}" for d in "abc")
    link.symlink_to(elsewhere)
    plain.write_text("not a copy\n")
    old.mkdir()
    for path in (link, plain, old, elsewhere):
        then = time.time() - 3600
        os.utime(path, (then, then), follow_symlinks=False)
    answer = copies_snippet.tidy(str(workdir), "prog", "prog-0123456789ab", 600)
    assert answer["removed"] == [old.name]  # the real, unused copy only
    assert sorted(p.name for p in workdir.iterdir()) == sorted([link.name, plain.name])
    assert link.is_symlink() and (elsewhere / "keep.txt").read_text() == "mine\n"
    assert plain.read_text() == "not a copy\n"


def unused_for_long_path(path: Path) -> None:
    then = time.time() - 3600
    os.utime(path, (then, then))
