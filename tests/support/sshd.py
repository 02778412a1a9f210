"""A real OpenSSH server for the SSH launcher's tests.

One ``sshd`` per test session, listening on one port of 127.0.0.2 and 127.0.0.3 (two
"hosts" for the controller; both are this machine, so tests can inspect the remote
processes with psutil). It has its own host key, accepts one generated user key for root,
and is killed at the end of the session.

Most tests give the remote side a stub ``tensorflow`` (:func:`stub_tf`) on PYTHONPATH: the
launcher's probe imports TensorFlow on every host it prepares, and the real import costs
seconds. Tests that run the real trainer use the real one.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support.ssh import SshServer

SSHD = Path("/usr/sbin/sshd")
ADDRESSES = ("127.0.0.2", "127.0.0.3")
START_TIMEOUT = 10.0
#: The stub TensorFlow. With TFDIST_STUB_TF_BARRIER=DIR:N, an import waits until N imports
#: have started (each leaves a file in DIR) and fails after 30 s: proof that they overlap.
STUB_TF = """\
import os, time, uuid
_barrier = os.environ.get("TFDIST_STUB_TF_BARRIER")
if _barrier:
    _dir, _, _count = _barrier.rpartition(":")
    open(os.path.join(_dir, uuid.uuid4().hex), "w").close()
    _deadline = time.time() + 30
    while len(os.listdir(_dir)) < int(_count):
        if time.time() > _deadline:
            raise ImportError("the other probes did not start within 30 s")
        time.sleep(0.05)
__version__ = "0.0+stub"
"""


def keygen(path: Path, comment: str) -> Path:
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", comment, "-f", str(path)],
                   check=True, stdin=subprocess.DEVNULL)
    return path


def _free_port() -> int:
    """A port free on every test address (bound on the wildcard, then let go)."""
    with socket.socket() as sock:
        sock.bind(("0.0.0.0", 0))
        return int(sock.getsockname()[1])


def _listening(port: int) -> bool:
    for address in ADDRESSES:
        try:
            with socket.create_connection((address, port), timeout=0.5):
                pass
        except OSError:
            return False
    return True


@dataclass(frozen=True)
class _Keys:
    host: Path
    other_host: Path
    user: Path
    wrong_user: Path


def sshd_config(path: Path, port: int, addresses: tuple[str, ...], host_key: Path,
                authorized: Path) -> Path:
    """Write an sshd_config at ``path``: root by key only, listening on ``port`` of each of
    ``addresses`` (also used by the network-namespace lab, tests/support/netlab.py)."""
    lines = [
        f"Port {port}",
        *(f"ListenAddress {address}" for address in addresses),
        f"HostKey {host_key}",
        f"PidFile {path.with_suffix('.pid')}",
        f"AuthorizedKeysFile {authorized}",
        "PermitRootLogin prohibit-password",
        "UsePAM no",
        "StrictModes no",
        "PasswordAuthentication no",
        "KbdInteractiveAuthentication no",
        "Subsystem sftp internal-sftp",
        # Tests open many connections at once; the default throttles unauthenticated ones.
        "MaxStartups 100",
        "LogLevel VERBOSE",
        # Root's shell start-up on a machine with pyenv runs `pyenv rehash` in every session,
        # which waits up to 60 s for a lock file that a session killed mid-rehash leaves
        # behind: from then on every remote command took a minute and lab runs failed on
        # their 30 s limits. The tests' hosts give that lock 1 s.
        "SetEnv PYENV_REHASH_TIMEOUT=1",
    ]
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.fixture(scope="session")
def sshd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SshServer]:
    if not SSHD.exists() or shutil.which("ssh-keygen") is None:
        pytest.skip("openssh-server is not installed (.ci/run installs it)")
    directory = tmp_path_factory.mktemp("sshd")
    keys = _Keys(host=keygen(directory / "host_key", "test host"),
                 other_host=keygen(directory / "other_host_key", "another host"),
                 user=keygen(directory / "user_key", "test user"),
                 wrong_user=keygen(directory / "wrong_key", "not authorized"))
    Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)  # privilege separation directory
    log = directory / "sshd.log"
    process: subprocess.Popen[bytes] | None = None
    port = 0
    for _ in range(5):  # the free port may be taken before sshd binds it
        port = _free_port()
        config = sshd_config(directory / "sshd_config", port, ADDRESSES, keys.host,
                             keys.user.with_suffix(".pub"))
        with log.open("ab") as log_file:
            process = subprocess.Popen([str(SSHD), "-D", "-e", "-f", str(config)], stdin=subprocess.DEVNULL,
                                       stdout=log_file, stderr=log_file)
        deadline = time.monotonic() + START_TIMEOUT
        while process.poll() is None and not _listening(port) and time.monotonic() < deadline:
            time.sleep(0.05)  # no event to await: sshd says nothing when it is listening
        if process.poll() is None and _listening(port):
            break
        process.kill()
        process.wait()
        process = None
    if process is None:
        pytest.fail(f"sshd did not start: {log.read_text()[-2000:]}")
    known_hosts = directory / "known_hosts"
    host_key = (keys.host.with_suffix(".pub")).read_text().split()[:2]
    known_hosts.write_text("".join(f"[{a}]:{port} {' '.join(host_key)}\n" for a in ADDRESSES))
    try:
        yield SshServer(port=port, addresses=ADDRESSES, directory=directory, pid=process.pid,
                        user_key=keys.user, wrong_key=keys.wrong_user,
                        host_key_pub=keys.host.with_suffix(".pub"),
                        other_host_key_pub=keys.other_host.with_suffix(".pub"),
                        known_hosts=known_hosts, log=log)
    finally:
        process.kill()
        process.wait()


@pytest.fixture(scope="session")
def stub_tf(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A directory holding a fake ``tensorflow`` package that imports instantly."""
    directory = tmp_path_factory.mktemp("stub-tf")
    package = directory / "tensorflow"
    package.mkdir()
    (package / "__init__.py").write_text(STUB_TF)
    return directory


@pytest.fixture(scope="session")
def python_without_tf(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A Python interpreter that cannot import TensorFlow (a bare venv)."""
    venv = tmp_path_factory.mktemp("venv-no-tf")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    assert python.exists(), os.listdir(venv)
    return str(python)


#: pyenv's rehash lock (root's shell start-up runs `pyenv rehash` in every SSH session).
PYENV_LOCK = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv")) / "shims" / ".pyenv-shim"
#: A rehash holds its lock well under a second; one older than this was left by a session
#: killed mid-rehash (a test's SIGKILL of a remote group, a cut host) and is never removed.
STALE_LOCK_AGE = 15.0


@pytest.fixture(autouse=True)
def _no_stale_pyenv_lock(request: pytest.FixtureRequest) -> None:
    """Before a test that talks to an sshd (the private one or the lab's), remove a rehash lock
    that an earlier test's killed session left: with it every remote command waited for it
    (1 s with the tests' PYENV_REHASH_TIMEOUT, and said "cannot rehash" on its stderr). Only a
    lock old enough to be stale, so a rehash under way keeps its own."""
    if not {"sshd", "netlab"} & set(request.fixturenames):
        return
    try:
        if time.time() - PYENV_LOCK.stat().st_mtime > STALE_LOCK_AGE:
            PYENV_LOCK.unlink()
    except FileNotFoundError:
        pass
