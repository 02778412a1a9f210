"""Launch a real local cluster of ``python -m trainer`` tasks on loopback ports, the way a
shell script would (all at once), and collect their events.

Each task started cold imports TensorFlow itself (~2.5 s of CPU, 5 s or more of wall time on
2 cores, and three at once take twice that). A test whose subject is not that start gives its
cluster a warm pool (:func:`trainer_pool`, one per test module): each task is then
``python -m trainer.warm.client``, forked from the pool with the same command line, streams,
environment and folder, the way the controller starts a warm task."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.support.warm_pool import Pool, running_pool
from trainer import protocol
from trainer.warm.client import PID_PREFIX

REPO = Path(__file__).resolve().parents[2]


def free_ports(n: int) -> list[int]:
    socks = []
    try:
        for _ in range(n):
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


@dataclass
class Task:
    name: str
    proc: subprocess.Popen[bytes]
    lines: list[tuple[float, str]] = field(default_factory=list)
    stderr: list[str] = field(default_factory=list)
    exited_at: float | None = None
    #: The task's own process (a warm task's is not :attr:`proc`, its client), leading its
    #: process group; None until a warm task's first line named it.
    pid: int | None = None

    @property
    def events(self) -> list[protocol.Event]:
        parsed = (protocol.parse_event(text) for _, text in self.lines)
        return [e for e in parsed if e is not None]

    def of(self, kind: type[protocol.Event]) -> list:
        return [e for e in self.events if isinstance(e, kind)]

    @property
    def output(self) -> str:
        return "\n".join(t for _, t in self.lines) + "\n" + "\n".join(self.stderr)


def trainer_env(cluster: dict, job: str, index: int) -> dict[str, str]:
    env = dict(os.environ)
    env["TF_CONFIG"] = json.dumps({"cluster": cluster, "task": {"type": job, "index": index}})
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    return env


class LocalCluster:
    """ps and worker processes started together; stdin pipes held open, as the controller
    does."""

    def __init__(self, num_ps: int, num_workers: int, args: list[str],
                 only: list[str] | None = None, program: Path | None = None,
                 shim: bool = True, pool: Pool | None = None):
        """``program``: run this user script (under ``python -m trainer.shim`` unless
        ``shim`` is false) instead of the trainer, in its folder; ``{job}``, ``{index}``,
        ``{ps_hosts}`` and ``{worker_hosts}`` in ``args`` are filled in per task. ``pool``:
        fork each task from this warm pool (its mode the task's: ``trainer``, or ``shim`` for
        a program under the shim) instead of starting it cold."""
        ports = free_ports(num_ps + num_workers)
        self.spec = {"ps": [f"localhost:{p}" for p in ports[:num_ps]],
                     "worker": [f"localhost:{p}" for p in ports[num_ps:]]}
        self.args = args
        self.program = program
        self.shim = shim
        self.pool = pool
        self.tasks: list[Task] = []
        roles = [("ps", i) for i in range(num_ps)] + [("worker", i) for i in range(num_workers)]
        for job, index in roles:
            if only is None or f"{job}{index}" in only:
                self.start(job, index)

    def command(self, job: str, index: int) -> list[str]:
        """The task's command line, as a person (or the controller's plan) would write it."""
        if self.program is None:
            return [sys.executable, "-m", "trainer", *self.args]
        values = {"job": job, "index": index, "ps_hosts": ",".join(self.spec["ps"]),
                  "worker_hosts": ",".join(self.spec["worker"])}
        args = [a.format(**values) for a in self.args]
        shim = ["-m", "trainer.shim"] if self.shim else []
        return [sys.executable, *shim, str(self.program), *args]

    def _launch_argv(self, job: str, index: int) -> list[str]:
        """:meth:`command`, or the same through the warm pool's client."""
        argv = self.command(job, index)
        if self.pool is None or (self.program is not None and not self.shim):
            return argv
        mode = "trainer" if self.program is None else "shim"
        return [sys.executable, "-m", "trainer.warm.client", self.pool.path, mode, *argv[3:]]

    def start(self, job: str, index: int, extra: list[str] | None = None) -> Task:
        env = trainer_env(self.spec, job, index)
        if self.program is not None and self.shim:
            env.update(TFDIST_SHIM="1", TFDIST_RUN_ID="test")
        proc = subprocess.Popen(
            [*self._launch_argv(job, index), *(extra or [])],
            env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            cwd=REPO if self.program is None else self.program.parent, start_new_session=True)
        task = Task(f"{job}{index}", proc, pid=None if self.pool is not None else proc.pid)
        threading.Thread(target=self._read, args=(task,), daemon=True).start()
        threading.Thread(target=self._read_err, args=(task,), daemon=True).start()
        self.tasks.append(task)
        return task

    @staticmethod
    def _read(task: Task) -> None:
        assert task.proc.stdout is not None
        for raw in task.proc.stdout:
            text = raw.decode("utf-8", "replace").rstrip("\n")
            if task.pid is None and text.startswith(PID_PREFIX):  # a warm task's first line
                task.pid = int(text[len(PID_PREFIX):].split()[0])
                continue
            task.lines.append((time.time(), text))

    @staticmethod
    def _read_err(task: Task) -> None:
        assert task.proc.stderr is not None
        for raw in task.proc.stderr:
            task.stderr.append(raw.decode("utf-8", "replace").rstrip("\n"))

    def task(self, name: str) -> Task:
        return next(t for t in self.tasks if t.name == name)

    def wait(self, timeout: float, names: list[str] | None = None) -> dict[str, int | None]:
        """Wait for every task (or the named ones) to exit by itself; returns exit codes
        (None: still running)."""
        deadline = time.monotonic() + timeout
        for task in self.tasks:
            if names is not None and task.name not in names:
                continue
            try:
                task.proc.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                pass
            if task.proc.returncode is not None and task.exited_at is None:
                task.exited_at = time.time()
        return {t.name: t.proc.returncode for t in self.tasks}

    def watch_exits(self) -> None:
        """Record each task's exit time as it happens (for 'exits within N s' checks)."""
        def watch(task: Task) -> None:
            task.proc.wait()
            task.exited_at = time.time()
        for task in self.tasks:
            threading.Thread(target=watch, args=(task,), daemon=True).start()

    def send(self, name: str, line: str) -> None:
        """Write one line to a task's stdin (the controller's ``end``)."""
        stdin = self.task(name).proc.stdin
        assert stdin is not None
        stdin.write(line.encode() + b"\n")
        stdin.flush()

    def kill(self) -> None:
        for task in self.tasks:
            if task.proc.poll() is None:
                if task.pid is None:
                    # A warm task's client still waiting for the pool: its pid line comes once
                    # the pool forked it, and the task outlives its client (its own session).
                    deadline = time.monotonic() + 30
                    while task.pid is None and task.proc.poll() is None and time.monotonic() < deadline:
                        time.sleep(0.05)
                for pid in {task.pid, task.proc.pid} - {None}:
                    try:
                        os.killpg(pid, 9)
                    except ProcessLookupError:
                        pass
            task.proc.wait()


#: A pool imports TensorFlow as a cold task would: 5-20 s on 2 cores, and over 120 s at a
#: load average of ~100 (other work on the machine). Its wait is the clusters' start, which
#: their own deadlines no longer cover.
POOL_READY = 240.0


def pool_fixture(mode: str, name: str) -> object:
    """A module-scoped fixture called ``name``: one warm pool of ``mode`` for a test
    module's clusters, ended (and every task still forked from it with it) after the
    module's last test."""
    @pytest.fixture(scope="module", name=name)
    def pool() -> Iterator[Pool]:
        with running_pool(mode, POOL_READY) as started:
            yield started
    return pool


#: One warm pool of the trainer per module that asks for it by name.
trainer_pool = pool_fixture("trainer", "trainer_pool")
#: One warm pool of the shim (users' programs) per module that asks for it by name.
shim_pool = pool_fixture("shim", "shim_pool")
