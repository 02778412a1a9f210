"""Launch tasks as local asyncio subprocesses, each in its own process group."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from collections.abc import AsyncGenerator, Callable, Iterable, Mapping, Sequence

from tui.config.cluster import HostSpec, TaskSpec
from tui.launch.base import ConnectReport, LaunchError, PortProblem, PortReservation
from tui.launch.command_stream import LocalCommandStream, open_local_command
from tui.launch.deathsig import dying_with_parent
from tui.launch.lines import MAX_LINE_BYTES, OutputBatch
from tui.launch.local import ports as local_ports
from tui.launch.local.pipe_output import PipeOutput
from tui.launch.local.pipes import output_pipe
from tui.launch.local.warm import WarmPools, WarmTask


class LocalTask:
    """A local task process. Implements :class:`tui.launch.base.RunningTask`."""

    def __init__(self, process: asyncio.subprocess.Process, output: PipeOutput) -> None:
        self._process = process
        self._output = output  # stdout, stderr: the wide pipes, read straight into lines
        self._signalled_group = False
        #: A notice to show once with this task (a warm pool failed: it started cold).
        self.launch_notice = ""

    @property
    def pid(self) -> int | None:
        return self._process.pid

    def output(self) -> AsyncGenerator[OutputBatch, None]:
        """Both streams merged in arrival order, a read at a time; ends when both reached EOF."""
        return self._output.batches()

    async def hand_output(self, handle: Callable[[OutputBatch], None]) -> None:
        """:class:`tui.launch.base.HandsOutput`: the batches handed on as they are read."""
        await self._output.hand(handle)

    async def wait(self) -> int:
        return await self._process.wait()

    async def send(self, line: str) -> None:
        stdin = self._process.stdin
        if stdin is None or stdin.is_closing():
            raise BrokenPipeError(f"stdin of pid {self._process.pid} is closed")
        stdin.write(line.encode() + b"\n")
        await stdin.drain()

    async def terminate(self) -> None:
        self._close_stdin()
        self._signal_group(signal.SIGTERM)
        # A stopped task (SIGSTOP, a debugger) acts on SIGTERM only once continued.
        self._signal_group(signal.SIGCONT)

    async def kill(self) -> None:
        self._close_stdin()
        self._signal_group(signal.SIGKILL)

    def _close_stdin(self) -> None:
        stdin = self._process.stdin
        if stdin is not None and not stdin.is_closing():
            with contextlib.suppress(OSError, RuntimeError):
                stdin.close()

    def _signal_group(self, sig: signal.Signals) -> None:
        # The task is the leader of its own session and process group (start_new_session),
        # so its pid is the group id, and signalling the group reaches any children it
        # started too. A group id cannot be reused while any member lives, and once all
        # members are gone killpg fails with ESRCH, which we ignore.
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self._process.pid, sig)


class LocalLauncher:
    """Starts tasks on this machine. Implements :class:`tui.launch.base.Launcher` for the
    host ``localhost`` only; remote hosts need the SSH launcher. With ``warm``, tasks it can
    serve are forked from a pool that imported TensorFlow once (:mod:`tui.launch.local.warm`)."""

    def __init__(self, max_line: int = MAX_LINE_BYTES, warm: bool = True) -> None:
        self._max_line = max_line
        self._warm_on = warm
        self._warm: WarmPools | None = None

    async def start(self, task: TaskSpec, host: HostSpec, argv: Sequence[str],
                    env: Mapping[str, str], cwd: str | None) -> LocalTask | WarmTask:
        self._require_local(host)
        if not argv:
            raise LaunchError(f"{task.name}: empty command line")
        full_env = {**os.environ, **env}
        if self._warm_on and host.warm:
            warm_task = await self._pools().start(task.name, argv, full_env, cwd)
            if warm_task is not None:
                return warm_task
        pipes = [output_pipe(), output_pipe()]
        try:
            command, preexec = dying_with_parent(argv, full_env.get("PATH"), cwd)
            process = await asyncio.create_subprocess_exec(
                *command,
                stdin=asyncio.subprocess.PIPE,
                stdout=pipes[0][1],
                stderr=pipes[1][1],
                env=full_env,
                cwd=cwd,
                # Own session and process group: a terminal's Ctrl-C reaches only the
                # controller, which then stops tasks in order; signals to the group reach
                # the task's children too.
                start_new_session=True,
                preexec_fn=preexec,
            )
        except OSError as exc:
            for read_end, _ in pipes:
                os.close(read_end)
            raise LaunchError(f"{task.name}: cannot run {argv[0]}: {exc.strerror or exc}") from exc
        finally:
            for _, write_end in pipes:
                os.close(write_end)  # the task's now: EOF comes when it (and its children) close it
        cold = LocalTask(process, await PipeOutput.open(pipes[0][0], pipes[1][0], self._max_line))
        if self._warm is not None:
            cold.launch_notice = self._warm.take_notice()
        return cold

    def prestart(self, host: HostSpec, argv: Sequence[str], env: Mapping[str, str]) -> None:
        """Start now, without waiting, the warm pool a task with ``argv`` and ``env`` would
        fork from (nothing with --cold, for a host with ``warm: false``, or a command no
        pool serves)."""
        self._require_local(host)
        if self._warm_on and host.warm:
            self._pools().prestart(argv, {**os.environ, **env})

    def _pools(self) -> WarmPools:
        if self._warm is None:
            self._warm = WarmPools(self._max_line)
        return self._warm

    @property
    def warm_pools(self) -> WarmPools | None:
        """The warm pools, once a task could be served by one (None before, and with --cold)."""
        return self._warm

    async def check_ports(self, host: HostSpec, ports: Sequence[int]) -> list[PortProblem]:
        self._require_local(host)
        problems: list[PortProblem] = []
        for port in ports:
            free, reason = local_ports.port_is_free(port)
            if free:
                continue
            holder = await asyncio.to_thread(local_ports.port_holder, port)
            pid, name = holder if holder else (None, None)
            problems.append(PortProblem(host.name, port, reason, pid, name))
        return problems

    async def free_ports(self, host: HostSpec, n: int,
                         avoid: frozenset[int] = frozenset()) -> list[PortReservation]:
        self._require_local(host)
        try:
            return list(local_ports.reserve_free_ports(n, avoid))
        except OSError as exc:
            raise LaunchError(f"{host.name}: {exc.strerror or exc}") from exc

    async def connect_all(self, hosts: Iterable[HostSpec]) -> ConnectReport:
        """Nothing to connect: this machine is ready when the controller runs."""
        return ConnectReport()

    async def close(self) -> None:
        """Stop the warm pools (their tasks die with them: stop tasks first)."""
        if self._warm is not None:
            await self._warm.close()

    async def run_command(self, host: HostSpec, argv: Sequence[str]) -> str:
        """Run a short command on this machine; its stdout (OSError when it fails)."""
        self._require_local(host)
        return await run_local_command(argv)

    async def open_command(self, host: HostSpec, argv: Sequence[str]) -> LocalCommandStream:
        """Keep ``argv`` running on this machine, fed line by line (OSError when it cannot start)."""
        self._require_local(host)
        return await open_local_command(argv)

    @staticmethod
    def _require_local(host: HostSpec) -> None:
        if not host.is_local:
            kind = host.launch_kind.value
            raise LaunchError(f"host {host.name}: {kind} hosts' tasks are started by the "
                              f"{kind.upper()} launcher (the router picks it), not the local one")


async def run_local_command(argv: Sequence[str]) -> str:
    """Run ``argv`` on this machine; its stdout. Raises OSError when it cannot run or fails."""
    process = await asyncio.create_subprocess_exec(
        *argv, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await process.communicate()
    if process.returncode != 0:
        raise OSError(f"{argv[0]} exited with {process.returncode}: {err.decode(errors='replace').strip()}")
    return out.decode(errors="replace")
