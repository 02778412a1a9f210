"""No process of the controller outlives its app (issue 33): the real app in tmux, quit at
each stage of a run (while its tasks start, while they train, after the run ended) in each
way an app ends (``q``, its terminal closed, SIGTERM, SIGKILL); then every process it had
(the app, its core, the warm pool, the tasks) is gone, checked by pid."""

from __future__ import annotations

import contextlib
import fcntl
import os
import pty
import shlex
import signal
import struct
import subprocess
import sys
import termios
import threading
from pathlib import Path

import psutil
import pytest

from tests.app.test_tmux import Tmux
from tests.support import wait_until, write_hosts

pytestmark = [pytest.mark.integration, pytest.mark.tmux, pytest.mark.timeout(240)]

REPO = Path(__file__).resolve().parents[2]
#: Within this many seconds of the quit, nothing is left (a warm pool's close waits 3 s for
#: its EOF; the tasks' grace period is the supervisor's; the app gives its core 15 s).
GONE_WITHIN = 30.0


def _site_packages() -> str:
    """The pool runs the interpreter's real path (until issue 30's fix): give it this
    environment's packages, so it imports TensorFlow for as long as a real pool does and
    the "while its tasks start" stage is a real one."""
    return next(p for p in sys.path if p.endswith("site-packages"))


def _start(tmp_path: Path, steps: int, slow_import: bool) -> tuple[Tmux, psutil.Process, Path]:
    hosts = write_hosts(tmp_path / "hosts.yaml", steps=steps)
    pid_file = tmp_path / "app.pid"
    path = os.pathsep.join([str(REPO), _site_packages()])
    if slow_import:
        # A TensorFlow whose import does not end: the warm pool never gets ready (as on a
        # machine so loaded, or a file system so slow, that it takes minutes): a stop must
        # not wait for it (the core waited, idle, ignoring SIGTERM: issue 33).
        package = tmp_path / "slow" / "tensorflow"
        package.mkdir(parents=True)
        (package / "__init__.py").write_text("import time\ntime.sleep(3600)\n")
        path = os.pathsep.join([str(package.parent), path])
    command = (f"echo $$ > {shlex.quote(str(pid_file))}; exec env PYTHONPATH={shlex.quote(path)} "
               f"{shlex.quote(sys.executable)} -m tui.cli {shlex.quote(str(hosts))}")
    tmux = Tmux(f"sh -c {shlex.quote(command)}", private=True)
    pid = wait_until(lambda: pid_file.exists() and pid_file.read_text().strip(), 30, "the app started")
    return tmux, psutil.Process(int(pid)), tmp_path / "runs"


def _screen(tmux: Tmux) -> str:
    """The screen, or "" once the session ended with its app."""
    try:
        return tmux.screen()
    except subprocess.CalledProcessError:
        return ""


def _family(app: psutil.Process) -> list[psutil.Process]:
    """The app and everything it started (psutil keeps each one's start time: a pid reused
    later is not taken for it)."""
    return [app, *app.children(recursive=True)]


def _alive(processes: list[psutil.Process]) -> list[str]:
    left = []
    for process in processes:
        try:
            if process.is_running() and process.status() != psutil.STATUS_ZOMBIE:
                left.append(f"{process.pid} {process.name()} (parent {process.ppid()})")
        except psutil.NoSuchProcess:
            continue
    return left


@pytest.mark.parametrize(("stage", "how"), [
    ("starting", "q, then the terminal closed"),
    ("starting", "SIGKILL"),
    ("starting", "SIGTERM"),
    ("training", "the terminal closed"),
    ("training", "SIGKILL"),
    ("ended", "q"),
    ("ended", "SIGTERM"),
])
def test_nothing_of_the_controller_outlives_its_app(tmp_path: Path, stage: str, how: str) -> None:
    tmux, app, runs = _start(tmp_path, 1_000_000 if stage != "ended" else 20, stage == "starting")
    try:
        tmux.wait_for(r"worker1", 60)  # the task table
        wait_until(app.children, 30, "the app started its core")
        if stage == "starting":
            # The core has started the warm pool, which imports TensorFlow for ever.
            wait_until(lambda: len(_family(app)) >= 3, 30, lambda: _family(app))
        elif stage == "training":
            tmux.wait_for(r"worker0\s+\S+\s+running", 120)
        else:
            wait_until(lambda: list(runs.glob("*/summary.json")), 180, tmux.screen)
        family = _family(app)
        assert len(family) >= 2, family
        if how.startswith("q"):
            tmux.send("q")
            # Asked to confirm while tasks are active (starting counts), not otherwise.
            wait_until(lambda: "Quit?" in _screen(tmux) or not _alive([app]), 30, lambda: _screen(tmux))
            if "Quit?" in _screen(tmux):
                tmux.send("y")
            if how.endswith("closed"):
                tmux.close()
        elif how == "the terminal closed":
            tmux.close()
        else:
            app.send_signal(signal.SIGKILL if how == "SIGKILL" else signal.SIGTERM)
        wait_until(lambda: not _alive(family), GONE_WITHIN, lambda: _alive(family))
    finally:
        tmux.close()


def test_quitting_before_any_task_runs_exits_as_interrupted(tmp_path: Path) -> None:
    """q while every task still waits for the warm pool (nothing is running, so nothing to
    confirm): the run was cut short by the operator, 130 as quitting mid-run, not 1 ("a task
    failed": none did)."""
    hosts = write_hosts(tmp_path / "hosts.yaml", steps=1_000_000)
    package = tmp_path / "slow" / "tensorflow"  # a TensorFlow whose import never ends
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("import time\ntime.sleep(3600)\n")
    path = os.pathsep.join([str(package.parent), str(REPO), _site_packages()])
    status = tmp_path / "exit-status"
    command = (f"env PYTHONPATH={shlex.quote(path)} {shlex.quote(sys.executable)} -m tui.cli "
               f"{shlex.quote(str(hosts))}; echo $? > {shlex.quote(str(status))}; exec sleep 300")
    tmux = Tmux(f"sh -c {shlex.quote(command)}", private=True)
    try:
        tmux.wait_for(r"worker1\s+\S+\s+pending", 60)
        tmux.send("q")
        wait_until(status.exists, GONE_WITHIN, interval=0.2, what=tmux.screen)
        screen = tmux.wait_for(r"(?m)^  run dir ").string
    finally:
        tmux.close()
    assert "run stopped" in screen or "run interrupted" in screen, screen
    assert status.read_text().strip() == "130", screen


def test_an_app_whose_terminal_goes_without_a_hangup_stops_its_tasks_and_ends(tmp_path: Path) -> None:
    """The app in a terminal that is not its controlling one (started in a session of its own:
    no SIGHUP when the terminal goes), closed while the workers train: its screen writes now
    fail; it must neither hang on them (Textual's writer thread dies on the first, and the
    31st after it blocked the app for good, tasks and all) nor leave anything behind."""
    hosts = write_hosts(tmp_path / "hosts.yaml", steps=1_000_000)
    primary, secondary = pty.openpty()
    fcntl.ioctl(secondary, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
    env = {**os.environ, "TERM": "xterm-256color",
           "PYTHONPATH": os.pathsep.join([str(REPO), _site_packages()])}
    app = subprocess.Popen([sys.executable, "-m", "tui.cli", str(hosts)], stdin=secondary, stdout=secondary,
                           stderr=secondary, cwd=tmp_path, env=env, start_new_session=True)
    os.close(secondary)
    reading = threading.Event()
    reading.set()

    def drain() -> None:  # a terminal nobody reads would block the app's writes
        while reading.is_set():
            try:
                if not os.read(primary, 65536):
                    return
            except OSError:
                return

    reader = threading.Thread(target=drain, daemon=True)
    reader.start()
    family: list[psutil.Process] = []
    try:
        process = psutil.Process(app.pid)

        def training() -> bool:
            return any('"event":"step"' in events.read_text()
                       for events in tmp_path.glob("runs/*/events.jsonl"))

        wait_until(training, 180, "a worker stepped")
        family = _family(process)
        assert len(family) >= 4, family  # the app, its core, the ps and the workers
        reading.clear()
        os.close(primary)  # the terminal is gone; nobody sends SIGHUP
        wait_until(lambda: not _alive(family), GONE_WITHIN, lambda: _alive(family))
        assert app.wait(5) == 130  # interrupted, as after SIGHUP
    finally:
        if app.poll() is None:
            os.killpg(app.pid, signal.SIGKILL)
            app.wait()
        for left in family:
            with contextlib.suppress(psutil.Error):
                left.kill()
