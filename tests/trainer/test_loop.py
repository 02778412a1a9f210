"""A worker's training step (trainer/loop.py, ``Worker.step``) against a session that fails
the way TensorFlow's does: a connection reset (a peer's gRPC channel still on the connection
of this task's previous launch) is tried again, with the step the ps cancels after it;
anything else, a reset that stays, or any reset in sync mode ends the step as before. The
real thing is a ps host cut off and back (tests/launch/test_network_faults_ps.py: each
worker restarted at most once)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from trainer import loop
from trainer.cluster import Role
from trainer.settings import Mode, TrainingSettings
from tui.core.hints import hint_for

RESET = "From /job:ps/replica:0/task:0:; sendmsg: Connection reset by peer (104)"
CANCELLED = "From /job:ps/replica:0/task:0:; Step 96033330367443839 cancelled.  Cancelling rendezvous."
REFUSED = "failed to connect to all addresses; last error: UNKNOWN: ipv4:10.0.0.2:2222: Connection refused"


class Unavailable(Exception):
    """Stands in for tf.errors.UnavailableError."""


class Aborted(Exception):
    """Stands in for tf.errors.AbortedError."""


class Session:
    """Fails the first runs with ``failures``, then answers (global step, loss)."""

    def __init__(self, *failures: Exception) -> None:
        self.failures = list(failures)
        self.runs = 0

    def run(self, fetches: Any) -> tuple[int, float]:
        self.runs += 1
        if self.failures:
            raise self.failures.pop(0)
        return 7, 0.5


def worker(session: Session, mode: Mode = Mode.ASYNC) -> loop.Worker:
    made = loop.Worker.__new__(loop.Worker)  # (no TensorFlow: only what step() reads)
    made.tf = SimpleNamespace(errors=SimpleNamespace(UnavailableError=Unavailable, AbortedError=Aborted))
    made.sess = session
    made.graph = SimpleNamespace(train_op="train_op", loss="loss")
    made.settings = TrainingSettings(mode=mode)
    made.role = Role("worker", 1)
    return made


def test_a_step_reset_by_a_peer_is_tried_again(capsys: pytest.CaptureFixture[str]) -> None:
    session = Session(Unavailable(RESET))
    assert worker(session).step() == (7, 0.5)
    assert session.runs == 2
    (line,) = capsys.readouterr().out.splitlines()
    assert "worker1: a step failed on a connection reset" in line
    assert hint_for(line) is None  # not yet a failure: no "a ps or peer task is gone" hint


def test_the_step_the_ps_cancels_after_a_reset_is_tried_again_too() -> None:
    session = Session(Unavailable(RESET), Aborted(CANCELLED))
    assert worker(session).step() == (7, 0.5)
    assert session.runs == 3


def test_a_reset_that_stays_or_another_error_ends_the_step() -> None:
    stays = Session(*[Unavailable(RESET)] * (len(loop.RESET_RETRY_SECS) + 1))
    with pytest.raises(Unavailable, match="reset by peer"):
        worker(stays).step()
    assert stays.runs == len(loop.RESET_RETRY_SECS) + 1
    # A ps that is gone: refused at once, not tried again; a cancelled step without a reset
    # before it is not this.
    for error in (Unavailable(REFUSED), Aborted(CANCELLED)):
        session = Session(error)
        with pytest.raises(type(error)):
            worker(session).step()
        assert session.runs == 1


def test_sync_steps_are_not_tried_again() -> None:
    session = Session(Unavailable(RESET))
    with pytest.raises(Unavailable):
        worker(session, Mode.SYNC).step()
    assert session.runs == 1
