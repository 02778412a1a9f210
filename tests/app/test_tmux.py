"""The real ``tfdist-tui hosts.yaml`` in tmux, driven as a person would: keys in, screen out."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import socket
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path

import pytest

from tests.support import assert_no_trainers_left, wait_until, write_hosts
from tests.support.clirun import FAKE_CLI, REPO
from tests.support.clirun import write_hosts as write_fake_hosts

pytestmark = [pytest.mark.integration, pytest.mark.tmux]


class Tmux:
    """A detached tmux session running ``command``. ``private``: on a tmux server of its own
    (no user's configuration, and server options such as ``set-clipboard`` set for this
    test alone)."""

    def __init__(self, command: str, size: tuple[int, int] = (120, 40), *, private: bool = False) -> None:
        assert shutil.which("tmux"), "tmux is required (apt-get install tmux; .ci/run installs it)"
        self.name = f"tfdist-{uuid.uuid4().hex[:8]}"
        self.tmux = ["tmux", "-L", self.name, "-f", "/dev/null"] if private else ["tmux"]
        self.private = private
        subprocess.run([*self.tmux, "new-session", "-d", "-s", self.name, "-x", str(size[0]),
                        "-y", str(size[1]), command], check=True)

    def screen(self) -> str:
        return subprocess.run([*self.tmux, "capture-pane", "-p", "-t", self.name], check=True,
                              capture_output=True, text=True).stdout

    def send(self, *keys: str) -> None:
        subprocess.run([*self.tmux, "send-keys", "-t", self.name, *keys], check=True)

    def run(self, *args: str) -> subprocess.CompletedProcess[str]:
        """Any tmux command on this session's server."""
        return subprocess.run([*self.tmux, *args], capture_output=True, text=True)

    def wait_for(self, pattern: str, timeout: float = 120.0) -> re.Match[str]:
        return wait_until(lambda: re.search(pattern, self.screen()), timeout, interval=0.2,
                          what=lambda: f"{pattern!r} never appeared; screen:\n{self.screen()}")

    def quit_app(self, status: Path) -> None:
        """q, yes to the question, and wait for the command's exit status file."""
        self.send("q")
        self.wait_for(r"Quit\?")
        self.send("y")
        wait_until(status.exists, 60, interval=0.2, what=self.screen)

    def close(self) -> None:
        # A private server goes whole (kill-server takes no -t: with one it failed, silently,
        # and left the server and the app in it running).
        command = ["kill-server"] if self.private else ["kill-session", "-t", self.name]
        subprocess.run([*self.tmux, *command], capture_output=True)


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
        assert status.read_text().strip() == "130"  # quit while it trained (docs/exit-codes.md)
    finally:
        tmux.close()
    assert_no_trainers_left(tmp_path / "runs")


def test_C_copies_inert_log_text_to_the_terminals_clipboard(tmp_path: Path) -> None:
    """``/`` finds a line a task wrote with escape sequences in it, ``C`` copies it: tmux
    (``set-clipboard on``) takes the app's OSC 52 into a paste buffer, which holds the line's
    text and none of the task's escapes. Tasks are tests/support/fake_trainer.py (no
    TensorFlow: this is about the terminal)."""
    hosts = write_fake_hosts(tmp_path / "hosts.yaml", run_dir=tmp_path / "runs")
    status = tmp_path / "exit-status"
    # ps0 writes escape sequences (FAKE_NASTY); the workers' done-markers go to FAKE_DIR.
    environment = shlex.join([f"PYTHONPATH={REPO}", "FAKE_NASTY=ps0", f"FAKE_DIR={tmp_path}"])
    command = (f"env {environment} {shlex.quote(sys.executable)} {shlex.quote(str(FAKE_CLI))} "
               f"{shlex.quote(str(hosts))}; echo $? > {shlex.quote(str(status))}")
    tmux = Tmux(f"sh -c {shlex.quote(command)}", private=True)
    try:
        tmux.run("set-option", "-s", "set-clipboard", "on")
        tmux.wait_for(r"run \d{8}-\d{6}-\w+")
        # ps0 is selected: its log has the line "\x1b[31mred\x1b[0m \x1b]0;title\x07 text".
        tmux.wait_for(r"red  text")
        tmux.send("/")
        tmux.wait_for(r"search the logs \(enter")  # the field is open (typed sooner, keys go to the table)
        tmux.send("-l", "RED  t")
        tmux.send("Enter")
        tmux.wait_for(r"match 1/1")
        tmux.send("C")
        tmux.wait_for(r"copied 1 line \(the current match\)")
        buffer = wait_until(lambda: tmux.run("show-buffer").stdout, 30, interval=0.2, what=tmux.screen)
        assert buffer == "red  text"
        tmux.send("q")
        wait_until(status.exists, 60, interval=0.2, what=tmux.screen)
    finally:
        tmux.close()
    assert_no_trainers_left(tmp_path / "runs")


def test_quitting_leaves_the_runs_summary_in_the_terminal(tmp_path: Path) -> None:
    """Quit while the run trains: the app's screen goes, and the terminal keeps the summary
    headless prints (outcome, steps, run directory, how to compare it). Tasks are
    tests/support/fake_trainer.py (no TensorFlow: this is about the exit path)."""
    hosts = write_fake_hosts(tmp_path / "hosts.yaml", run_dir=tmp_path / "runs")
    status = tmp_path / "exit-status"
    # The workers train until stopped; the pane stays after the app, with what it left.
    environment = shlex.join([f"PYTHONPATH={REPO}", "FAKE_FOREVER=*", f"FAKE_DIR={tmp_path}"])
    command = (f"env {environment} {shlex.quote(sys.executable)} {shlex.quote(str(FAKE_CLI))} "
               f"{shlex.quote(str(hosts))}; echo $? > {shlex.quote(str(status))}; exec sleep 300")
    tmux = Tmux(f"sh -c {shlex.quote(command)}", private=True)
    try:
        tmux.wait_for(r"worker0\s+\S+\s+running\s+\d+w?\s+\d+\s+\d+")  # it steps
        tmux.send("q")
        tmux.wait_for(r"Quit\?")
        tmux.send("y")
        wait_until(status.exists, 60, interval=0.2, what=tmux.screen)
        (run_dir,) = (tmp_path / "runs").iterdir()
        # After the summary, the run's traffic (or why not), as headless ends.
        screen = tmux.wait_for(r"(?m)^  traffic      \S").string
    finally:
        tmux.close()
    assert status.read_text().strip() == "130"  # quit while it trained
    assert re.search(r"tfdist\s+\| run (stopped|interrupted)", screen), screen
    assert re.search(r"^  steps        \d+ / \d+$", screen, re.M), screen
    assert f"  run dir      {run_dir}" in screen.replace("\n", "")  # (a long path wraps)
    assert "compare      tfdist-tui compare" in screen
    assert_no_trainers_left(tmp_path / "runs")


def test_the_pager_gets_the_log_with_its_escapes_made_inert(tmp_path: Path) -> None:
    """``v``: $PAGER (``less -R`` by default, which passes escapes to the terminal) is given
    a copy of the log made inert, not the file with the task's OSC sequences (issue 33)."""
    hosts = write_fake_hosts(tmp_path / "hosts.yaml", run_dir=tmp_path / "runs")
    status, paged = tmp_path / "exit-status", tmp_path / "paged.txt"
    pager = f"sh -c 'cp \"$0\" {paged}'"
    environment = shlex.join([f"PYTHONPATH={REPO}", "FAKE_NASTY=ps0", f"FAKE_DIR={tmp_path}",
                              "FAKE_PS_STAY=ps0", f"PAGER={pager}"])
    command = (f"env {environment} {shlex.quote(sys.executable)} {shlex.quote(str(FAKE_CLI))} "
               f"{shlex.quote(str(hosts))}; echo $? > {shlex.quote(str(status))}")
    tmux = Tmux(f"sh -c {shlex.quote(command)}", private=True)
    try:
        tmux.wait_for(r"red  text")  # ps0 (selected) wrote "\x1b[31mred\x1b[0m \x1b]0;title\x07 text"
        raw = next((tmp_path / "runs").glob("*/logs/ps0.log")).read_bytes()
        assert b"\x1b]0;title\x07" in raw  # the run directory keeps the bytes as written
        tmux.send("v")
        text = wait_until(lambda: paged.exists() and paged.read_bytes(), 60, interval=0.2, what=tmux.screen)
        assert b"red  text" in text and b"\x1b" not in text and b"\x07" not in text
        wait_until(lambda: not list(Path(tempfile.gettempdir()).glob("tfdist-pager-*/ps0.log")), 30,
                   "the copy is removed once the pager ends")
        tmux.wait_for(r"run \d{8}-\d{6}-\w+ │")  # the app is back
        tmux.send("q")
        tmux.wait_for(r"Quit\?")
        tmux.send("y")
        wait_until(status.exists, 60, interval=0.2, what=tmux.screen)
    finally:
        tmux.close()


def test_a_port_in_use_is_said_in_words_until_S_starts_the_run_once_it_is_free(tmp_path: Path) -> None:
    """The preflight's refusal crosses from the core's process to the app's: the holder of
    the port, as headless says it (it arrived as "l; o; c; a; l; h; ..."), and the status bar
    keeps saying why nothing started once the toast is gone. The port freed, S starts the
    run, and its success is the exit status (not 2 for the refusal before it)."""
    holder = socket.socket()
    holder.bind(("127.0.0.1", 0))
    holder.listen()
    port = holder.getsockname()[1]
    hosts = tmp_path / "hosts.yaml"
    hosts.write_text(f"cluster: {{ps: ['localhost:{port}'], worker: [localhost:auto]}}\n"
                     f"training: {{steps: 20}}\nrun_dir: {tmp_path / 'runs'}\n")
    status = tmp_path / "exit-status"
    command = (f"env PYTHONPATH={shlex.quote(str(REPO))} {shlex.quote(sys.executable)} -m tui.cli "
               f"{shlex.quote(str(hosts))}; echo $? > {shlex.quote(str(status))}; exec sleep 300")
    tmux = Tmux(f"sh -c {shlex.quote(command)}", private=True)
    try:
        screen = tmux.wait_for(r"cannot do that", 60).string
        said = " ".join(line.strip("│▌ ") for line in screen.splitlines())
        assert f"localhost:{port} is in use by pid {os.getpid()}" in said, screen
        tmux.wait_for(rf"^ run - │ [\d:]+ │ not started: localhost:{port} is in use", 30)
        holder.close()
        tmux.send("S")
        tmux.wait_for(r"Start a new run\?", 30)
        tmux.send("y")
        tmux.wait_for(r"(?m)^ run \S+ │ [\d:]+ │ succeeded", 180)
        tmux.send("q")
        wait_until(status.exists, 30, interval=0.2, what=tmux.screen)
    finally:
        tmux.close()
        holder.close()
    assert status.read_text().strip() == "0"
    assert_no_trainers_left(tmp_path / "runs")


def test_what_a_program_does_not_report_is_shown_as_not_known(tmp_path: Path) -> None:
    """A program with no batch_size: its rate is steps/s (the Throughput pane, headless);
    the table's ex/s is not known, "-", never a 0 that reads as a stall. It reports no loss:
    the loss chart says so, rather than draw a flat line that reads as a loss at its low."""
    (tmp_path / "steps.py").write_text(
        "import sys, time\n"
        "if sys.argv[1] == 'worker':\n"
        "    for i in range(1, 100000):\n"
        "        print(f'step {i} loss 0.5', flush=True)\n"
        "        time.sleep(0.05)\n")
    hosts = tmp_path / "hosts.yaml"
    hosts.write_text("program:\n  command: python steps.py {job}\n"
                     "  metrics: ['step (?P<step>\\d+) loss']\n"
                     "cluster: {ps: [localhost:auto], worker: [localhost:auto]}\n"
                     f"run_dir: {tmp_path / 'runs'}\n")
    command = (f"env PYTHONPATH={shlex.quote(str(REPO))} {shlex.quote(sys.executable)} -m tui.cli "
               f"{shlex.quote(str(hosts))}")
    tmux = Tmux(command, private=True)
    try:
        row = tmux.wait_for(r"worker0\s+\S+\s+\w+\s+\d+w?\s+\d+\s+[1-9]\d+\s+(\S+)", 60)
        assert row[1] == "-", row.string
        tmux.send("Tab", "Tab", "Tab")
        screen = tmux.wait_for(r"(?m)^ training loss: none reported yet\n(.*)\n", 30)
        assert not screen[1].strip(" ▁"), screen.string  # no flat line under it
        tmux.send("q")
        tmux.wait_for(r"Quit\?", 30)
        tmux.send("y")
    finally:
        tmux.close()
