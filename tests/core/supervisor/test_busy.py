"""The read of a host's ``/proc`` for the CPU and memory of process groups: only the groups
asked for come back, whatever their command names hold, and every line where the host has
no ``awk``."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tui.core.supervisor.busy import STAT_ARGV, stat_argv
from tui.core.usage import group_totals


def read(argv: tuple[str, ...], path: str | None = None) -> str:
    env = {**os.environ, **({"PATH": path} if path is not None else {})}
    return subprocess.run(list(argv), capture_output=True, text=True, check=True, timeout=60, env=env).stdout


def pids_of(lines: str) -> set[int]:
    return {int(line.split()[0]) for line in lines.splitlines()}


@pytest.fixture
def group(tmp_path: Path) -> Iterator[tuple[int, set[int]]]:
    """A process group of its own (a shell and two sleeps, one of them named ``a) b``, as a
    command name may be) and its processes' pids, once all of them are listed in /proc."""
    odd = tmp_path / "a) b"
    shutil.copy(shutil.which("sleep") or "/bin/sleep", odd)
    leader = subprocess.Popen(["sh", "-c", f"sleep 60 & '{odd}' 60 & wait"], start_new_session=True)
    try:
        deadline = time.monotonic() + 60
        while True:
            members = {pid for pid in map(int, filter(str.isdigit, os.listdir("/proc")))
                       if _group_of(pid) == leader.pid}
            if len(members) == 3 or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        assert len(members) == 3
        yield leader.pid, members
    finally:
        os.killpg(leader.pid, signal.SIGKILL)
        leader.wait()


def _group_of(pid: int) -> int | None:
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return int(text[text.rfind(")") + 2:].split()[2])


def test_only_the_groups_asked_for_come_back(group: tuple[int, set[int]]) -> None:
    leader, members = group
    lines = read(stat_argv([leader]))
    assert pids_of(lines) == members  # the one named "a) b" too
    assert set(group_totals(lines, {leader})) == {leader}
    # Every line as the whole read gives it (the group's share of the bytes: 3 of the machine's).
    everything = read(STAT_ARGV)
    assert members < pids_of(everything) and len(lines) < len(everything)
    assert pids_of(read(stat_argv([leader, os.getpgrp()]))) >= members | {os.getpid()}


def test_a_host_without_awk_sends_every_line(group: tuple[int, set[int]], tmp_path: Path) -> None:
    leader, members = group
    bare = tmp_path / "bin"
    bare.mkdir()
    for tool in ("sh", "cat"):
        (bare / tool).symlink_to(shutil.which(tool) or f"/bin/{tool}")
    lines = read(stat_argv([leader]), path=str(bare))
    assert members < pids_of(lines) and len(pids_of(lines)) > len(members)
