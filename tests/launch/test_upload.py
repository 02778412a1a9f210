"""Uploads stream: a 200 MB file goes to the host in bounded chunks, so the controller's
memory does not grow with the file (it held the whole file: 263 MB RSS), and the copy is
byte for byte the file."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.ssh import SshServer
from tui.launch.errors import HostError, HostFailure
from tui.launch.package import upload_package
from tui.launch.ssh import deploy
from tui.launch.ssh.connect import ConnectOptions, open_connection

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]
REPO = Path(__file__).resolve().parents[2]
BIG = 200 * 1024 * 1024
#: What the upload may add to the controller's peak memory, whatever the file's size.
MEMORY_BOUND = 64 * 1024 * 1024


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as file:
        while chunk := file.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def test_a_200_mb_file_is_streamed(sshd: SshServer, tmp_path: Path) -> None:
    folder = tmp_path / "prog"
    folder.mkdir()
    (folder / "train.py").write_text("print('hi')\n")
    with (folder / "data.bin").open("wb") as file:
        for _ in range(BIG >> 20):
            file.write(os.urandom(1 << 20))
    workdir = tmp_path / "work"
    result = subprocess.run(
        [sys.executable, "-m", "tests.support.upload_rss", sshd.addresses[0], str(sshd.port),
         str(sshd.user_key), str(sshd.known_hosts), str(folder), str(workdir)],
        cwd=REPO, capture_output=True, text=True, timeout=200)
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads(result.stdout.splitlines()[-1])
    growth = (report["peak_kib"] - report["before_kib"]) * 1024
    print(f"peak memory growth while uploading {BIG >> 20} MB: {growth / 2**20:.1f} MiB")
    assert growth < MEMORY_BOUND, f"the upload grew the controller by {growth / 2**20:.0f} MiB"
    copy = Path(report["path"])
    assert sha256_of(copy / "data.bin") == sha256_of(folder / "data.bin")
    assert (copy / "train.py").read_text() == "print('hi')\n"


async def test_a_file_edited_during_the_upload_fails_it_and_leaves_nothing(sshd: SshServer,
                                                                         tmp_path: Path) -> None:
    folder = tmp_path / "prog"
    folder.mkdir()
    (folder / "train.py").write_text("print('hi')\n")
    package = upload_package(folder)
    (folder / "train.py").write_text("print('edited')\n")  # after it was hashed, before it is sent
    workdir = tmp_path / "work"
    spec = sshd.host("far", workdir=workdir)
    conn = await open_connection(spec, ConnectOptions(ssh_config=None))
    try:
        with pytest.raises(HostError) as raised:
            await deploy.deploy(conn, spec, str(workdir), package)
    finally:
        conn.close()
    assert raised.value.failure is HostFailure.DEPLOY_FAILED
    assert f"{folder / 'train.py'} changed while it was being uploaded; launch again" in str(raised.value)
    assert list(workdir.iterdir()) == []  # no copy named after content it does not hold
