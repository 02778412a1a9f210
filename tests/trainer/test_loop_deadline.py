"""A worker's async training step (trainer/loop.py, ``Worker.step``) whose answer does not
come, with real TensorFlow: a real trainer ps, stopped (SIGSTOP) while the step runs, and
worker servers on the cluster's own addresses (tests/trainer/test_loop_refused.py's lab).

A stopped ps stands in for what the lab met after a 20 s cut of the ps's host: a step whose
connection died at the far end, with no word of it here, waited for good (every worker stood
still until the run's timeout; tests/launch/test_network_faults_ps.py). Each try now has a
deadline: the step is given up, tried again with twice the time, and ends with TensorFlow's
DeadlineExceededError once its tries are spent, for the restart policy to take over."""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Iterator

import pytest

from tests.trainer.test_loop_refused import SLACK, Lab, Watched, lab_of
from trainer import loop, step_faults

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def open_lab() -> Iterator[Lab]:
    """The lab with each worker server on the address the cluster names."""
    with lab_of(lambda cluster: [int(a.rpartition(":")[2]) for a in cluster.worker]) as made:
        yield made


def test_a_step_that_does_not_come_back_is_tried_again_then_fails_at_its_deadlines(
        open_lab: Lab, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(loop, "STEP_DEADLINE_SECS", 1.0)
    monkeypatch.setattr(step_faults, "DEADLINE_RETRY_SECS", (0.1,))
    made = open_lab.worker(0)
    assert made.step()[0] >= 1  # the ps answers
    made.recent_steps.clear()  # (its time, on a loaded machine, would lengthen the deadline)
    made.sess = watched = Watched(made.sess)
    os.kill(open_lab.ps_pid, signal.SIGSTOP)
    # Without a deadline the step waits for the ps as long as it stays stopped: 60 s here.
    resume = threading.Timer(60, os.kill, (open_lab.ps_pid, signal.SIGCONT))
    resume.start()
    started = time.monotonic()
    try:
        with pytest.raises(open_lab.tf.errors.DeadlineExceededError):
            made.step()
        took = time.monotonic() - started
    finally:
        resume.cancel()
        os.kill(open_lab.ps_pid, signal.SIGCONT)
    # Two tries, of 1 s and 2 s.
    assert watched.tries == 2 and 3.0 <= took < 3.0 + SLACK, (watched.tries, took)
    lines = capsys.readouterr().out.splitlines()
    assert any("worker0: a step failed as it did not end within 1 s" in line for line in lines), lines
    # The session is still good: once the ps answers, the next step passes.
    made.sess = watched.session
    assert made.step()[0] >= 2


def test_a_step_held_up_past_its_deadline_passes_on_the_next_try(
        open_lab: Lab, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(loop, "STEP_DEADLINE_SECS", 1.0)
    made = open_lab.worker(1)
    made.sess = watched = Watched(made.sess)
    os.kill(open_lab.ps_pid, signal.SIGSTOP)
    resume = threading.Timer(1.5, os.kill, (open_lab.ps_pid, signal.SIGCONT))
    resume.start()
    try:
        step, loss = made.step()
    finally:
        resume.cancel()
        os.kill(open_lab.ps_pid, signal.SIGCONT)
    assert step >= 1 and loss > 0
    assert watched.tries >= 2 and isinstance(watched.errors[0], open_lab.tf.errors.DeadlineExceededError)


def test_the_deadline_grows_with_the_workers_own_slow_steps(open_lab: Lab) -> None:
    """A large model's step on a loaded CPU, alive at 30 s, is not given up at 20 s (its work
    thrown away at every step): the deadline is ten times the slowest recent step where that is
    longer, and a step that passed says how long it took."""
    made = open_lab.worker(0)
    made.recent_steps.clear()
    assert made.step_deadline() == loop.STEP_DEADLINE_SECS
    made.recent_steps.extend([0.5, 30.0, 1.0])
    assert made.step_deadline() == 300.0
    made.recent_steps.clear()
    made.step()
    (took,) = made.recent_steps
    assert 0 < took < SLACK
    made.recent_steps.extend([30.0] * loop.DEADLINE_WINDOW)  # the slow ones age out
    assert made.step_deadline() == 300.0
    made.recent_steps.extend([0.01] * loop.DEADLINE_WINDOW)
    assert made.step_deadline() == loop.STEP_DEADLINE_SECS
