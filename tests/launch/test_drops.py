"""What a dropped connection is called: during an upload it is a lost connection, not "the
SSH server offers no SFTP"; a task whose channel closed without an exit status did not
"exit -1" (which reads as killed by SIGHUP), its connection went."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import pytest

from tests.support.ssh import SshServer
from tui.launch.errors import HostError, HostFailure
from tui.launch.package import FolderPackage, PackageFile
from tui.launch.ssh import deploy
from tui.launch.ssh.connect import ConnectOptions, open_connection
from tui.launch.ssh.launcher import SSHTask

pytestmark = pytest.mark.timeout(60)


async def test_a_connection_dropped_before_the_upload_is_called_lost(sshd: SshServer, tmp_path: Path) -> None:
    spec = sshd.host("far", sshd.addresses[0], workdir=tmp_path / "work")
    conn = await open_connection(spec, ConnectOptions(ssh_config=None))
    conn.close()
    await conn.wait_closed()
    package = FolderPackage.of("prog", [PackageFile("a.py", b"print(1)\n")])
    with pytest.raises(HostError) as raised:
        await deploy.deploy(conn, spec, str(tmp_path / "work"), package)
    assert raised.value.failure is HostFailure.CONNECTION_LOST, raised.value
    assert "no SFTP" not in str(raised.value)


class _Process:
    def __init__(self, returncode: int, exit_signal: object = None) -> None:
        self.returncode = returncode
        self.exit_signal = exit_signal

    async def wait_closed(self) -> None:
        return None


async def test_minus_one_from_ssh_is_a_lost_connection_not_sighup() -> None:
    host = SimpleNamespace(spec=SimpleNamespace(name="far"),
                           error=lambda failure, detail: HostError("far", "root@far", failure, detail))
    task = SSHTask(cast(Any, host), cast(Any, _Process(-1)), 4242, b"")
    with pytest.raises(HostError) as raised:
        await task.wait()
    assert raised.value.failure is HostFailure.CONNECTION_LOST
    killed = SSHTask(cast(Any, host), cast(Any, _Process(-15, ("TERM", False, "", ""))), 4242, b"")
    assert await killed.wait() == -15
