"""The real ``tfdist-tui hosts.yaml`` in tmux, driven as a person would: keys in, screen out."""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from tests.support import assert_no_trainers_left, wait_until, write_hosts

pytestmark = [pytest.mark.integration, pytest.mark.tmux]


class Tmux:
    def __init__(self, command: str, size: tuple[int, int] = (120, 40)) -> None:
        assert shutil.which("tmux"), "tmux is required (apt-get install tmux; .ci/run installs it)"
        self.name = f"tfdist-{uuid.uuid4().hex[:8]}"
        subprocess.run(["tmux", "new-session", "-d", "-s", self.name, "-x", str(size[0]),
                        "-y", str(size[1]), command], check=True)

    def screen(self) -> str:
        return subprocess.run(["tmux", "capture-pane", "-p", "-t", self.name], check=True,
                              capture_output=True, text=True).stdout

    def send(self, *keys: str) -> None:
        subprocess.run(["tmux", "send-keys", "-t", self.name, *keys], check=True)

    def wait_for(self, pattern: str, timeout: float = 120.0) -> re.Match[str]:
        return wait_until(lambda: re.search(pattern, self.screen()), timeout, interval=0.2,
                          what=lambda: f"{pattern!r} never appeared; screen:\n{self.screen()}")

    def close(self) -> None:
        subprocess.run(["tmux", "kill-session", "-t", self.name], capture_output=True)


def worker_steps(screen: str) -> list[int]:
    return [int(m) for m in re.findall(r"worker\d\s+\S+\s+running\s+\d+w?\s+\d+\s+(\d+)", screen)]


def test_a_person_drives_the_app_in_tmux(tmp_path: Path) -> None:
    # This checkout's code (an installed tfdist-tui may be another checkout's).
    repo = Path(__file__).resolve().parents[2]
    executable = f"env PYTHONPATH={shlex.quote(str(repo))} {shlex.quote(sys.executable)} -m tui.cli"
    # Not niced: under other sessions' load (17 on 2 cores) a niced task got 1-3 % of a
    # core and missed the 120 s ready deadline (tests/ui/test_pilot.py says the same).
    hosts = write_hosts(tmp_path / "hosts.yaml", ps=2)
    status = tmp_path / "exit-status"
    paged = tmp_path / "paged.txt"
    pager = f"sh -c 'cp \"$0\" {paged}'"
    command = (f"PAGER={shlex.quote(pager)} {executable} {shlex.quote(str(hosts))}; "
               f"echo $? > {shlex.quote(str(status))}")
    tmux = Tmux(f"sh -c {shlex.quote(command)}")
    try:
        first_run = tmux.wait_for(r"run (\d{8}-\d{6}-\w+)").group(1)
        # watch the steps rise
        tmux.wait_for(r"worker0\s+\S+\s+running\s+\d+w?\s+\d+\s+\d+")
        before = max(worker_steps(tmux.screen()))
        wait_until(lambda: max(worker_steps(tmux.screen()) or [0]) > before, 60, interval=0.3,
                   what=tmux.screen)

        # The selected task's whole log in $PAGER: the app suspends, the pager runs in its
        # terminal, the app comes back.
        tmux.send("v")
        wait_until(paged.exists, 60, interval=0.2, what=tmux.screen)
        assert "ready" in paged.read_text()
        tmux.wait_for(r"run \d{8}-\d{6}-\w+ │")

        tmux.send("m")
        tmux.wait_for(r"1 pending, R applies │ async→sync")
        tmux.send("+")
        tmux.wait_for(r"2 pending, R applies │ async→sync │\s+partitions 1→2")  # (wraps at 80)
        tmux.send("Tab", "Tab")  # the Placement pane
        tmux.wait_for(r"preview \(pending, not applied until R\): greedy, partitions 2, 2 ps, "
                      r"max/mean\s+1\.0\d")

        tmux.send("R")
        tmux.wait_for(r"Relaunch the cluster\?")
        tmux.wait_for(r"mode: async → sync")
        tmux.send("y")
        second = tmux.wait_for(
            rf"run (?!{first_run})(\d{{8}}-\d{{6}}-\w+)\s+│ [\d:]+ │ sync │ partitions 2 │").group(1)
        assert second != first_run
        tmux.wait_for(r"current placement: greedy, partitions 2, 2 ps")

        tmux.send("q")
        tmux.wait_for(r"Quit\?")
        tmux.send("y")
        wait_until(status.exists, 60, interval=0.2, what=tmux.screen)
        assert status.read_text().strip() == "130"  # quit while it trained (README: exit codes)
    finally:
        tmux.close()
    assert_no_trainers_left(tmp_path / "runs")
