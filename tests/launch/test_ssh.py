"""The SSH launcher against a real sshd, with a stub TensorFlow on the "remote" hosts so that
preparing a host costs milliseconds: tasks' lifecycle, quoting, concurrency, port checks,
deployment, jump hosts and the leftover sweep."""

from __future__ import annotations

import asyncio
import contextlib
import errno
import os
import socket
import sys
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import psutil
import pytest

from tests.support.ssh import (
    SshServer,
    describe,
    kill,
    read_environ,
    remote_processes,
    task,
    wait_nothing_left,
)
from tui.config.cluster import HostSpec
from tui.core.supervisor.busy import BUSY_CORES, cores_used
from tui.launch.errors import HostError, HostFailure
from tui.launch.leftover_search import StopResult
from tui.launch.lines import OutputLine, Stream
from tui.launch.owner import RUN_ID_ENV
from tui.launch.router import Router
from tui.launch.ssh import launcher as ssh_launcher
from tui.launch.ssh.deploy import MARKER, TrainerPackage, local_package
from tui.launch.ssh.launcher import SSHLauncher
from tui.launch.ssh.remote_command import RemoteCommand
from tui.launch.streams import each_line

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def stub_env(stub_tf: Path) -> dict[str, str]:
    return {"PYTHONPATH": str(stub_tf)}


@contextlib.asynccontextmanager
async def launcher(sshd: SshServer, hosts: dict[str, HostSpec] | None = None,
                   **options: object) -> AsyncIterator[SSHLauncher]:
    """An SSHLauncher closed on the way out; afterwards nothing may be left on the hosts."""
    ssh = SSHLauncher(hosts, **options)  # type: ignore[arg-type]
    try:
        yield ssh
    finally:
        await ssh.close()
        left = await wait_nothing_left(sshd.pid)
        kill(left)
        assert not left, f"left running on the hosts: {describe(left)}"


def python(code: str) -> list[str]:
    return [sys.executable, "-c", code]


def connections_to(port: int) -> list[tuple[str, int]]:
    """This process's TCP connections to ``port`` (remote addresses)."""
    return [(c.raddr.ip, c.raddr.port) for c in psutil.Process().net_connections("tcp")
            if c.raddr and c.raddr.port == port and c.status == psutil.CONN_ESTABLISHED]


async def test_a_task_streams_takes_stdin_and_stops_with_its_group(sshd: SshServer, tmp_path: Path,
                                                                   stub_env: dict[str, str]) -> None:
    host = sshd.host("a", workdir=tmp_path / "work", env=stub_env)
    code = ("import os, subprocess, sys, time\n"
            "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\n"
            "print('child', child.pid, flush=True)\n"
            "print('to stderr', file=sys.stderr, flush=True)\n"
            "print('got', sys.stdin.readline().strip(), flush=True)\n"
            "time.sleep(60)\n")
    async with launcher(sshd) as ssh:
        process = await ssh.start(task(), host, python(code), {"PYTHONUNBUFFERED": "1"}, host.workdir)
        remote = psutil.Process(process.pid)
        assert os.getpgid(process.pid) == process.pid  # its own group: stop reaches children
        assert remote.cwd() == str(tmp_path / "work")
        await process.send("go")
        lines: list[OutputLine] = []
        output = each_line(process.output())
        async for line in output:
            lines.append(line)
            if line.text == "got go":
                break
        child = psutil.Process(int(next(li.text.split()[1] for li in lines if li.text.startswith("child "))))
        await process.terminate()
        assert await asyncio.wait_for(process.wait(), 5) == -15
        lines += [line async for line in output]
        assert OutputLine(Stream.STDERR, "to stderr") in lines
        assert not any(line.text.startswith("tfdist-pid") for line in lines)
        _, alive = await asyncio.to_thread(psutil.wait_procs, [child], 5)
        assert not alive, "the task's child outlived the stop of its process group"
        with pytest.raises(OSError):
            await process.send("more")


async def test_kill_ends_a_task_that_ignores_sigterm(sshd: SshServer, tmp_path: Path,
                                                     stub_env: dict[str, str]) -> None:
    host = sshd.host("a", workdir=tmp_path, env=stub_env)
    code = ("import signal, sys, time\n"
            "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
            "print('ready', flush=True)\n"
            "time.sleep(60)\n")
    async with launcher(sshd) as ssh:
        process = await ssh.start(task(), host, python(code), {"PYTHONUNBUFFERED": "1"}, None)
        lines = each_line(process.output())
        assert (await anext(lines)).text == "ready"
        await process.terminate()
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(asyncio.shield(process.wait()), 0.5)
        await process.kill()
        assert await asyncio.wait_for(process.wait(), 5) == -9
        await lines.aclose()


async def test_the_cpu_a_remote_task_uses_is_read_over_its_connection(sshd: SshServer, tmp_path: Path,
                                                                       stub_env: dict[str, str]) -> None:
    """What the hang rule asks before it ends a worker past its target (tui.core.supervisor.busy):
    a computing task's group uses a core, a sleeping one none."""
    host = sshd.host("a", workdir=tmp_path, env=stub_env)
    async with launcher(sshd) as ssh:
        busy = await ssh.start(task(0), host, python("while True: pass"), {}, None)
        idle = await ssh.start(task(1), host, python("import time; time.sleep(60)"), {}, None)
        try:
            assert (await cores_used(ssh, host, busy.pid, asyncio.sleep, 1.0) or 0.0) > BUSY_CORES
            assert await cores_used(ssh, host, idle.pid, asyncio.sleep, 1.0) == 0.0
        finally:
            for process in (busy, idle):
                await process.kill()
                await asyncio.wait_for(process.wait(), 5)


async def test_no_value_reaches_the_remote_shell_unquoted(sshd: SshServer, tmp_path: Path,
                                                          stub_env: dict[str, str]) -> None:
    """An env value and a workdir full of shell syntax: they arrive literally, nothing runs."""
    trap = tmp_path / "TRAP"
    value = f"$(touch {trap}) ; touch {trap} `touch {trap}` ' \" $HOME"
    workdir = tmp_path / "w $(touch TRAP) ; touch TRAP"  # relative: would run in cwd
    host = sshd.host("a", workdir=workdir, env={**stub_env, "T_VALUE": value})
    code = "import os, sys, time; print(os.environ['T_VALUE']); sys.stdout.flush(); sys.stdin.read()"
    async with launcher(sshd) as ssh:
        process = await ssh.start(task(), host, python(code), dict(host.env), host.workdir)
        # python runs now: its /proc entry shows its environment
        first = await anext(each_line(process.output()))
        assert first.text == value
        assert read_environ(process.pid)["T_VALUE"] == value
        assert psutil.Process(process.pid).cwd() == str(workdir)
        await process.terminate()
        await process.wait()
    files = [p for p in tmp_path.rglob("TRAP") if p.is_file()]
    assert not files and not trap.exists() and not (Path.home() / "TRAP").exists()


async def test_hosts_are_prepared_concurrently_and_share_one_connection(sshd: SshServer, tmp_path: Path,
                                                                         stub_env: dict[str, str]) -> None:
    """Four hosts are prepared at the same time: each probe waits (in the stub TensorFlow)
    until all four have started, which only happens if they run at once. 16 tasks on them
    then use one connection per host."""
    barrier = tmp_path / "barrier"
    barrier.mkdir()
    hosts = [sshd.host(f"h{i}", sshd.addresses[i % 2], workdir=tmp_path / f"h{i}",
                       env={**stub_env, "TFDIST_STUB_TF_BARRIER": f"{barrier}:4"})
             for i in range(4)]
    async with launcher(sshd) as ssh:
        report = await ssh.connect_all(hosts)
        assert report.ok and len(report.hosts) == 4, report.failures
        processes = await asyncio.gather(*(ssh.start(task(i), hosts[i % 4], ["cat"], {}, None)
                                           for i in range(16)))
        assert len({p.pid for p in processes}) == 16
        assert len(connections_to(sshd.port)) == 4
        await asyncio.gather(*(p.terminate() for p in processes))  # as the supervisor stops them
        assert set(await asyncio.gather(*(p.wait() for p in processes))) <= {-15, 0}
        assert all(p.host == hosts[i % 4].name for i, p in enumerate(processes))


async def test_more_tasks_than_sshd_allows_sessions_open_a_second_connection(
        sshd: SshServer, tmp_path: Path, stub_env: dict[str, str]) -> None:
    host = sshd.host("a", workdir=tmp_path, env=stub_env)
    async with launcher(sshd) as ssh:
        processes = await asyncio.gather(*(ssh.start(task(i), host, ["cat"], {}, None) for i in range(12)))
        assert len({p.pid for p in processes}) == 12
        assert len(connections_to(sshd.port)) == 2  # sshd's MaxSessions is 10 by default
        await asyncio.gather(*(p.terminate() for p in processes))
        await asyncio.gather(*(p.wait() for p in processes))


async def test_a_jump_host_carries_the_connection(sshd: SshServer, tmp_path: Path,
                                                  stub_env: dict[str, str]) -> None:
    bastion = sshd.host("bastion", sshd.addresses[0], workdir=tmp_path / "b", env=stub_env)
    inner = sshd.host("inner", sshd.addresses[1], workdir=tmp_path / "i", env=stub_env, jump="bastion")
    async with launcher(sshd, {"bastion": bastion, "inner": inner}) as ssh:
        report = await ssh.connect_all([inner])
        assert report.ok, report.failures
        peers = {address for address, _ in connections_to(sshd.port)}
        assert peers == {sshd.addresses[0]}  # inner is reached through the bastion only


async def test_port_checks_and_reservations_happen_on_the_host(sshd: SshServer, tmp_path: Path,
                                                               stub_env: dict[str, str]) -> None:
    host = sshd.host("a", workdir=tmp_path, env=stub_env)
    with socket.socket() as busy:
        busy.bind(("0.0.0.0", 0))
        busy.listen()
        busy_port = busy.getsockname()[1]
        async with launcher(sshd) as ssh:
            problems = await ssh.check_ports(host, [busy_port])
            assert [(p.host, p.port, p.reason, p.pid) for p in problems] == [("a", busy_port, "in use",
                                                                             os.getpid())]
            held = await ssh.free_ports(host, 3, frozenset({busy_port}))
            ports = [r.port for r in held]
            assert len(set(ports)) == 3 and busy_port not in ports
            with socket.socket() as probe, pytest.raises(OSError) as refused:
                probe.bind(("0.0.0.0", ports[0]))
            assert refused.value.errno == errno.EADDRINUSE
            held[0].release()
            # A start waits until the release took effect, so the task can bind the port.
            code = f"import socket; s = socket.socket(); s.bind(('0.0.0.0', {ports[0]})); print('bound')"
            process = await ssh.start(task(), host, python(code), {"PYTHONUNBUFFERED": "1"}, None)
            assert [line.text async for line in each_line(process.output())] == ["bound"]
            assert await process.wait() == 0
            for reservation in held:
                reservation.release()


async def test_the_trainer_is_uploaded_once(sshd: SshServer, tmp_path: Path,
                                            stub_env: dict[str, str]) -> None:
    host = sshd.host("a", workdir=tmp_path / "work", env={**stub_env, "CUDA_VISIBLE_DEVICES": "3,5"})
    package = local_package()
    deployed = tmp_path / "work" / package.dirname
    async with launcher(sshd) as ssh:
        (first,) = (await ssh.connect_all([host])).hosts
    assert first.uploaded and first.trainer_path == str(deployed)
    # Its cores and GPUs were probed there too, with the host's env (tui.plan.allocation).
    assert first.resources is not None and first.resources.gpus == ("3", "5")
    assert first.resources.cpus == tuple(sorted(os.sched_getaffinity(0)))  # the same machine
    marker = (deployed / MARKER).stat().st_mtime_ns
    for file in package.files:
        assert (deployed / file.path).read_bytes() == file.data
    assert not list((tmp_path / "work").glob("*.partial-*"))
    async with launcher(sshd) as ssh:
        (second,) = (await ssh.connect_all([host])).hosts
    assert not second.uploaded and second.trainer_path == first.trainer_path
    assert (deployed / MARKER).stat().st_mtime_ns == marker


def test_the_package_digest_follows_its_content(tmp_path: Path) -> None:
    package = local_package()
    for file in package.files:
        (tmp_path / file.path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / file.path).write_bytes(file.data)
    (tmp_path / "trainer" / "__pycache__").mkdir(exist_ok=True)
    (tmp_path / "trainer" / "__pycache__" / "x.pyc").write_bytes(b"ignored")
    assert TrainerPackage.from_directory(tmp_path).digest == package.digest
    (tmp_path / "trainer" / "__init__.py").write_bytes(b"# changed\n")
    assert TrainerPackage.from_directory(tmp_path).digest != package.digest


async def test_the_sweep_finds_and_stops_a_task_of_an_earlier_run(sshd: SshServer, tmp_path: Path,
                                                                  stub_env: dict[str, str],
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    host = sshd.host("a", workdir=tmp_path, env=stub_env)
    old_run = f"old-{uuid.uuid4().hex[:8]}"
    # A task that ignores its stdin outlived the controller that started it, before tasks had a
    # connection watcher (tui.launch.ssh.remote_command): started here without one.
    monkeypatch.setattr(ssh_launcher, "RemoteCommand",
                        lambda **kw: RemoteCommand(**{**kw, "watch_connection": False}))
    code = "import time; time.sleep(120)"
    earlier = SSHLauncher()
    process = await earlier.start(task(), host, [*python(code), "-m", "trainer"], {RUN_ID_ENV: old_run}, None)
    await earlier.close()
    assert psutil.pid_exists(process.pid)
    async with launcher(sshd) as ssh:
        found = [t for t in await ssh.find_leftovers(host) if t.run_id == old_run]
        assert [(t.host, t.pid, t.pgid) for t in found] == [("a", process.pid, process.pid)]
        assert found[0].cmdline == (*python(code), "-m", "trainer")
        assert not [t for t in await ssh.find_leftovers(host, exclude_run_ids=[old_run])
                    if t.run_id == old_run]
        (stopped,) = await ssh.stop_leftovers(host, found, grace=2)
        assert stopped.result is StopResult.STOPPED
        assert not [p for p in remote_processes(sshd.pid) if p.pid == process.pid]


async def test_the_router_sweeps_localhost_too(tmp_path: Path) -> None:
    old_run = f"old-{uuid.uuid4().hex[:8]}"
    local = await asyncio.create_subprocess_exec(
        *python("import time; time.sleep(120)"), env={**os.environ, RUN_ID_ENV: old_run},
        start_new_session=True)
    router = Router()
    try:
        localhost = HostSpec(name="localhost", address="localhost")
        report = await router.sweep_hosts([localhost])
        found = [t for t in report.tasks if t.run_id == old_run]
        assert [t.pid for t in found] == [local.pid] and not report.failures
        (stopped,) = await router.stop_leftovers(localhost, found, grace=2)
        assert stopped.result is StopResult.STOPPED
        assert await asyncio.wait_for(local.wait(), 5) == -15
    finally:
        if local.returncode is None:
            local.kill()
            await local.wait()
        await router.close()


async def test_killing_the_sshd_side_ends_the_task(sshd: SshServer, tmp_path: Path,
                                                   stub_env: dict[str, str]) -> None:
    """The connection drops (its sshd process dies): the task's stdin ends, and a task that
    exits on EOF, as the trainer does, is gone within 5 s."""
    host = sshd.host("a", workdir=tmp_path, env=stub_env)
    code = "import sys; print('up', flush=True); sys.stdin.read()"
    async with launcher(sshd) as ssh:
        process = await ssh.start(task(), host, python(code), {}, None)
        assert (await anext(each_line(process.output()))).text == "up"
        remote = psutil.Process(process.pid)
        session = remote.parent()
        assert session is not None and session.name().startswith("sshd")
        session.kill()
        gone, _ = await asyncio.to_thread(psutil.wait_procs, [remote], 5)
        assert gone
        try:
            await asyncio.wait_for(process.wait(), 5)
        except HostError as exc:
            assert exc.failure is HostFailure.CONNECTION_LOST
