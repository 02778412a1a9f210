"""The app's core in a process of its own (tui.app.process_bridge, tui.core.process_main):
commands and events cross as they do on a thread, a command's error comes back to its
future, and neither a killed app nor a killed core leaves a task behind. Real processes:
the core's, and tasks of tests/support/fake_trainer.py (no TensorFlow)."""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import psutil
import pytest

from tests.support import wait_until
from tests.support.clirun import FAKE_TRAINER, REPO
from tests.support.clirun import write_hosts as write_fake_hosts
from tests.support.venvs import SHADOWING, plant_shadows
from trainer import protocol
from trainer.settings import TrainingSettings
from tui.app.process_bridge import PENDING_LINES, ProcessBridge, core_argv
from tui.app.state import Dashboard
from tui.config.load import load_config
from tui.core.commands import StartRun, StartTask, StopAll
from tui.core.events import (
    ControllerEvent,
    Level,
    Notice,
    ProgressUpdate,
    RunFinished,
    RunOutcome,
    RunStarted,
    TaskOutput,
    TrainerEvent,
)
from tui.core.inbox import COALESCE_STEPS_PAST, CoreLost, Happening
from tui.core.options import RunOptions
from tui.core.task_state import TaskState
from tui.core.traffic import TrafficUpdate
from tui.core.usage import UsageSample

pytestmark = pytest.mark.timeout(120)


def options_for(tmp_path: Path, workers: int = 2) -> tuple[RunOptions, object]:
    config = load_config(write_fake_hosts(tmp_path / "hosts.yaml", run_dir=tmp_path / "runs",
                                          workers=("localhost:auto",) * workers))
    options = RunOptions(config=config, runs_root=tmp_path / "runs")
    fake = dataclasses.replace(options.supervisor_options(), trainer_argv=[str(FAKE_TRAINER)], program=None)
    return options, fake


class Collected:
    """Everything a bridge delivered so far, drained as the app's timer would."""

    def __init__(self, bridge: ProcessBridge) -> None:
        self.bridge = bridge
        self.items: list[Happening] = []
        self.dropped = 0

    def until(self, found: type, text: str = "", timeout: float = 60.0) -> Happening:
        """The first ``found`` delivered (with ``text`` in its text), waiting for it."""
        def probe() -> Happening | None:
            items, dropped = self.bridge.drain()
            self.items += items
            self.dropped += dropped
            return next((i for i in self.items if isinstance(i, found) and text in getattr(i, "text", "")),
                        None)

        return wait_until(probe, timeout, f"no {found.__name__} {text!r} from the core")

    def running_pids(self) -> dict[str, int]:
        pids = {}
        for item in self.items:
            if getattr(item, "new", None) is TaskState.RUNNING and getattr(item, "pid", None):
                pids[item.task] = item.pid  # type: ignore[union-attr]
        return pids


def alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def test_a_run_crosses_from_the_core_process(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAKE_DIR", str(tmp_path))
    options, fake = options_for(tmp_path)
    # A user's own "tui" folder, "secrets.py", "yaml.py" ... where the app is started (and
    # beside hosts.yaml) do not stand in for ours in the core's process.
    markers = plant_shadows(tmp_path, SHADOWING)
    monkeypatch.chdir(tmp_path)
    bridge = ProcessBridge(options, fake)  # type: ignore[arg-type]
    try:
        assert bridge.process.pid != os.getpid()
        bridge.send(StartRun()).result(60)
        seen = Collected(bridge)
        finished = seen.until(RunFinished)
        assert isinstance(finished, RunFinished) and finished.summary.outcome is RunOutcome.SUCCEEDED
        assert isinstance(seen.items[0], RunStarted)
        assert set(seen.running_pids()) == {"ps0", "worker0", "worker1"}
        assert any(isinstance(i, TaskOutput) for i in seen.items)
        # In the core's order: the run's end comes last.
        order = [i for i in seen.items if isinstance(i, ControllerEvent)]
        assert order == sorted(order, key=lambda e: isinstance(e, RunFinished))
        # A command the core refuses says why, through its future.
        error = bridge.send(StartTask("worker0")).exception(30)
        assert isinstance(error, RuntimeError) and "the run is over" in str(error)
    finally:
        bridge.close(timeout=30)
    assert bridge.process.returncode == 0
    assert [m.name for m in markers if m.exists()] == []
    # Closed: a command now fails at once, saying so.
    assert "closed" in str(bridge.send(StopAll()).exception(5))


def test_a_killed_core_is_reported_and_its_tasks_die(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAKE_FOREVER", "*")
    monkeypatch.setenv("FAKE_PS_STAY", "*")
    options, fake = options_for(tmp_path)
    bridge = ProcessBridge(options, fake)  # type: ignore[arg-type]
    try:
        bridge.send(StartRun()).result(60)
        seen = Collected(bridge)
        wait_until(lambda: (seen.until(RunStarted), len(seen.running_pids()) == 3)[1], 60)
        pids = seen.running_pids()
        os.kill(bridge.process.pid, signal.SIGKILL)
        notice = seen.until(Notice, "core process ended (signal 9)")
        assert isinstance(notice, Notice) and notice.level is Level.ERROR
        lost = seen.until(CoreLost)  # (after which the app shows no task as running)
        assert isinstance(lost, CoreLost) and lost.text == notice.text
        error = bridge.send(StopAll()).exception(5)
        assert isinstance(error, RuntimeError) and "signal 9" in str(error)
        # Its tasks die with it (their parent-death signal), however it died.
        wait_until(lambda: not any(alive(pid) for pid in pids.values()), 30, "a task outlived its core")
    finally:
        bridge.close(timeout=30)


APP = textwrap.dedent("""\
    import dataclasses, json, sys, time
    from tui.app.process_bridge import PENDING_LINES, ProcessBridge, core_argv
    from tui.config.load import load_config
    from tui.core.commands import StartRun
    from tui.core.options import RunOptions
    from tui.core.task_state import TaskState
    config = load_config(sys.argv[1])
    options = RunOptions(config=config, runs_root=config.run_dir)
    fake = dataclasses.replace(options.supervisor_options(), trainer_argv=[sys.argv[2]], program=None)
    bridge = ProcessBridge(options, fake)
    bridge.send(StartRun()).result(60)
    pids, run_dir = {}, None
    while len(pids) < len(config.tasks):
        for event in bridge.drain()[0]:
            run_dir = getattr(event, "run_dir", run_dir)
            if getattr(event, "new", None) is TaskState.RUNNING:
                pids[event.task] = event.pid
        time.sleep(0.05)
    print(json.dumps({"core": bridge.process.pid, "tasks": pids, "run_dir": str(run_dir)}), flush=True)
    time.sleep(600)
""")


def test_a_killed_app_has_its_core_stop_every_task(tmp_path: Path) -> None:
    """SIGKILL, which the app cannot catch: its socket ends, and the core stops the run as
    interrupted, writes the summary and exits."""
    hosts = write_fake_hosts(tmp_path / "hosts.yaml", run_dir=tmp_path / "runs")
    env = {**os.environ, "FAKE_FOREVER": "*", "FAKE_PS_STAY": "*", "PYTHONPATH": str(REPO)}
    app = subprocess.Popen([sys.executable, "-c", APP, str(hosts), str(FAKE_TRAINER)], env=env,
                           stdout=subprocess.PIPE, text=True)
    try:
        assert app.stdout is not None
        started = json.loads(app.stdout.readline())
        app.kill()
        app.wait(10)
        psutil.Process(started["core"]).wait(60)  # (not our child: no status to read)
        assert not [pid for pid in started["tasks"].values() if alive(pid)]
        summary = json.loads((Path(started["run_dir"]) / "summary.json").read_text())
        assert summary["outcome"] == "interrupted" and "the app ended" in summary["reason"], summary
    finally:
        if app.poll() is None:
            app.kill()
            app.wait()


def _ignored(pid: int) -> int:
    """The signals process ``pid`` ignores, as a mask (/proc/PID/status, SigIgn)."""
    status = Path(f"/proc/{pid}/status").read_text()
    return int(next(line.split()[1] for line in status.splitlines() if line.startswith("SigIgn:")), 16)


def test_the_core_obeys_sigterm_before_it_is_told_what_to_run() -> None:
    """An app started with SIGTERM ignored (nohup and shells' traps leave such things):
    its core, not yet told what to run, still ends on SIGTERM (issue 33: cores ignoring
    SIGTERM stayed for good)."""
    ours, theirs = socket.socketpair()
    core = subprocess.Popen(core_argv(theirs.fileno()), pass_fds=(theirs.fileno(),),
                            stdin=subprocess.DEVNULL, start_new_session=True,
                            preexec_fn=lambda: signal.signal(signal.SIGTERM, signal.SIG_IGN))
    theirs.close()
    try:
        term = 1 << (signal.SIGTERM - 1)
        wait_until(lambda: not _ignored(core.pid) & term, 30, "the core still ignores SIGTERM")
        core.send_signal(signal.SIGTERM)
        assert core.wait(30) == -signal.SIGTERM
    finally:
        if core.poll() is None:
            core.kill()
            core.wait()
        ours.close()


def test_the_core_wakes_its_app_once_until_it_drains(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAKE_DIR", str(tmp_path))
    options, fake = options_for(tmp_path)
    bridge = ProcessBridge(options, fake)  # type: ignore[arg-type]
    woken: list[str] = []
    try:
        bridge.wake_on_news(lambda: woken.append(threading.current_thread().name))
        assert len(woken) == 1  # whatever came before is news too
        bridge.drain()
        bridge.send(StartRun()).result(60)
        wait_until(lambda: len(woken) == 2, 60, "no wake for the run's events")
        assert woken[1] == "tfdist-core-reader"
        # A whole run's frames, not drained: no further wake (the app draws them in one).
        wait_until(lambda: any((tmp_path / "runs").glob("*/summary.json")), 60, "the run did not end")
        assert len(woken) == 2
        seen = Collected(bridge)
        seen.until(RunFinished)
    finally:
        bridge.close(timeout=30)


def test_a_front_end_that_drains_rarely_gets_a_bounded_backlog_and_the_runs_end(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A front end that does not drain while 4 workers report 4,000 steps (and the core a
    progress for each): what waits for it holds each task's latest step in place of the
    earlier ones past the bound, one progress, the output's lines up to their bound (the
    rest counted), every state change, and the app's own model folded from it ends where the
    run ended."""
    workers, steps = 4, 5000
    monkeypatch.setenv("FAKE_DIR", str(tmp_path))
    monkeypatch.setenv("FAKE_STEPS", str(steps))
    monkeypatch.setenv("FAKE_STEP_DELAY", "0.0005")
    options, fake = options_for(tmp_path, workers)
    bridge = ProcessBridge(options, fake)  # type: ignore[arg-type]
    try:
        bridge.send(StartRun()).result(60)
        # (the drain a slow front end gets to once the run is over)
        wait_until(lambda: any((tmp_path / "runs").glob("*/summary.json")), 90, "the run did not end")
        seen = Collected(bridge)
        finished = seen.until(RunFinished)
    finally:
        bridge.close(timeout=30)
    assert isinstance(finished, RunFinished) and finished.summary.outcome is RunOutcome.SUCCEEDED
    lines = sum(len(item.lines) for item in seen.items if isinstance(item, TaskOutput))
    kept = [i for i in seen.items if isinstance(i, TrainerEvent) and isinstance(i.event, protocol.Step)]
    # The output's lines up to the bound (and the batch that crossed it), the rest counted.
    assert lines < PENDING_LINES + 1_000 and lines + seen.dropped >= workers * steps // 5
    assert len(kept) <= COALESCE_STEPS_PAST + 2 * workers < workers * steps // 5
    assert sum(isinstance(i, ProgressUpdate) for i in seen.items) <= 2 + workers
    dashboard = Dashboard(TrainingSettings())
    dashboard.apply_all([i for i in seen.items if not isinstance(i, (TrafficUpdate, UsageSample))])
    summary = finished.summary
    assert {name: row.state for name, row in dashboard.rows.items()} == \
        {task.name: task.state for task in summary.tasks}
    assert {row.global_step for name, row in dashboard.rows.items() if name.startswith("worker")} == \
        {steps * workers}
    assert dashboard.progress.global_step == summary.global_step and dashboard.finished == summary
