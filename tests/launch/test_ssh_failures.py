"""Every way a remote host can be unusable is reported per host, names the host and the
cause, never hangs, leaves the other hosts alone, and leaves nothing running."""

from __future__ import annotations

import socket
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
import pytest_asyncio
import yaml

from tests.support.ssh import SshServer, describe, kill, task, wait_nothing_left
from tui.config.cluster import HostSpec
from tui.config.load import load_config
from tui.core.supervisor.lifecycle import Supervisor
from tui.launch.errors import HostError, HostFailure
from tui.launch.router import Router
from tui.launch.ssh.hostkeys import INSECURE_WARNING
from tui.launch.ssh.launcher import SSHLauncher
from tui.launch.ssh.remote_command import RemoteCommand
from tui.plan.preflight import PreflightError

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def stub_env(stub_tf: Path) -> dict[str, str]:
    return {"PYTHONPATH": str(stub_tf)}


@pytest_asyncio.fixture
async def nothing_left(sshd: SshServer) -> AsyncIterator[None]:
    """After the test, nothing started through sshd may be alive."""
    yield
    left = await wait_nothing_left(sshd.pid)
    kill(left)
    assert not left, f"left running on the hosts: {describe(left)}"


async def failure_of(spec: HostSpec, *, hosts: dict[str, HostSpec] | None = None,
                     **options: object) -> HostError:
    """Prepare ``spec`` alone with a fresh launcher; the one failure it reports."""
    ssh = SSHLauncher(hosts, **options)  # type: ignore[arg-type]
    try:
        report = await ssh.connect_all([spec])
    finally:
        await ssh.close()
    assert not report.hosts, report
    (failure,) = report.failures
    assert failure.host == spec.name
    where = f"root@{spec.address}:{spec.port}"
    assert str(failure).startswith(f"host {spec.name} ({where}): {failure.failure.value}: ")
    return failure


@pytest.fixture
def silent_port() -> Iterator[int]:
    """A port that accepts TCP connections and never says anything (no SSH banner)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.2", 0))
        sock.listen(8)
        yield sock.getsockname()[1]


@pytest.mark.usefixtures("nothing_left")
class TestUnreachable:
    async def test_connection_refused(self, sshd: SshServer, tmp_path: Path) -> None:
        with socket.socket() as sock:
            sock.bind(("127.0.0.2", 0))
            port = sock.getsockname()[1]  # bound, not listening: connections are refused
            failure = await failure_of(sshd.host("dead", workdir=tmp_path, port=port))
        assert failure.failure is HostFailure.UNREACHABLE
        assert "connection refused" in failure.detail

    async def test_no_answer_times_out(self, sshd: SshServer, tmp_path: Path, silent_port: int) -> None:
        failure = await failure_of(sshd.host("silent", workdir=tmp_path, port=silent_port),
                                   connect_timeout=1.0)
        assert failure.failure is HostFailure.UNREACHABLE
        assert failure.detail == "no SSH answer within 1 s"

    async def test_unknown_name(self, sshd: SshServer, tmp_path: Path) -> None:
        failure = await failure_of(sshd.host("nowhere", "no-such-host.invalid", workdir=tmp_path),
                                   connect_timeout=5.0)
        assert failure.failure is HostFailure.UNREACHABLE
        assert "no-such-host.invalid" in failure.detail or "no SSH answer" in failure.detail


@pytest.mark.usefixtures("nothing_left")
class TestAuthentication:
    async def test_a_key_the_host_does_not_accept(self, sshd: SshServer, tmp_path: Path) -> None:
        failure = await failure_of(sshd.host("locked", workdir=tmp_path, identity=sshd.wrong_key))
        assert failure.failure is HostFailure.AUTH_REFUSED
        assert str(sshd.wrong_key) in failure.detail

    async def test_an_identity_file_that_is_missing(self, sshd: SshServer, tmp_path: Path) -> None:
        failure = await failure_of(sshd.host("nokey", workdir=tmp_path, identity=tmp_path / "missing"))
        assert failure.failure is HostFailure.IDENTITY_UNUSABLE

    async def test_an_encrypted_identity_is_named_not_leaked(self, sshd: SshServer, tmp_path: Path) -> None:
        import subprocess

        key = tmp_path / "encrypted"
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "s3cret-passphrase", "-f", str(key)],
                       check=True)
        failure = await failure_of(sshd.host("enc", workdir=tmp_path, identity=key))
        assert failure.failure is HostFailure.IDENTITY_UNUSABLE
        assert "ssh-add" in failure.detail
        assert "s3cret" not in str(failure) and "PRIVATE KEY" not in str(failure)


@pytest.mark.usefixtures("nothing_left")
class TestHostKeys:
    def fingerprint(self, public_key: Path) -> str:
        import asyncssh

        return str(asyncssh.read_public_key(str(public_key)).get_fingerprint("sha256"))

    async def test_an_unknown_key_is_refused_with_its_fingerprint(self, sshd: SshServer,
                                                                   tmp_path: Path) -> None:
        empty = tmp_path / "known_hosts"
        empty.write_text("")
        failure = await failure_of(sshd.host("new", workdir=tmp_path, known_hosts=empty))
        assert failure.failure is HostFailure.HOST_KEY_UNKNOWN
        assert self.fingerprint(sshd.host_key_pub) in failure.detail
        assert "--accept-new-host-keys" in failure.detail and str(empty) in failure.detail
        assert empty.read_text() == ""

    async def test_a_changed_key_is_refused_loudly(self, sshd: SshServer, tmp_path: Path) -> None:
        other = sshd.other_host_key_pub.read_text().split()[:2]
        known = tmp_path / "known_hosts"
        known.write_text(f"[{sshd.addresses[0]}]:{sshd.port} {' '.join(other)}\n")
        before = known.read_text()
        for options in ({}, {"accept_new_host_keys": True}):  # accept-new never accepts a change
            failure = await failure_of(sshd.host("moved", workdir=tmp_path, known_hosts=known), **options)
            assert failure.failure is HostFailure.HOST_KEY_CHANGED
            assert self.fingerprint(sshd.host_key_pub) in failure.detail
            assert self.fingerprint(sshd.other_host_key_pub) in failure.detail
            assert "ssh-keygen -R" in failure.detail
            assert known.read_text() == before

    async def test_accept_new_records_the_key_then_it_is_trusted(self, sshd: SshServer, tmp_path: Path,
                                                                stub_env: dict[str, str]) -> None:
        known = tmp_path / "ssh" / "known_hosts"  # neither the file nor its directory exist yet
        host = sshd.host("fresh", workdir=tmp_path, known_hosts=known, env=stub_env)
        ssh = SSHLauncher(accept_new_host_keys=True)
        try:
            report = await ssh.connect_all([host])
        finally:
            await ssh.close()
        assert report.ok
        (notice,) = report.warnings
        assert notice.startswith("host fresh: recorded its new ssh-ed25519 key SHA256:")
        recorded = known.read_text().split()
        assert recorded == [f"[{sshd.addresses[0]}]:{sshd.port}",
                            *sshd.host_key_pub.read_text().split()[:2]]
        strict = SSHLauncher()
        try:
            assert (await strict.connect_all([host])).ok
        finally:
            await strict.close()

    async def test_switching_checks_off_is_explicit_and_warned_every_time(
            self, sshd: SshServer, tmp_path: Path, stub_env: dict[str, str]) -> None:
        empty = tmp_path / "known_hosts"
        empty.write_text("")
        host = sshd.host("anything", workdir=tmp_path, known_hosts=empty, env=stub_env)
        ssh = SSHLauncher(insecure_no_host_key_check=True)
        try:
            for _ in range(2):
                report = await ssh.connect_all([host])
                assert report.ok and report.warnings == (INSECURE_WARNING,)
        finally:
            await ssh.close()
        assert empty.read_text() == ""
        with pytest.raises(ValueError):
            SSHLauncher(insecure_no_host_key_check=True, accept_new_host_keys=True)


@pytest.mark.usefixtures("nothing_left")
class TestRemotePython:
    async def test_python_missing(self, sshd: SshServer, tmp_path: Path) -> None:
        failure = await failure_of(sshd.host("nopy", workdir=tmp_path, python="/nonexistent/python"))
        assert failure.failure is HostFailure.PYTHON_MISSING
        assert "/nonexistent/python was not found" in failure.detail

    async def test_tensorflow_not_importable(self, sshd: SshServer, tmp_path: Path,
                                             python_without_tf: str) -> None:
        failure = await failure_of(sshd.host("notf", workdir=tmp_path, python=python_without_tf))
        assert failure.failure is HostFailure.TENSORFLOW_MISSING
        assert "cannot import tensorflow" in failure.detail
        assert "No module named 'tensorflow'" in failure.detail


@pytest.mark.usefixtures("nothing_left")
async def test_one_bad_host_does_not_disturb_the_others(sshd: SshServer, tmp_path: Path,
                                                        stub_env: dict[str, str], silent_port: int) -> None:
    good = [sshd.host(f"good{i}", sshd.addresses[i], workdir=tmp_path / f"g{i}", env=stub_env)
            for i in (0, 1)]
    bad = [sshd.host("silent", workdir=tmp_path, port=silent_port),
           sshd.host("locked", workdir=tmp_path, identity=sshd.wrong_key),
           sshd.host("nopy", workdir=tmp_path, python="/nonexistent/python")]
    ssh = SSHLauncher(connect_timeout=2.0)
    try:
        report = await ssh.connect_all([*good, *bad])
        assert sorted(h.name for h in report.hosts) == ["good0", "good1"]
        assert sorted((f.host, f.failure) for f in report.failures) == [
            ("locked", HostFailure.AUTH_REFUSED), ("nopy", HostFailure.PYTHON_MISSING),
            ("silent", HostFailure.UNREACHABLE)]
        # A failed host keeps failing fast (no second timeout); the good ones keep working.
        with pytest.raises(HostError, match="no SSH answer"):
            await ssh.check_ports(bad[0], [2222])
        assert await ssh.check_ports(good[0], []) == []
    finally:
        await ssh.close()


@pytest.mark.usefixtures("nothing_left")
async def test_the_supervisor_refuses_to_start_and_names_the_host(sshd: SshServer, tmp_path: Path,
                                                                  stub_env: dict[str, str]) -> None:
    good = sshd.host("good", workdir=tmp_path / "g", env=stub_env)
    locked = sshd.host("locked", sshd.addresses[1], workdir=tmp_path / "l", identity=sshd.wrong_key)
    hosts_yaml = tmp_path / "hosts.yaml"
    hosts_yaml.write_text(yaml.safe_dump({
        "hosts": {"good": sshd.yaml_entry(good), "locked": sshd.yaml_entry(locked)},
        "cluster": {"ps": ["good:auto"], "worker": ["locked:auto"]},
        "training": {"steps": 30, "log_every": 10},
    }))
    config = load_config(hosts_yaml)
    router = Router.for_config(config)
    supervisor = Supervisor(config, runs_root=tmp_path / "runs", launcher=router)
    try:
        report = await router.connect_all(config.host_of(t) for t in config.tasks)
        assert [f.host for f in report.failures] == ["locked"]
        with pytest.raises(PreflightError) as refused:
            await supervisor.start()
        assert refused.value.problems == (str(report.failures[0]),)
        assert "host locked (root@127.0.0.3" in refused.value.problems[0]
        assert "authentication refused" in refused.value.problems[0]
        assert not (tmp_path / "runs").exists()
    finally:
        await supervisor.close()


@pytest.mark.usefixtures("nothing_left")
async def test_a_start_whose_first_line_is_not_the_pid_says_what_came(sshd: SshServer, tmp_path: Path,
                                                                     stub_env: dict[str, str],
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """Something printed before the task's pid line (a login banner, a task that beat the
    line): the error quotes it, not just "no output" (the stderr it also shows)."""
    host = sshd.host("chatty", workdir=tmp_path, env=stub_env)
    ssh = SSHLauncher()
    try:
        await ssh.prepare(host)
        monkeypatch.setattr(RemoteCommand, "shell_line", lambda _self: "echo 'Welcome to chatty'; exit 3")
        with pytest.raises(HostError) as failed:
            await ssh.start(task(), host, ["true"], {}, None)
    finally:
        await ssh.close()
    assert failed.value.failure is HostFailure.COMMAND_FAILED
    assert failed.value.detail == ("worker0 did not start (exit status 3): no output "
                                   "(its first line, not its pid: 'Welcome to chatty')")
