"""The local launcher with real processes: output streaming, process groups, stdin as the
stop signal, port checks and reservations."""

from __future__ import annotations

import os
import socket
import sys
import textwrap

import psutil
import pytest

from tests.support import async_wait_until
from tui.config.cluster import HostSpec, Job, TaskSpec
from tui.launch.base import LaunchError
from tui.launch.lines import OutputLine
from tui.launch.local.launcher import LocalLauncher, LocalTask
from tui.launch.local.ports import port_is_free
from tui.launch.streams import each_line

LOCAL = HostSpec(name="localhost", address="localhost")
TASK = TaskSpec(job=Job.WORKER, index=0, host="localhost", port=None)


async def run_script(script: str, env: dict[str, str] | None = None) -> tuple[LocalTask, list[OutputLine]]:
    task = await LocalLauncher().start(TASK, LOCAL, [sys.executable, "-c", textwrap.dedent(script)],
                                       env or {}, None)
    lines = [line async for line in each_line(task.output())]
    await task.wait()
    return task, lines


async def wait_gone(pid: int, timeout: float = 5.0) -> bool:
    """Whether ``pid`` disappeared (or is a zombie) within ``timeout`` seconds."""
    def gone() -> bool:
        try:
            return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
        except psutil.NoSuchProcess:
            return True

    try:
        return await async_wait_until(gone, timeout, interval=0.05)
    except AssertionError:
        return False


async def test_stdout_and_stderr_are_streamed_with_their_stream() -> None:
    task, lines = await run_script("""
        import sys
        print("out 1", flush=True)
        print("err 1", file=sys.stderr, flush=True)
        sys.stdout.write("no newline")
    """)
    assert await task.wait() == 0
    assert sorted((line.stream.value, line.text) for line in lines) == [
        ("stderr", "err 1"), ("stdout", "no newline"), ("stdout", "out 1")]


async def test_nasty_output_never_breaks_the_reader() -> None:
    task, lines = await run_script("""
        import sys
        out = sys.stdout.buffer
        out.write(b"x" * 1_000_000 + b"\\n")
        out.write(b"\\xff\\xfe\\x00 binary\\n")
        out.write(b"\\x1b[1mbold\\x1b[0m\\n")
        out.write(b'{"event": broken json\\n')
        out.write(b"tail")
    """)
    assert await task.wait() == 0
    assert [len(line.text) for line in lines] == [1_000_000, 10, 12, 21, 4]
    assert lines[1].text == "\ufffd\ufffd\x00 binary"


async def test_env_is_added_to_the_environment() -> None:
    _task, lines = await run_script("import os; print(os.environ['TF_CONFIG'], 'PATH' in os.environ)",
                                   env={"TF_CONFIG": '{"task": 1}'})
    assert [line.text for line in lines] == ['{"task": 1} True']


async def test_terminate_signals_the_whole_process_group() -> None:
    task = await LocalLauncher().start(TASK, LOCAL, [sys.executable, "-c", textwrap.dedent("""
        import subprocess, sys, time
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
        print(child.pid, flush=True)
        time.sleep(60)
    """)], {}, None)
    assert task.pid is not None
    assert os.getpgid(task.pid) == task.pid  # its own group
    output = each_line(task.output())
    child_pid = int((await anext(output)).text)
    await task.terminate()
    assert await task.wait() == -15
    assert await wait_gone(child_pid)
    await output.aclose()


async def test_closing_stdin_is_seen_as_eof_by_the_task() -> None:
    task = await LocalLauncher().start(TASK, LOCAL, [sys.executable, "-c", textwrap.dedent("""
        import signal, sys
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        print("ready", flush=True)
        sys.stdin.read()
        print("stdin closed", flush=True)
    """)], {}, None)
    output = each_line(task.output())
    assert (await anext(output)).text == "ready"
    await task.terminate()  # SIGTERM is ignored: only the EOF stops it
    assert (await anext(output)).text == "stdin closed"
    assert await task.wait() == 0
    await output.aclose()


async def test_kill_ends_a_task_that_ignores_everything_else() -> None:
    task = await LocalLauncher().start(TASK, LOCAL, [sys.executable, "-c", textwrap.dedent("""
        import signal, time
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        print("ready", flush=True)
        while True:
            time.sleep(1)
    """)], {}, None)
    output = each_line(task.output())
    await anext(output)
    await task.kill()
    assert await task.wait() == -9
    await output.aclose()


async def test_a_missing_program_is_a_launch_error() -> None:
    with pytest.raises(LaunchError, match="cannot run /nonexistent/python"):
        await LocalLauncher().start(TASK, LOCAL, ["/nonexistent/python"], {}, None)


async def test_remote_hosts_are_refused_clearly() -> None:
    with pytest.raises(LaunchError, match="SSH launcher"):
        await LocalLauncher().check_ports(HostSpec(name="gpu1", address="10.0.0.1"), [2222])


async def test_a_port_in_use_names_this_process() -> None:
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        problems = await LocalLauncher().check_ports(LOCAL, [port])
    assert len(problems) == 1
    problem = problems[0]
    assert (problem.host, problem.port, problem.pid) == ("localhost", port, os.getpid())
    assert str(problem).startswith(f"localhost:{port} is in use by pid {os.getpid()} (")


async def test_a_free_port_has_no_problem() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    assert await LocalLauncher().check_ports(LOCAL, [port]) == []


async def test_reserved_ports_are_distinct_held_and_released() -> None:
    reservations = await LocalLauncher().free_ports(LOCAL, 3, avoid=frozenset({1}))
    ports = [r.port for r in reservations]
    assert len(set(ports)) == 3
    assert all(not port_is_free(port)[0] for port in ports)  # held: nobody else can bind
    for reservation in reservations:
        reservation.release()
        reservation.release()  # idempotent
    assert all(port_is_free(port)[0] for port in ports)
