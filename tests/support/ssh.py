"""Shared pieces of the SSH launcher tests: the test server's description, host entries for
it, and checks that nothing was left running on the "remote" hosts."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import psutil

from tui.config.cluster import HostSpec, Job, TaskSpec
from tui.launch.owner import RUN_ID_ENV

#: How long remote processes may take to go away after their connection or task ended.
GONE_WITHIN = 5.0


@dataclass(frozen=True)
class SshServer:
    """The session's sshd (see conftest.py)."""

    port: int
    addresses: tuple[str, ...]
    directory: Path
    pid: int
    user_key: Path
    wrong_key: Path
    host_key_pub: Path
    other_host_key_pub: Path
    known_hosts: Path
    log: Path

    def host(self, name: str, address: str | None = None, *, workdir: Path | str,
             python: str = sys.executable, env: Mapping[str, str] | None = None,
             known_hosts: Path | None = None, identity: Path | None = None,
             port: int | None = None, jump: str | None = None) -> HostSpec:
        """A hosts.yaml entry for this server (root, the authorised key, its known_hosts)."""
        return HostSpec(name=name, address=address or self.addresses[0], port=port or self.port,
                        user="root", identity=str(identity or self.user_key),
                        known_hosts=str(known_hosts or self.known_hosts), jump=jump, python=python,
                        workdir=str(workdir), env=dict(env or {}))

    def yaml_entry(self, spec: HostSpec) -> dict[str, object]:
        """``spec`` as a hosts.yaml ``hosts:`` entry."""
        return host_entry(spec)


def host_entry(spec: HostSpec) -> dict[str, object]:
    """An SSH host's :class:`HostSpec` as a hosts.yaml ``hosts:`` entry."""
    entry: dict[str, object] = {"address": spec.address, "port": spec.port, "user": spec.user,
                                "identity": spec.identity, "known_hosts": spec.known_hosts,
                                "python": spec.python, "workdir": spec.workdir}
    if spec.env:
        entry["env"] = dict(spec.env)
    return entry


def task(index: int = 0, job: Job = Job.WORKER, host: str = "remote") -> TaskSpec:
    return TaskSpec(job=job, index=index, host=host, port=None)


def remote_processes(sshd_pid: int) -> list[psutil.Process]:
    """Live processes started through the test sshd, other than sshd's own."""
    try:
        children = psutil.Process(sshd_pid).children(recursive=True)
    except psutil.NoSuchProcess:
        return []
    found = []
    for process in children:
        try:
            if process.status() == psutil.STATUS_ZOMBIE or process.name().startswith("sshd"):
                continue
            found.append(process)
        except psutil.Error:
            continue
    return found


def tagged(run_id: str) -> list[psutil.Process]:
    """Live ``-m trainer`` processes of run ``run_id`` anywhere on this machine."""
    found = []
    for process in psutil.process_iter(["cmdline", "status"]):
        try:
            if process.info["status"] == psutil.STATUS_ZOMBIE:
                continue
            if "-m trainer" not in " ".join(process.info["cmdline"] or []):
                continue
            if process.environ().get(RUN_ID_ENV) == run_id:
                found.append(process)
        except psutil.Error:
            continue
    return found


async def wait_nothing_left(sshd_pid: int, run_id: str | None = None,
                            timeout: float = GONE_WITHIN) -> list[psutil.Process]:
    """Poll (no event exists for another process's exit) until nothing started through
    sshd, and no trainer of ``run_id``, is alive; return what is still alive then."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        alive = remote_processes(sshd_pid) + (tagged(run_id) if run_id else [])
        if not alive or loop.time() >= deadline:
            return alive
        await asyncio.sleep(0.1)


def describe(processes: list[psutil.Process]) -> list[str]:
    text = []
    for process in processes:
        try:
            text.append(f"{process.pid}: {' '.join(process.cmdline())[:200]}")
        except psutil.Error:
            text.append(f"{process.pid}: (gone)")
    return text


def kill(processes: list[psutil.Process]) -> None:
    for process in processes:
        try:
            process.kill()
        except psutil.Error:
            pass


def read_environ(pid: int) -> dict[str, str]:
    """The environment a process started with, from /proc."""
    data = Path(f"/proc/{pid}/environ").read_bytes()
    return dict(entry.decode(errors="replace").partition("=")[::2] for entry in data.split(b"\0") if entry)
