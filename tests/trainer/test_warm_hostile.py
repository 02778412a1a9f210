"""The fork server under attack (issue 33): no request, slow client or failed fork takes the
pool down or kills a task it forked for someone else; a SIGTERMed pool cleans up; a task
SIGKILLed under the remote client is reported as killed, not as "exit code 1". One real
pool for the file, with a task of another client running through every attack."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support import wait_until
from tests.support.warm_pool import (
    REPO,
    Pool,
    ask,
    first_line,
    read_all,
    run_task,
    running_pool,
    start_task,
)
from trainer.warm import client, server, wire

#: A task that runs until its stdin ends: the bystander every attack must leave alive.
WAITER = "import time\nprint('up', flush=True)\ntime.sleep(600)\n"


class Bystander:
    """A task another client started before the attack."""

    def __init__(self, pool: Pool, folder: Path) -> None:
        script = folder / "waiter.py"
        script.write_text(WAITER)
        self.pipes = [os.pipe() for _ in range(3)]
        self.sock, self.pid = start_task(pool, [str(script)], {}, folder, self.pipes)
        for fd in (self.pipes[0][0], self.pipes[1][1], self.pipes[2][1]):
            os.close(fd)
        seen = b""
        while not seen.endswith(b"\n"):
            seen += os.read(self.pipes[1][0], 100)
        assert seen == b"up\n"

    def alive(self) -> bool:
        try:
            with open(f"/proc/{self.pid}/stat", "rb") as f:
                return f.read().rsplit(b")", 1)[1].split()[0] not in (b"Z", b"X")
        except OSError:
            return False

    def finish(self) -> None:
        """End it the controller's way (EOF on stdin: the shim says so and exits 143): it
        was alive to hear it, and its exit comes back over its own connection."""
        os.close(self.pipes[0][1])
        out, err = read_all(self.pipes[1][0], self.pipes[2][0], 30)
        self.sock.settimeout(30)
        assert client.wait(self.sock) == 143 and "stdin closed" in err, (out, err)


@pytest.fixture(scope="module")
def pool() -> Iterator[Pool]:
    with running_pool() as started:
        yield started


def _raw_request(pool: Pool, body: bytes, length: int | None = None) -> dict[str, object]:
    """Send ``body`` as a request (with three descriptors, as a client does)."""
    r, w = os.pipe()
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(30)
    sock.connect(pool.path)
    data = struct.pack(">I", len(body) if length is None else length) + body
    try:
        sock.sendmsg([data[:4]], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, struct.pack("3i", r, w, w))])
        # A request refused by its length alone is answered and closed before its body is
        # all sent (a BrokenPipeError here, now and then): the answer is still there to read.
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            sock.sendall(data[4:])

        return wire.parse_reply(first_line(sock))
    finally:
        sock.close()
        os.close(r)
        os.close(w)


def _toy(pool: Pool, folder: Path) -> None:
    """The pool still serves: a task starts warm and exits 0."""
    script = folder / "toy.py"
    script.write_text("print('toy')\n")
    _, code, out, err = run_task(pool, [str(script)], {}, folder, timeout=30)
    assert code == 0 and "toy" in out.splitlines(), err


def test_a_deep_a_huge_or_a_malformed_request_fails_alone(pool: Pool, tmp_path: Path) -> None:
    bystander = Bystander(pool, tmp_path)
    answers = [
        _raw_request(pool, b"[" * 200_000),                       # RecursionError in json
        _raw_request(pool, b"{" * 1000, length=wire.MAX_REQUEST + 1),  # too big to read
        _raw_request(pool, b'{"argv": [["x"]], "env": {}}'),      # a list where a string goes
        _raw_request(pool, b'{"argv": [], "env": {"A": {"B": 1}}}'),
        _raw_request(pool, b'"just a string"'),
        _raw_request(pool, b'\xff\xfe'),
    ]
    for answer in answers:
        assert str(answer.get("refused", "")).startswith("bad request"), answer
    assert "nested too deeply" in str(answers[0]["refused"])
    assert pool.process.poll() is None and bystander.alive()
    _toy(pool, tmp_path)
    bystander.finish()


def test_a_slow_client_delays_no_one_and_has_one_deadline(pool: Pool, tmp_path: Path) -> None:
    """A client dripping its request a byte a second (each read well within any per-read
    timeout) is refused when its whole request has taken REQUEST_SECONDS, and meanwhile
    every other client is served at once."""
    bystander = Bystander(pool, tmp_path)
    slow = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    slow.connect(pool.path)
    r, w = os.pipe()
    body = wire.Request(("x.py",), {}, str(tmp_path)).encode()
    slow.sendmsg([body[:1]], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, struct.pack("3i", r, w, w))])
    started = time.monotonic()
    stop = threading.Event()

    def drip() -> None:
        for byte in body[1:]:
            if stop.wait(1.0):
                return
            try:
                slow.send(bytes([byte]))
            except OSError:
                return

    dripper = threading.Thread(target=drip, daemon=True)
    dripper.start()
    try:
        for _ in range(3):  # served while the slow one is still arriving
            before = time.monotonic()
            _toy(pool, tmp_path)
            assert time.monotonic() - before < server.REQUEST_SECONDS / 2
        slow.settimeout(server.REQUEST_SECONDS + 20)

        answer = wire.parse_reply(first_line(slow))
        took = time.monotonic() - started
    finally:
        stop.set()
        dripper.join()
        slow.close()
        os.close(r)
        os.close(w)
    assert "not complete after" in str(answer.get("refused")), answer
    assert server.REQUEST_SECONDS - 1 <= took <= server.REQUEST_SECONDS + 5, took
    assert bystander.alive()
    bystander.finish()


def _pids_cgroup() -> Path:
    root = Path("/sys/fs/cgroup/pids")
    if not (root / "cgroup.procs").exists() or not os.access(root, os.W_OK):
        pytest.skip("needs a writable pids cgroup (v1) to make fork fail")
    group = root / f"tfdist-test-{os.getpid()}"
    group.mkdir()
    return group


def test_a_failed_fork_refuses_that_request_only(pool: Pool, tmp_path: Path) -> None:
    """A pids limit makes the pool's fork fail with EAGAIN: that task is refused (its client
    starts it cold), the pool and the task it already runs stay, and once the limit is
    lifted it serves again."""
    bystander = Bystander(pool, tmp_path)
    group = _pids_cgroup()
    root_procs = group.parent / "cgroup.procs"
    try:
        (group / "cgroup.procs").write_text(str(pool.process.pid))
        (group / "pids.max").write_text((group / "pids.current").read_text().strip())
        r, w = os.pipe()
        try:
            answer, sock = ask(pool, wire.Request((str(tmp_path / "x.py"),),
                                                  {**os.environ, "PYTHONPATH": str(REPO)},
                                                  str(tmp_path)), (r, w, w))
            sock.close()
        finally:
            os.close(r)
            os.close(w)
        assert str(answer.get("refused", "")).startswith("cannot fork"), answer
        assert pool.process.poll() is None and bystander.alive()
        (group / "pids.max").write_text("max")
        _toy(pool, tmp_path)
    finally:
        root_procs.write_text(str(pool.process.pid))
        wait_until(lambda: not (group / "cgroup.procs").read_text().strip(), 10, "the group empties")
        group.rmdir()
    bystander.finish()


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM])
def test_a_killed_task_is_reported_killed_through_the_client(pool: Pool, tmp_path: Path,
                                                              sig: signal.Signals) -> None:
    """``python -m trainer.warm.client`` (what an SSH host runs) exits by the task's signal,
    without a traceback of its own: SIGKILL has no handler to reset."""
    script = tmp_path / "die.py"
    script.write_text(f"import os\nprint('dying', flush=True)\nos.kill(os.getpid(), {int(sig)})\n")
    done = subprocess.run([sys.executable, "-m", "trainer.warm.client", pool.path, "shim", str(script)],
                          capture_output=True, text=True, timeout=60, cwd=tmp_path,
                          env={**os.environ, "PYTHONPATH": str(REPO)})
    assert done.stdout.splitlines()[0].endswith(" warm"), done.stdout  # forked, not cold
    assert "dying" in done.stdout
    assert done.returncode == -sig, (done.returncode, done.stderr)
    assert "Traceback" not in done.stderr, done.stderr


def test_a_pool_ended_by_sigterm_removes_its_folder_and_tasks(tmp_path: Path) -> None:
    with running_pool() as pool:
        bystander = Bystander(pool, tmp_path)
        pool.process.send_signal(signal.SIGTERM)
        assert pool.process.wait(timeout=30) == 128 + signal.SIGTERM
        assert not os.path.exists(os.path.dirname(pool.path))
        wait_until(lambda: not bystander.alive(), 10, "the pool's task ends with it")
