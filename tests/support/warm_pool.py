"""A real fork server (``python -m trainer.warm``) for tests, and a way to fork a task from
it with the test's own pipes."""

from __future__ import annotations

import asyncio
import json
import os
import selectors
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from trainer.warm import client, wire
from tui.launch.local.launcher import LocalLauncher
from tui.launch.local.warm_pool import WarmPool

REPO = Path(__file__).resolve().parents[2]
READY_TIMEOUT = 120.0


@dataclass
class Pool:
    process: subprocess.Popen[bytes]
    path: str


@contextmanager
def running_pool(mode: str = "shim", ready_timeout: float = READY_TIMEOUT) -> Iterator[Pool]:
    """A pool of ``mode``, ready within ``ready_timeout`` seconds; ended by EOF on its stdin
    (the controller's way) unless the test ended it already."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    process = subprocess.Popen([sys.executable, "-m", "trainer.warm", mode], stdin=subprocess.PIPE,
                               stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env, cwd=REPO)
    assert process.stdout is not None and process.stdin is not None
    try:
        with selectors.DefaultSelector() as sel:
            sel.register(process.stdout, selectors.EVENT_READ)
            assert sel.select(ready_timeout), f"the pool did not get ready within {ready_timeout:g} s"
        ready = json.loads(process.stdout.readline())
        assert "ready" in ready, ready
        yield Pool(process, ready["ready"])
    finally:
        process.stdin.close()  # EOF: the server ends
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def run_task(pool: Pool, args: list[str], env: dict[str, str], cwd: Path,
             timeout: float = 60.0) -> tuple[int, int, str, str]:
    """(pid, exit code, stdout, stderr) of one task forked with its own pipes."""
    pipes = [os.pipe() for _ in range(3)]
    sock, pid = start_task(pool, args, env, cwd, pipes)
    for fd in (pipes[0][0], pipes[1][1], pipes[2][1]):
        os.close(fd)
    out, err = read_all(pipes[1][0], pipes[2][0], timeout)
    os.close(pipes[0][1])  # held open until now: the shim exits when its stdin ends
    sock.settimeout(timeout)
    code = client.wait(sock)
    return pid, code, out, err


def start_task(pool: Pool, args: list[str], env: dict[str, str], cwd: Path,
               pipes: list[tuple[int, int]]) -> tuple[socket.socket, int]:
    """Ask the pool for a task on ``pipes`` (stdin, stdout, stderr as (read, write)); the
    connection (the exit line comes on it) and the task's pid."""
    answer, sock = ask(pool, wire.Request(tuple(args), {**os.environ, "PYTHONPATH": str(REPO), **env},
                                          str(cwd)), (pipes[0][0], pipes[1][1], pipes[2][1]))
    assert "pid" in answer, answer
    return sock, int(str(answer["pid"]))


def ask(pool: Pool, request: wire.Request, fds: tuple[int, int, int],
        timeout: float = 30.0) -> tuple[dict[str, object], socket.socket]:
    """The pool's first answer to ``request``, and the connection."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(timeout)
    sock.connect(pool.path)
    wire.send_request(sock, request, fds)
    return wire.parse_reply(first_line(sock)), sock


def first_line(sock: socket.socket) -> bytes:
    """One line, a byte at a time (the exit line may follow it at once)."""
    line = b""
    while not line.endswith(b"\n"):
        more = sock.recv(1)
        assert more, "the pool closed the connection"
        line += more
    return line


def read_all(out_fd: int, err_fd: int, timeout: float) -> tuple[str, str]:
    """Everything written to two pipes until both reach EOF; closes them."""
    data = {out_fd: b"", err_fd: b""}
    deadline = time.monotonic() + timeout
    with selectors.DefaultSelector() as sel:
        for fd in data:
            sel.register(fd, selectors.EVENT_READ)
        while sel.get_map():
            events = sel.select(max(0.0, deadline - time.monotonic()))
            assert events, "a task's output did not end in time"
            for key, _ in events:
                chunk = os.read(key.fd, 65536)
                if chunk:
                    data[key.fd] += chunk
                else:
                    sel.unregister(key.fd)
                    os.close(key.fd)
    return data[out_fd].decode(), data[err_fd].decode()


async def spawned_pool(launcher: LocalLauncher, timeout: float = 60.0) -> WarmPool:
    """The launcher's first pool once its process exists (it may still be importing: a
    prestart is not awaited by anyone)."""
    async def spawned() -> WarmPool:
        while True:
            pools = launcher.warm_pools
            if pools is not None and pools.pools and pools.pools[0].pid is not None:
                return pools.pools[0]
            await asyncio.sleep(0.02)
    return await asyncio.wait_for(spawned(), timeout)
