"""The lease beside a remote task (tui.launch.ssh.remote_command's watcher), without SSH: run the
task line as sshd would (a new session, its environment on stdin) with a lease file that this
test renews or not. A task whose lease is not renewed ends with its whole process group
within the lease and a few seconds; while the lease is renewed it runs on."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil
import pytest

from tests.support import wait_until
from tui.launch.ssh.remote_command import RemoteCommand

pytestmark = pytest.mark.timeout(60)

#: Each distinct shell once: /bin/sh is one of the others (dash on Debian, bash elsewhere).
SHELLS = list({Path(shell).resolve(): shell for shell in ("/bin/dash", "/bin/bash", "/bin/sh")
               if Path(shell).exists()}.values())
LEASE = 3.0
#: A task with a child in its group: the lease must end both.
TASK = ("import subprocess, sys, time; "
        "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(120)']); "
        "print('child', child.pid, flush=True); time.sleep(120)")


def start(lease_file: Path, shell: str, watch: bool = True) -> subprocess.Popen[bytes]:
    command = RemoteCommand(argv=(sys.executable, "-c", TASK), env={"T_X": "1"}, watch_connection=watch,
                            lease_file=str(lease_file), lease=LEASE)
    process = subprocess.Popen([shell, "-c", command.shell_line()], stdin=subprocess.PIPE,
                               stdout=subprocess.PIPE, start_new_session=True)  # as sshd does
    assert process.stdin is not None
    process.stdin.write(command.env_input())
    process.stdin.flush()  # and left open, like the channel
    return process


def group(pgid: int) -> list[psutil.Process]:
    found = []
    for p in psutil.process_iter():
        try:
            if os.getpgid(p.pid) == pgid and p.status() != psutil.STATUS_ZOMBIE:
                found.append(p)
        except (psutil.Error, ProcessLookupError):
            continue
    return found


def child_of(process: subprocess.Popen[bytes]) -> int:
    assert process.stdout is not None
    process.stdout.readline()  # the pid line
    return int(process.stdout.readline().split()[1])


@pytest.mark.parametrize("shell", SHELLS)
def test_a_task_whose_lease_is_not_renewed_stops_itself(tmp_path: Path, shell: str) -> None:
    lease = tmp_path / "lease"
    lease.write_text("1\n")
    process = start(lease, shell)
    try:
        child = child_of(process)
        began = time.monotonic()
        wait_until(lambda: process.poll() is not None and not psutil.pid_exists(child)
                   and not group(process.pid), LEASE + 10, what="the task's group after its lease")
        took = time.monotonic() - began
        assert LEASE - 1 <= took <= LEASE + 7, f"{took:.1f} s"
    finally:
        for p in group(process.pid):
            p.kill()
        process.kill()
        process.wait()


def test_a_renewed_lease_keeps_the_task_and_a_missing_file_counts_as_silence(tmp_path: Path) -> None:
    lease = tmp_path / "lease"
    lease.write_text("1\n")
    process = start(lease, "/bin/sh")
    stop = threading.Event()

    def renew() -> None:
        beat = 1
        while not stop.wait(0.5):
            beat += 1
            lease.write_text(f"{beat}\n")

    renewer = threading.Thread(target=renew)
    renewer.start()
    try:
        child_of(process)
        time.sleep(3 * LEASE)  # what is asserted is that nothing happens for three leases
        assert process.poll() is None, "the task stopped although its lease was renewed"
        stop.set()
        renewer.join()
        lease.unlink()  # the keeper ended (its channel closed): no renewal either
        wait_until(lambda: process.poll() is not None, LEASE + 10, what="the task after its lease")
    finally:
        stop.set()
        renewer.join()
        for p in group(process.pid):
            p.kill()
        process.kill()
        process.wait()


def test_without_a_lease_file_only_the_session_is_watched(tmp_path: Path) -> None:
    command = RemoteCommand(argv=(sys.executable, "-c", "print('ok')"), env={}, watch_connection=True)
    result = subprocess.run(["/bin/sh", "-c", command.shell_line()], input=command.env_input(),
                            capture_output=True, timeout=30, start_new_session=True)
    assert result.returncode == 0 and result.stdout.decode().splitlines()[1] == "ok"


@pytest.mark.parametrize("shell", SHELLS)
def test_the_watcher_ends_as_soon_as_its_task_is_gone(tmp_path: Path, shell: str) -> None:
    # It polled the session only, and slept 5 s after its TERM even with the group gone: a
    # check for leftovers right after the controller's exit found it beside every task.
    lease = tmp_path / "lease"
    lease.write_text("1\n")
    command = RemoteCommand(argv=(sys.executable, "-c", "print('ok')"), env={}, watch_connection=True,
                            lease_file=str(lease), lease=60.0)
    process = subprocess.Popen([shell, "-c", command.shell_line()], stdin=subprocess.PIPE,
                               stdout=subprocess.PIPE, start_new_session=True)
    try:
        out, _ = process.communicate(command.env_input(), timeout=30)
        assert out.decode().splitlines()[1] == "ok"
        # The session (this test) lives on and the lease is far from out: only the task's
        # end can end the watcher.
        wait_until(lambda: not group(process.pid), 10, what="the watcher after its task's end")
    finally:
        for p in group(process.pid):
            p.kill()
