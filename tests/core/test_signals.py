"""The controller's own signals, against the real binary in a private tmux: SIGHUP (the
terminal is gone: tmux killed, an SSH connection dropped) and SIGTERM end a run cleanly in
both front ends (summary.json written, the tasks' last lines kept, no task left), and a
controller suspended with SIGTSTP and continued does not blame its tasks for its pause."""

from __future__ import annotations

import json
import shlex
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from textwrap import dedent

import psutil
import pytest

from tests.common.test_terminal import PrivateTmux
from tests.support import wait_until

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

DATA = Path(__file__).resolve().parents[1] / "common" / "data"
REPO = Path(__file__).resolve().parents[2]


def hosts(tmp_path: Path, ticks: int = 0, quiet_after: int = 0) -> Path:
    folder = tmp_path / "program"
    folder.mkdir()
    shutil.copy(DATA / "steady.py", folder / "steady.py")
    path = folder / "hosts.yaml"
    path.write_text(dedent(f"""\
        program:
          command: {sys.executable} steady.py {{job}} --ticks {ticks} --quiet-after {quiet_after}
          shim: false
        cluster: {{ps: [localhost:auto], worker: [localhost:auto]}}
        run_dir: {tmp_path / 'runs'}
        """))
    return path


def controller(tmux: PrivateTmux) -> psutil.Process:
    return psutil.Process(int(tmux.ask("display", "-p", "-t", "t", "#{pane_pid}").strip()))


def the_run(tmp_path: Path) -> Path:
    return wait_until(lambda: next((tmp_path / "runs").glob("*/tasks/worker0.json"), None), 60).parents[1]


def log_text(run: Path, task: str) -> str:
    """What the run directory's log of ``task`` holds yet (made at its first line, flushed
    every second)."""
    path = run / "logs" / f"{task}.log"
    return path.read_text() if path.exists() else ""


def task_pids(run: Path) -> list[int]:
    pids = []
    for line in (run / "events.jsonl").read_text().splitlines():
        record = json.loads(line)
        if record.get("type") == "task_state" and record.get("pid"):
            pids.append(record["pid"])
    return pids


def assert_ended_cleanly(run: Path, signal_name: str, *also: str) -> None:
    """Interrupted, by ``signal_name`` or a reason of ``also``; the worker's last words kept and
    every task gone."""
    summary = json.loads(wait_until(lambda: (run / "summary.json").exists() and (run / "summary.json"), 30)
                         .read_text())
    assert summary["outcome"] == "interrupted", summary
    assert any(reason in summary["reason"] for reason in (signal_name, *also)), summary["reason"]
    log = log_text(run, "worker0")
    assert "LAST WORDS" in log, log[-500:]  # asked to stop, it said so, and that was kept
    left = [pid for pid in task_pids(run) if psutil.pid_exists(pid)
            and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE]
    assert not left, left


def controller_command(tmp_path: Path, ui: str) -> str:
    """The shell command a tmux pane runs: the controller (exec'd: the pane's process)."""
    command = (f"cd {shlex.quote(str(REPO))} && exec {shlex.quote(sys.executable)} -m tui.cli "
               f"{shlex.quote(str(hosts(tmp_path)))} {ui}")
    return f"sh -c {shlex.quote(command)}"


def ticking(tmux: PrivateTmux, tmp_path: Path) -> tuple[psutil.Process, Path]:
    """The controller's process and its run, once worker0 has ticked five times."""
    process = controller(tmux)
    run = the_run(tmp_path)
    wait_until(lambda: "tick 5" in log_text(run, "worker0"), 60)
    return process, run


@pytest.mark.parametrize("ui", ["--no-ui", ""])
@pytest.mark.parametrize("how", ["SIGHUP", "SIGTERM"])
def test_sighup_and_sigterm_end_the_run_cleanly(tmp_path: Path, ui: str, how: str) -> None:
    tmux = PrivateTmux(tmp_path, controller_command(tmp_path, ui))
    try:
        process, run = ticking(tmux, tmp_path)
        if how == "SIGHUP":
            tmux.close()  # the terminal goes away: tmux hangs up on the pane
        else:
            process.send_signal(signal.SIGTERM)
        process.wait(60)
        # Either front end may find its terminal gone (a failed write, tui.app.terminal_driver;
        # a hung-up terminal, tui.common.streams) before the SIGHUP arrives: the same stop,
        # said as what it saw first.
        gone = ("interrupted: the terminal is gone",) if how == "SIGHUP" else ()
        assert_ended_cleanly(run, how, *gone)
    finally:
        tmux.close()


def test_a_killed_app_has_its_core_end_the_run_cleanly(tmp_path: Path) -> None:
    """SIGKILL, which the app cannot catch: its core (a process of its own) sees the app's
    socket end and stops the run as interrupted, every task with its last words."""
    tmux = PrivateTmux(tmp_path, controller_command(tmp_path, ""))
    try:
        process, run = ticking(tmux, tmp_path)
        core = next(child for child in process.children()
                    if "tui.core.process_main" in " ".join(child.cmdline()))
        process.kill()
        core.wait(60)
        assert_ended_cleanly(run, "the app ended")
    finally:
        tmux.close()


def test_a_suspended_controller_does_not_blame_its_tasks(tmp_path: Path) -> None:
    """Ctrl-Z, then fg, four seconds later: with a 2 s stall timeout and --on-stall fail,
    every task is still healthy and the run succeeds."""
    result_file = tmp_path / "out"
    process = subprocess.Popen(
        [sys.executable, "-m", "tui.cli", str(hosts(tmp_path, ticks=120)), "--no-ui",
         "--stall-timeout", "2", "--on-stall", "fail"],
        cwd=REPO, stdout=result_file.open("w"), stderr=subprocess.STDOUT)
    try:
        run = the_run(tmp_path)
        wait_until(lambda: "tick 10" in log_text(run, "worker0"), 60)
        # Ctrl-Z stops the controller's process group (its tasks run in groups of their own);
        # SIGSTOP, because a SIGTSTP to a process without a terminal is discarded.
        process.send_signal(signal.SIGSTOP)
        wait_until(lambda: psutil.Process(process.pid).status() == psutil.STATUS_STOPPED, 10)
        time.sleep(4)  # the suspension itself: twice the stall timeout
        process.send_signal(signal.SIGCONT)
        assert process.wait(90) == 0, result_file.read_text()[-3000:]
    finally:
        if process.poll() is None:
            process.kill()
    out = result_file.read_text()
    assert "stalled" not in out
    assert "the controller was paused for" in out
    assert json.loads((run / "summary.json").read_text())["outcome"] == "succeeded"


def assert_ended_for_lost_output(run: Path, controller: psutil.Process) -> int | None:
    """The run ended cleanly because its output has no reader; the controller's exit code
    (None where it is not the test's child, whose code its parent reaps)."""
    code = controller.wait(60)
    assert_ended_cleanly(run, "nobody reads the output any more")
    return code


def test_a_headless_json_controller_whose_parent_dies_ends_the_run_cleanly(tmp_path: Path) -> None:
    """The controller's stdout is a pipe its parent holds and never reads: the parent is
    killed, so nothing it prints can be read any more; it stops its tasks as interrupted and
    ends, rather than training on unseen."""
    holder = (f"import subprocess, sys, time\n"
              f"p = subprocess.Popen({[sys.executable, '-m', 'tui.cli', str(hosts(tmp_path)), '--json']!r},"
              f" stdout=subprocess.PIPE, stderr=open({str(tmp_path / 'err')!r}, 'w'))\n"
              f"print(p.pid, flush=True)\n"
              f"time.sleep(3600)\n")
    parent = subprocess.Popen([sys.executable, "-c", holder], cwd=REPO, stdout=subprocess.PIPE, text=True)
    try:
        assert parent.stdout is not None
        process = psutil.Process(int(parent.stdout.readline()))
        run = the_run(tmp_path)
        wait_until(lambda: "tick 5" in log_text(run, "worker0"), 60)
        parent.kill()  # the pipe's only reader goes with it
        parent.wait(30)
        assert_ended_for_lost_output(run, process)
    finally:
        parent.kill()


def test_a_headless_controller_finds_its_reader_gone_without_writing(tmp_path: Path) -> None:
    """The reader closes the pipe while every task is quiet (nothing is written that could
    fail): the controller still sees it, stops the run as interrupted and exits 130."""
    process = subprocess.Popen(
        [sys.executable, "-m", "tui.cli", str(hosts(tmp_path, quiet_after=5)), "--no-ui"],
        cwd=REPO, stdout=subprocess.PIPE, stderr=(tmp_path / "err").open("w"))
    try:
        run = the_run(tmp_path)
        wait_until(lambda: "tick 5" in log_text(run, "worker0"), 60)
        assert process.stdout is not None
        process.stdout.close()
        assert assert_ended_for_lost_output(run, psutil.Process(process.pid)) == 130
    finally:
        if process.poll() is None:
            process.kill()
