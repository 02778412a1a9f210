"""Warm starts on SSH hosts (TensorFlow imported once per host): one fork server per host and
key, started over the host's connection, and each task started through
``python -m trainer.warm.client``, which hands the task's SSH channel (its stdin/stdout/stderr)
to the pool.

The pool is a long-lived channel process: its stdin is the channel, so when the controller
closes it, the connection drops or the controller dies, the server reads EOF and SIGKILLs
its tasks (which also die by their parent-death signal, and by EOF on their own channel).
The client prints ``tfdist-pid PID warm`` with the forked task's pid, which leads the task's
process group: stopping, killing and /proc sampling reach the real task. A pool that cannot
start or dies: its tasks start cold, with one notice."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass

import asyncssh

from trainer.warm import IMPORT_TIME_ENV, POOL_RUN_ID, pool_key
from tui.config.cluster import HostSpec
from tui.launch.base import HostInfo
from tui.launch.owner import CONTROLLER_ENV, RUN_ID_ENV, this_controller
from tui.launch.ssh.remote_command import PID_PREFIX, RemoteCommand
from tui.launch.ssh.remote_host import RemoteHost
from tui.launch.streams import Prefixed, read_first_line
from tui.launch.warm_mode import READY_TIMEOUT, servable_mode

log = logging.getLogger(__name__)

#: What the client adds to the pid line when the pool forked the task.
WARM_MARK = " warm"


@dataclass
class _RemotePool:
    #: The host's connection it runs on (its lifetime is that connection's).
    remote: RemoteHost | None = None
    process: asyncssh.SSHClientProcess | None = None
    socket_path: str = ""
    why: str = ""
    noticed: bool = False
    tf_version: str = ""

    @property
    def ready(self) -> bool:
        return bool(self.socket_path) and self.process is not None and self.process.returncode is None \
            and not self.process.is_closing()


@dataclass(frozen=True)
class _PoolCommand:
    """What a pool starts with: the interpreter, the environment its import-time values and
    PYTHONPATH come from, its folder and the trainer's path."""

    python: str
    env: Mapping[str, str]
    workdir: str
    python_path: str
    #: The host's lease (tui.launch.ssh.host_link), which the pool holds as its tasks do.
    lease_file: str = ""
    lease: float = 0.0


def parse_pid(line: str) -> tuple[int | None, bool]:
    """(pid, warm) from a task's first line (``tfdist-pid N`` or ``tfdist-pid N warm``)."""
    if not line.startswith(PID_PREFIX):
        return None, False
    text = line[len(PID_PREFIX):].strip()
    warm = text.endswith(WARM_MARK.strip())
    text = text.removesuffix(WARM_MARK.strip()).strip()
    return (int(text) if text.isdigit() and int(text) > 1 else None), warm


class RemotePools:
    """The warm pools on SSH hosts, one per (host, interpreter, mode, import key)."""

    def __init__(self) -> None:
        self._pools: dict[tuple[str, str, str, str], _RemotePool] = {}
        self._starting: dict[tuple[str, str, str, str], asyncio.Task[None]] = {}
        self.pending_notice = ""

    async def command(self, remote: RemoteHost, info: HostInfo, host: HostSpec,
                      cold: RemoteCommand) -> RemoteCommand | None:
        """The client's command for a task ``cold`` would start, or None (start it cold)."""
        served = servable_mode(cold.argv, info.python)
        if served is None:
            return None
        mode, args = served
        key = (host.name, cold.argv[0], mode, pool_key(mode, args, {**host.env, **cold.env}))
        started = _PoolCommand(cold.argv[0], cold.env, info.workdir, cold.python_path, cold.lease_file,
                               cold.lease)
        pool = await self._pool(key, remote, started)
        if not pool.ready:
            if not pool.noticed:
                pool.noticed = True
                why = pool.why or "the pool ended"
                self.pending_notice = (f"warm start on {host.name} unavailable ({why}); its tasks start "
                                       f"cold: check that `{cold.argv[0]} -m trainer.warm {mode}` runs "
                                       "there, or pass --cold")
            return None
        client = (cold.argv[0], "-m", "trainer.warm.client", pool.socket_path, mode, *args)
        return dataclasses.replace(cold, argv=client, prints_pid=False)

    async def prestart(self, remote: RemoteHost, host: HostSpec, mode: str, workdir: str,
                       python_path: str, lease_file: str = "", lease: float = 0.0) -> str | None:
        """Start ``host``'s pool for ``mode`` now, as its tasks will ask for it (the host's
        interpreter and environment, no task arguments), while the other hosts are checked:
        pools then import TensorFlow on every host at once, not one host after another as
        the tasks start. The TensorFlow version it imported, or None when it failed (its
        tasks will start cold, with the notice)."""
        key = (host.name, host.interpreter, mode, pool_key(mode, (), host.env))
        pool = await self._pool(key, remote, _PoolCommand(host.interpreter, host.env, workdir, python_path,
                                                          lease_file, lease))
        return (pool.tf_version or None) if pool.ready else None

    async def _pool(self, key: tuple[str, str, str, str], remote: RemoteHost,
                    command: _PoolCommand) -> _RemotePool:
        """The pool of ``key``, started once however many callers ask at the same time."""
        pool = self._pools.get(key)
        if pool is not None and self._served_and_ended(key, pool):
            # Said once per pool that ended (a restart that fails says why with its notice).
            how = "with its connection" if pool.remote is not remote else "on its connection"
            self.pending_notice = (f"the warm pool on {key[0]} had ended {how}; started again for "
                                   "the tasks restarted there")
            pool = None
        if pool is None:
            pool = self._pools[key] = _RemotePool(remote)
            self._starting[key] = asyncio.ensure_future(self._start(pool, remote, command, key[2]))
        await asyncio.shield(self._starting[key])
        return pool

    def _served_and_ended(self, key: tuple[str, str, str, str], pool: _RemotePool) -> bool:
        """A pool that served on the host and has ended: start it again (on the host's
        connection now). It ends with its connection, and with its lease on a connection
        that outlived a cut as long as the lease: left ended, every task restarted on that
        host started cold (81 s to running on the lab), with a notice to check that its Python
        runs the pool. A pool that never started is not tried again."""
        starting = self._starting.get(key)
        return starting is not None and starting.done() and bool(pool.socket_path) and not pool.ready

    def take_notice(self) -> str:
        notice, self.pending_notice = self.pending_notice, ""
        return notice

    async def _start(self, pool: _RemotePool, remote: RemoteHost, started: _PoolCommand, mode: str) -> None:
        env = {k: v for k, v in started.env.items() if k in IMPORT_TIME_ENV or k == "PYTHONPATH"}
        env[RUN_ID_ENV] = POOL_RUN_ID
        env[CONTROLLER_ENV] = str(this_controller())
        # The pool holds the host's lease too: a pool cut off from the controller ends, and
        # its tasks with it (their parent-death signal), when the lease runs out.
        command = RemoteCommand(argv=(started.python, "-m", "trainer.warm", mode), env=env,
                                cwd=started.workdir, python_path=started.python_path,
                                watch_connection=bool(started.lease_file), lease_file=started.lease_file,
                                lease=started.lease)
        try:
            pool.process = await remote.open_process(command.shell_line())
            pool.process.stdin.write(command.env_input())  # the env: never in a command line
            # The wrapper's pid line, then the server's ready line (perhaps read with it).
            _, head = await asyncio.wait_for(read_first_line(pool.process.stdout), READY_TIMEOUT)
            ready, _ = await asyncio.wait_for(read_first_line(Prefixed(head, pool.process.stdout)),
                                              READY_TIMEOUT)
        except (asyncio.TimeoutError, asyncssh.Error, OSError) as exc:
            pool.why = f"the pool did not start: {exc!r}"
            await self._close(pool)
            return
        try:
            answer = json.loads(ready or b"")
        except ValueError:
            answer = {}
        if not isinstance(answer, dict) or "ready" not in answer:
            pool.why = str(answer.get("failed") if isinstance(answer, dict) and answer.get("failed")
                           else f"the pool said {ready!r}")
            await self._close(pool)
            return
        pool.socket_path = str(answer["ready"])
        pool.tf_version = str(answer.get("tf_version") or "")

    async def _close(self, pool: _RemotePool) -> None:
        if pool.process is not None:
            with contextlib.suppress(asyncssh.Error, OSError, RuntimeError):
                pool.process.stdin.write_eof()  # the server ends, and its tasks with it
            pool.process.close()

    async def close(self) -> None:
        for task in self._starting.values():
            task.cancel()
        for pool in self._pools.values():
            await self._close(pool)
        self._pools.clear()
        self._starting.clear()
