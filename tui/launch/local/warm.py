"""Warm starts on this machine (TensorFlow imported once): a task of the built-in trainer, or a user's
program under the shim, is forked from a pool that already imported TensorFlow
(:mod:`trainer.warm`) instead of exec'ing a new interpreter.

Nothing the controller relies on changes: the task has its own stdin/stdout/stderr pipes
(made here, handed to the pool with SCM_RIGHTS), leads its own session and process group
(signals go to its real pid, ``/proc`` sampling reads it), dies when the pool dies, and the
pool dies with the controller. Its exit status comes back over the pool's socket.

A task the pool cannot serve starts cold (returns None), as does every task once its pool
failed: the first failure of each pool is one notice (:attr:`WarmTask.launch_notice`)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import socket
from collections.abc import AsyncGenerator, Callable, Mapping, Sequence

from trainer.warm import pool_key, wire
from tui.launch.lines import MAX_LINE_BYTES, OutputBatch
from tui.launch.local.interpreter import Interpreter, identify, locate
from tui.launch.local.pipe_output import PipeOutput
from tui.launch.local.pipes import output_pipe
from tui.launch.local.warm_pool import PoolKey, PoolState, WarmPool
from tui.launch.warm_mode import servable_mode

log = logging.getLogger(__name__)

#: How long a pool may take to answer a request (it forks at once; a loaded machine).
REQUEST_TIMEOUT = 30.0


class WarmTask:
    """A task forked by a pool. Implements :class:`tui.launch.base.RunningTask`."""

    warm = True

    def __init__(self, pid: int, conn: socket.socket, stdin: asyncio.StreamWriter,
                 output: PipeOutput, notice: str = "") -> None:
        self._pid = pid
        self._conn = conn
        self._stdin = stdin
        self._output = output
        self._code: int | None = None
        self._exit: asyncio.Task[int] = asyncio.ensure_future(self._read_exit())
        #: A notice to show once with this task (the pool of an earlier task failed).
        self.launch_notice = notice

    @property
    def pid(self) -> int:
        return self._pid

    def output(self) -> AsyncGenerator[OutputBatch, None]:
        return self._output.batches()

    async def hand_output(self, handle: Callable[[OutputBatch], None]) -> None:
        """:class:`tui.launch.base.HandsOutput`: the batches handed on as they are read."""
        await self._output.hand(handle)

    async def _read_exit(self) -> int:
        reader, writer = await asyncio.open_unix_connection(sock=self._conn)
        try:
            line = await reader.readline()
        finally:
            writer.close()
            self._close_stdin()  # as an exited subprocess's pipes are: no descriptor kept
        try:
            return int(wire.parse_reply(line)["exit"])
        except (wire.WireError, KeyError, ValueError):
            # The pool died; the task died with it (its parent-death signal is SIGKILL).
            return -int(signal.SIGKILL)

    async def wait(self) -> int:
        if self._code is None:
            self._code = await asyncio.shield(self._exit)
        return self._code

    async def send(self, line: str) -> None:
        if self._stdin.is_closing():
            raise BrokenPipeError(f"stdin of pid {self._pid} is closed")
        self._stdin.write(line.encode() + b"\n")
        await self._stdin.drain()

    async def terminate(self) -> None:
        self._close_stdin()
        self._signal_group(signal.SIGTERM)
        self._signal_group(signal.SIGCONT)  # a stopped task acts on SIGTERM once continued

    async def kill(self) -> None:
        self._close_stdin()
        self._signal_group(signal.SIGKILL)

    def _close_stdin(self) -> None:
        if not self._stdin.is_closing():
            with contextlib.suppress(OSError, RuntimeError):
                self._stdin.close()

    def _signal_group(self, sig: signal.Signals) -> None:
        # As LocalTask: the task leads its own group (setsid in the child), and its pid is
        # not reused while the pool has not reaped it, which it reports before we stop.
        if self._exit.done():
            return
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self._pid, sig)


class WarmPools:
    """The pools of this machine, one per :class:`PoolKey`, made on first need and kept
    for the controller's life (a relaunch, a restart reuse them)."""

    def __init__(self, max_line: int = MAX_LINE_BYTES) -> None:
        self._max_line = max_line
        self._pools: dict[PoolKey, WarmPool] = {}
        self._starting: dict[PoolKey, asyncio.Task[None]] = {}
        self._noticed: set[PoolKey] = set()
        self._refusals: set[str] = set()
        self._interpreters: dict[str, asyncio.Future[Interpreter | None]] = {}
        self._notices: list[str] = []
        self._prestarts: set[asyncio.Task[None]] = set()

    @property
    def pools(self) -> tuple[WarmPool, ...]:
        """Every pool made so far (running, failed or closed)."""
        return tuple(self._pools.values())

    def prestart(self, argv: Sequence[str], env: Mapping[str, str]) -> None:
        """Start, without waiting, the pool a task with ``argv`` and ``env`` will fork from,
        so that its TensorFlow import overlaps whatever comes before the task's start (the
        controller's own start, the preflight). Says nothing: a pool that fails says so when
        its first task asks (:meth:`start`)."""
        if servable_mode(argv, None) is None:
            return  # (no pool would serve it: nothing to wait for either)
        prestart = asyncio.ensure_future(self._prestart(tuple(argv), dict(env)))
        self._prestarts.add(prestart)
        prestart.add_done_callback(self._prestarts.discard)

    async def _prestart(self, argv: tuple[str, ...], env: dict[str, str]) -> None:
        wanted = await self._wanted(argv, env)
        if wanted is not None:
            key, python, _ = wanted
            self._pool_now(key, env, python)

    async def _wanted(self, argv: Sequence[str], env: Mapping[str, str]
                      ) -> tuple[PoolKey, str, tuple[str, ...]] | None:
        """The pool that would serve ``argv`` (its key and interpreter path) and the task's
        arguments for it; None when no pool can (a cold start says what is wrong)."""
        served = servable_mode(argv, None)
        if served is None:
            return None
        mode, args = served
        # The interpreter as the task would run it: a venv's by its own path (see interpreter).
        python = locate(argv[0], env.get("PATH", os.environ.get("PATH")))
        interpreter = await self._identify(python) if python is not None else None
        if python is None or interpreter is None:
            return None
        return PoolKey(*interpreter.identity, mode, pool_key(mode, args, env), env.get("PYTHONPATH", "")), \
            python, args

    async def start(self, name: str, argv: Sequence[str], env: Mapping[str, str],
                    cwd: str | None) -> WarmTask | None:
        """Fork ``argv`` from a pool; None when it must start cold (a notice is logged)."""
        wanted = await self._wanted(argv, env)
        if wanted is None:
            return None
        key, python, args = wanted
        pool = await self._pool(key, env, python)
        if not pool.check():
            self._fail_notice(key, pool)
            return None
        try:
            return await self._request(pool, name, args, env, cwd)
        except (OSError, wire.WireError, asyncio.TimeoutError) as exc:
            if pool.check():  # the pool runs but this request failed: this task goes cold
                self._notices.append(f"{name}: warm start failed ({exc or type(exc).__name__}); "
                                     "it starts cold")
                return None
            self._fail_notice(key, pool)
            return None

    async def _identify(self, python: str) -> Interpreter | None:
        # Asked once per path, also when a prestart and a task ask at the same time.
        if python not in self._interpreters:
            self._interpreters[python] = asyncio.ensure_future(identify(python))
        return await asyncio.shield(self._interpreters[python])

    def _pool_now(self, key: PoolKey, env: Mapping[str, str], python: str) -> WarmPool:
        """The pool of ``key``, started now if there is none yet (no await: never two)."""
        pool = self._pools.get(key)
        if pool is None:
            pool = self._pools[key] = WarmPool(key, env, python)
            self._starting[key] = asyncio.ensure_future(pool.start())
        return pool

    async def _pool(self, key: PoolKey, env: Mapping[str, str], python: str) -> WarmPool:
        pool = self._pool_now(key, env, python)
        starting = self._starting.get(key)
        if starting is not None:
            await asyncio.shield(starting)
        return pool

    def _fail_notice(self, key: PoolKey, pool: WarmPool) -> None:
        if key in self._noticed or pool.state is PoolState.CLOSED:
            return
        self._noticed.add(key)
        self._notices.append(
            f"warm start unavailable ({pool.why or pool.state.value}); tasks start cold: check that "
            f"`{pool.python} -m trainer.warm {key.mode}` runs on this machine, or pass --cold")

    def take_notice(self) -> str:
        """What went wrong with warm starts since the last call, said once ("" if nothing):
        a pool that failed, a request that did."""
        notice = "; ".join(self._notices)
        self._notices.clear()
        return notice

    async def _request(self, pool: WarmPool, name: str, args: tuple[str, ...],
                       env: Mapping[str, str], cwd: str | None) -> WarmTask | None:
        pipes = [os.pipe(), output_pipe(), output_pipe()]  # (read, write) each; not inheritable
        ours = [pipes[0][1], pipes[1][0], pipes[2][0]]
        theirs = (pipes[0][0], pipes[1][1], pipes[2][1])
        try:
            request = wire.Request(args, dict(env), cwd)
            conn, answer = await asyncio.wait_for(
                asyncio.to_thread(_ask, pool.socket_path, request, theirs), REQUEST_TIMEOUT)
        except BaseException:
            for fd in ours:
                os.close(fd)
            raise
        finally:
            for fd in theirs:
                os.close(fd)
        if conn is None:
            for fd in ours:
                os.close(fd)
            if answer not in self._refusals:  # once per reason: every task would say it
                self._refusals.add(answer)
                self._notices.append(f"{name}: the warm pool cannot serve it ({answer}); it starts cold")
            return None
        loop = asyncio.get_running_loop()
        stdin_transport, stdin_proto = await loop.connect_write_pipe(
            asyncio.streams.FlowControlMixin, os.fdopen(ours[0], "wb", buffering=0))
        stdin = asyncio.StreamWriter(stdin_transport, stdin_proto, None, loop)
        output = await PipeOutput.open(ours[1], ours[2], self._max_line)
        return WarmTask(int(answer), conn, stdin, output, self.take_notice())

    async def close(self) -> None:
        for task in (*self._prestarts, *self._starting.values()):
            if not task.done():
                task.cancel()
        await asyncio.gather(*(pool.close() for pool in self._pools.values()), return_exceptions=True)
        self._pools.clear()
        self._starting.clear()



def _ask(path: str, request: wire.Request, fds: tuple[int, int, int]) -> tuple[socket.socket | None, str]:
    """(connection, pid) or (None, why refused); blocking, run in a thread."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.settimeout(REQUEST_TIMEOUT)
        sock.connect(path)
        wire.send_request(sock, request, fds)
        data = b""
        while not data.endswith(b"\n"):
            # One byte at a time: the exit line may follow at once, and is the task's to read.
            more = sock.recv(1)
            if not more:
                raise wire.WireError("the pool closed the connection")
            data += more
        answer = wire.parse_reply(data)
    except BaseException:
        sock.close()
        raise
    if "pid" in answer:
        sock.setblocking(False)
        return sock, str(int(answer["pid"]))
    sock.close()
    return None, str(answer.get("refused", "no pid in the answer"))
