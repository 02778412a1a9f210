"""What the network-fault tests share: controllers started on a lab of real hosts
(tests/support/netlab.py) with the built-in trainer in the standard layout (ps0 on h0, worker0
on h1, worker1 on h2, each on port 2222), cuts of a host's link, and what the run said."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.launch.test_lab_runs import standard_layout
from tests.support import wait_until
from tests.support.netlab import NetLab

REPO = Path(__file__).resolve().parents[2]
#: A cut that is not past a lease. Not shorter, although the suite waits it out: at 20 s the
#: workers' gRPC links reach their TCP user timeout (20 s), so a cut exercises their timing
#: out and the restart it costs, which on the lab found a restarted worker's failing first step
#: and an input refill that never ended; a 20 s cut is also past TCP's 12.6 s resend, the
#: backoff that once held the lease's beats past a 25 s lease (tests/launch/test_connect.py).
CUT = 20.0
TRAINING: dict[str, object] = {"log_every": 50, "checkpoint_every": 1000}
#: The ps host's link while a worker's host is cut off (tc tbf, :meth:`NetLab.cap`). The other
#: worker trains on alone through the cut, up to ~350 steps/s on a quiet machine and a third of
#: that in a loaded suite: a target past the link's return at the fastest rate took minutes
#: at the slowest. Each step moves the model's ~19 KiB of variables both ways over this link,
#: so at 4 Mbit/s the cluster makes at most ~26 steps/s whatever the machine's speed (~22
#: measured: 250-450 steps by a 10 s or 20 s cut's end). The cap is lifted once the controller
#: heard from the host again, and the run ends at its full speed.
PACE = "4mbit"
#: The run's target with the ps link paced: well past what it can train until the cut ends
#: and the host answers (1100 steps would take the 40 s to a 20 s cut's end, start included,
#: and 20 s more), and :func:`trained_after` checks that it did not reach it before.
PACED_STEPS = 2000
#: A ps's cut stops every worker's steps (each is an update of the ps's variables), so a run
#: cut at its first steps is still training when the ps comes back, however long the cut: this
#: many steps are its end after the link is back, not a margin against the cut's length (the
#: runs made 2-335 steps before their cut; :func:`trained_after` checks it).
PS_CUT_STEPS = 1500
RUN_LIMIT = 360


@dataclass
class Controller:
    """``python -m tui HOSTS --no-ui`` in the background, its output in a file."""

    process: subprocess.Popen[bytes]
    out: Path
    runs: Path

    def text(self) -> str:
        return self.out.read_text(errors="replace")

    def events(self) -> Iterator[dict[str, Any]]:
        for path in self.runs.glob("*/events.jsonl"):
            for line in path.read_text(errors="replace").splitlines():
                try:
                    yield json.loads(line)
                except ValueError:
                    continue  # a line being written

    def steps(self, task: str, after: float = 0.0) -> list[tuple[float, int]]:
        """(time, global step) of ``task``'s step events after ``after``."""
        return [(e["t"], e["event"]["global_step"]) for e in self.events()
                if e["type"] == "trainer_event" and e["task"] == task and e["event"]["event"] == "step"
                and e["t"] > after]

    def states(self, task: str) -> list[str]:
        return [e["new"] for e in self.events() if e["type"] == "task_state" and e["task"] == task]

    def finish(self, limit: float = RUN_LIMIT) -> int:
        """Its exit code, once it exits; killed past ``limit`` seconds."""
        try:
            return self.process.wait(limit)
        finally:
            if self.process.poll() is None:
                self.process.kill()
                self.process.wait()


@pytest.fixture
def controllers() -> Iterator[list[Controller]]:
    started: list[Controller] = []
    yield started
    for controller in started:
        if controller.process.poll() is None:
            controller.process.kill()
            controller.process.wait()


def start(controllers: list[Controller], lab: NetLab, tmp_path: Path,
          network: dict[str, float], steps: int, timeout: float = RUN_LIMIT - 20,
          mode: str = "async") -> Controller:
    """The controller on ``lab`` in the standard layout, training :data:`TRAINING` for ``steps``
    in ``mode`` (``--timeout timeout``)."""
    training = {**TRAINING, "steps": steps, "mode": mode}
    path = standard_layout(lab, tmp_path, ps=1, workers=2, training=training)
    config = yaml.safe_load(path.read_text())
    config["restart"] = {"policy": "on-failure", "max_restarts": 3, "backoff": 1}
    config["network"] = network
    path.write_text(yaml.safe_dump(config))
    out = tmp_path / "out.txt"
    with out.open("wb") as sink:
        # Warm, as a user's run is: the hosts' pools import TensorFlow while the controller
        # starts, and a task restarted after its host came back forks from its host's pool.
        process = subprocess.Popen([sys.executable, "-m", "tui", str(path), "--no-ui",
                                    "--timeout", str(timeout)], cwd=REPO, stdout=sink,
                                   stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    controller = Controller(process, out, tmp_path / "runs")
    controllers.append(controller)
    return controller


def stepping(controller: Controller, task: str, timeout: float = 200) -> None:
    wait_until(lambda: controller.steps(task) or controller.process.poll() is not None, timeout,
               lambda: controller.text()[-3000:])
    assert controller.process.poll() is None, controller.text()[-3000:]


def trainers(lab: NetLab, host: str) -> list[int]:
    """Pids of trainer processes in ``host``."""
    found = []
    for pid in lab.pids(host):
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ")
        except OSError:
            continue
        if b"trainer" in cmdline:
            found.append(pid)
    return found


def cut_for(lab: NetLab, host: str, seconds: float) -> float:
    """Cut ``host`` off for ``seconds`` (the fault itself, not a wait); when its link came back."""
    lab.cut(host)
    try:
        time.sleep(seconds)
    finally:
        lab.restore(host)
    return time.time()


def trained_after(controller: Controller, back: float) -> bool:
    """The run was still short of its target when ``back`` (the link's return) came: every
    step logged before it is below the target, and it ended (exit 0) having reached it."""
    before = [step for task in ("worker0", "worker1") for t, step in controller.steps(task) if t <= back]
    summary = summary_of(controller)
    return bool(before) and max(before) < summary["target"] <= summary["global_step"]


def summary_of(controller: Controller) -> dict[str, Any]:
    (path,) = controller.runs.glob("*/summary.json")
    summary: dict[str, Any] = json.loads(path.read_text())
    return summary


def back_in_training(controller: Controller, task: str, back: float) -> str:
    """How long after ``back`` (the link's return) ``task`` was running again and stepping."""
    running = [e["t"] for e in controller.events() if e["type"] == "task_state" and e["task"] == task
               and e["new"] == "running" and e["t"] > back]
    steps = controller.steps(task, after=back)
    return (f"{task} running again after {running[0] - back:.1f} s" if running else f"{task} running on") + \
        (f", stepping after {steps[0][0] - back:.1f} s" if steps else ", no step after (target reached)")

