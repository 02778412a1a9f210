"""One warm pool on this machine: a ``python -m trainer.warm MODE`` fork server that imported
TensorFlow once, so a task's start does not pay the import again, started by the controller and dying with it.

The server is a child of the controller in its own session, with the kernel's parent-death
signal (SIGKILL) and its stdin a pipe the controller holds: a SIGKILLed controller takes the
server along, and the server's tasks die with the server (their parent-death signal is tied
to it). Its environment carries the controller's identity and the run-id variable set to
:data:`trainer.warm.POOL_RUN_ID`, so the leftover sweep (``--stop-leftovers``) finds the
server and every task it forked (a forked task's /proc/PID/environ is the server's)."""

from __future__ import annotations

import asyncio
import collections
import contextlib
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum

from trainer.warm import IMPORT_TIME_ENV, POOL_ENV, POOL_RUN_ID, ROOM_BYTES, ROOM_ENV
from tui.launch.deathsig import DIE_WITH_PARENT
from tui.launch.owner import CONTROLLER_ENV, RUN_ID_ENV, this_controller
from tui.launch.package import trainer_root
from tui.launch.warm_mode import READY_TIMEOUT

#: Lines of the server's stderr kept to say why it failed.
_STDERR_TAIL = 20


class PoolState(Enum):
    STARTING = "starting"
    READY = "ready"
    FAILED = "failed"   # could not start, or died: its tasks start cold from now on
    CLOSED = "closed"


@dataclass(frozen=True)
class PoolKey:
    """What makes two tasks servable by one pool: the interpreter (as it reports itself:
    two paths to one venv's Python share a pool), the module, the values read at import
    (:func:`trainer.warm.pool_key`) and where the trainer is found."""

    prefix: str
    version: str
    mode: str
    import_key: str
    python_path: str


class WarmPool:
    """One fork server. :meth:`start` once; then :attr:`socket_path` while :attr:`ready`."""

    def __init__(self, key: PoolKey, env: Mapping[str, str], python: str) -> None:
        self.key = key
        #: The interpreter's path as the first task to need the pool gave it, never resolved:
        #: a venv's ``bin/python`` run through its link's target is the base interpreter.
        self.python = python
        self._env = dict(env)
        self.state = PoolState.STARTING
        self.why = ""
        self.pid: int | None = None
        self.socket_path = ""
        self.import_seconds = 0.0
        self._process: asyncio.subprocess.Process | None = None
        self._stderr: collections.deque[str] = collections.deque(maxlen=_STDERR_TAIL)
        self._started = asyncio.Event()
        self._watchers: list[asyncio.Task[None]] = []

    @property
    def ready(self) -> bool:
        return self.state is PoolState.READY

    def pool_env(self) -> dict[str, str]:
        """The server's environment: the controller's, with the task's import-time values
        and PYTHONPATH (the pool must import what the task would), and the markers."""
        env = dict(os.environ)
        for name in (*IMPORT_TIME_ENV, "PYTHONPATH"):
            if name in self._env:
                env[name] = self._env[name]
            else:
                env.pop(name, None)
        env[RUN_ID_ENV] = POOL_RUN_ID
        env[CONTROLLER_ENV] = str(this_controller())
        # The room the server would otherwise re-exec itself to get (one interpreter start
        # less before its import): as ``trainer.warm`` sizes it, from the rest of the block.
        size = sum(len(k) + len(v) + 2 for k, v in env.items())
        env[POOL_ENV] = "1"
        env[ROOM_ENV] = "x" * (size + ROOM_BYTES)
        return env

    async def start(self) -> None:
        """Start the server and wait until it serves (or failed: :attr:`why` says why)."""
        try:
            self._process = await asyncio.create_subprocess_exec(
                self.python, "-m", "trainer.warm", self.key.mode,
                stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE, env=self.pool_env(),
                # ``-m`` puts the working folder first on the path: the trainer's own root,
                # never the user's (whose yaml.py or secrets.py must not run in the pool;
                # each forked task gets its own folder and path back).
                cwd=str(trainer_root()), start_new_session=True, preexec_fn=DIE_WITH_PARENT)
        except OSError as exc:
            self._fail(f"cannot run {self.python}: {exc.strerror or exc}")
            return
        self.pid = self._process.pid
        self._watchers.append(asyncio.create_task(self._read_stderr()))
        try:
            line = await asyncio.wait_for(self._first_line(), READY_TIMEOUT)
        except asyncio.TimeoutError:
            line = {"failed": f"not ready after {READY_TIMEOUT:.0f} s"}
        if "ready" not in line:
            self._fail(str(line.get("failed") or self._exit_text()))
            await self._stop()
            return
        self.socket_path = str(line["ready"])
        seconds = line.get("seconds")
        self.import_seconds = float(seconds) if isinstance(seconds, (int, float)) else 0.0
        self.state = PoolState.READY
        self._watchers.append(asyncio.create_task(self._watch_exit()))

    async def _first_line(self) -> dict[str, object]:
        assert self._process is not None and self._process.stdout is not None
        raw = await self._process.stdout.readline()
        try:
            data = json.loads(raw)
        except ValueError:
            await self._process.wait()
            return {"failed": self._exit_text()}
        return data if isinstance(data, dict) else {"failed": f"said {raw[:80]!r}"}

    def _exit_text(self) -> str:
        code = self._process.returncode if self._process is not None else None
        tail = next((line for line in reversed(self._stderr) if line.strip()), "")
        what = f"exited with {code}" if code is not None else "said nothing"
        return what + (f": {tail}" if tail else "")

    async def _read_stderr(self) -> None:
        assert self._process is not None and self._process.stderr is not None
        while line := await self._process.stderr.readline():
            self._stderr.append(line.decode("utf-8", "replace").rstrip())

    async def _watch_exit(self) -> None:
        assert self._process is not None
        await self._process.wait()
        if self.state is PoolState.READY:
            self._fail(f"pid {self.pid} {self._exit_text()}")

    def _fail(self, why: str) -> None:
        self.state = PoolState.FAILED
        self.why = why

    def check(self) -> bool:
        """Whether the server still runs (a SIGKILLed one may not be reaped yet)."""
        if self.state is not PoolState.READY or self.pid is None:
            return False
        try:
            with open(f"/proc/{self.pid}/stat", "rb") as f:
                state = f.read().rsplit(b")", 1)[1].split()[0]
        except (OSError, IndexError):
            state = b"X"
        if state in (b"Z", b"X"):
            self._fail(f"pid {self.pid} died")
            return False
        return True

    async def close(self) -> None:
        """Stop the server: EOF on its stdin, which SIGKILLs its tasks; SIGKILL if slow."""
        if self.state is not PoolState.FAILED:
            self.state = PoolState.CLOSED
        await self._stop()

    async def _stop(self) -> None:
        process = self._process
        if process is not None and process.returncode is None:
            if process.stdin is not None:
                with contextlib.suppress(OSError, RuntimeError):
                    process.stdin.close()
            try:
                await asyncio.wait_for(process.wait(), 3.0)
            except asyncio.TimeoutError:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, 9)
                await process.wait()
        for watcher in self._watchers:
            watcher.cancel()
