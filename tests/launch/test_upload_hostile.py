"""``program.upload`` against a hostile or careless folder, through the real SSH path: a
link to a file outside the folder is not uploaded, permissions arrive as they were, an
upload that fails leaves no ``.partial-*`` behind, and ``upload: ../..`` with the script
beside hosts.yaml is refused before anything runs."""

from __future__ import annotations

import stat
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.ssh import SshServer
from tui.launch.errors import HostError
from tui.launch.package import FolderPackage, PackageFile, upload_package
from tui.launch.ssh import deploy
from tui.launch.ssh.connect import ConnectOptions, open_connection

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]
REPO = Path(__file__).resolve().parents[2]


def folder_with_traps(tmp_path: Path) -> Path:
    secret = tmp_path / "secret.txt"
    secret.write_text("outside secret\n")
    folder = tmp_path / "prog"
    (folder / ".ssh").mkdir(parents=True)
    (folder / "train.py").write_text("print('hi')\n")
    (folder / "run.sh").write_text("#!/bin/sh\n")
    (folder / "run.sh").chmod(0o755)
    (folder / ".ssh" / "id_ed25519").write_text("key\n")
    (folder / ".ssh" / "id_ed25519").chmod(0o600)
    (folder / ".ssh").chmod(0o700)
    (folder / "passwd").symlink_to("/etc/passwd")
    (folder / "secret").symlink_to(secret)
    (folder / "inside").symlink_to(folder / "train.py")  # a link inside the folder is fine
    return folder


async def test_links_outside_stay_out_and_modes_arrive(sshd: SshServer, tmp_path: Path) -> None:
    package = upload_package(folder_with_traps(tmp_path))
    assert sorted(f.path for f in package.files) == [".ssh/id_ed25519", "inside", "run.sh", "train.py"]
    spec = sshd.host("far", sshd.addresses[0], workdir=tmp_path / "work")
    conn = await open_connection(spec, ConnectOptions(ssh_config=None))
    try:
        done = await deploy.deploy(conn, spec, str(tmp_path / "work"), package)
    finally:
        conn.close()
    copy = Path(done.path)
    assert stat.S_IMODE((copy / ".ssh" / "id_ed25519").stat().st_mode) == 0o600
    assert stat.S_IMODE((copy / ".ssh").stat().st_mode) == 0o700
    assert stat.S_IMODE((copy / "run.sh").stat().st_mode) == 0o755
    assert not (copy / "passwd").exists() and not (copy / "secret").exists()


async def test_a_failed_upload_leaves_no_partial_copy(sshd: SshServer, tmp_path: Path) -> None:
    workdir = tmp_path / "work"
    workdir.mkdir()
    # A file the remote side cannot create (a name under a path component that is a file).
    package = FolderPackage.of("prog", [PackageFile("a.py", b"x" * 100_000), PackageFile("a.py/b", b"y")])
    spec = sshd.host("far", sshd.addresses[0], workdir=workdir)
    conn = await open_connection(spec, ConnectOptions(ssh_config=None))
    try:
        with pytest.raises(HostError):
            await deploy.deploy(conn, spec, str(workdir), package)
    finally:
        conn.close()
    assert [p.name for p in workdir.iterdir()] == []


def test_upload_of_a_parent_without_the_script_is_refused_locally(tmp_path: Path) -> None:
    folder = tmp_path / "a" / "b"
    folder.mkdir(parents=True)
    (folder / "train.py").write_text("print(1)\n")
    hosts = folder / "hosts.yaml"
    hosts.write_text("hosts:\n  far: {address: 10.0.0.9}\n"
                     "program:\n  command: python train.py --job={job}\n  upload: ../..\n"
                     "cluster: {ps: ['far:auto'], worker: ['far:auto']}\n")
    result = subprocess.run([sys.executable, "-m", "tui.cli", str(hosts), "--no-ui"], cwd=REPO,
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 2, result.stderr
    assert f"{hosts}:5:11: program.upload: remote tasks run 'train.py'" in result.stderr, result.stderr
