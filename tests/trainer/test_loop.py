"""A worker's training step (trainer/loop.py, ``Worker.step``) against a session that fails
the way TensorFlow's does: a connection reset (a peer's gRPC channel still on the connection
of this task's previous launch) is tried again, with the step the ps cancels after it;
so is a step past its deadline (tests/trainer/test_loop_deadline.py has the real thing), and a
ps that could not connect to this worker's own address (its channel to the address
still backing off: tests/trainer/test_loop_refused.py has the real thing); anything else, a
failure that stays, or any of them in sync mode ends the step as before. The real thing is a
ps host cut off and back (tests/launch/test_network_faults_ps.py: each worker restarted at
most once)."""

from __future__ import annotations

import socket
import threading
import time
from collections import deque
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from trainer import loop, step_faults
from trainer.cluster import Cluster, Role
from trainer.settings import Mode, TrainingSettings
from tui.core.hints import hint_for

RESET = "From /job:ps/replica:0/task:0:; sendmsg: Connection reset by peer (104)"
CANCELLED = "From /job:ps/replica:0/task:0:; Step 96033330367443839 cancelled.  Cancelling rendezvous."
#: The ps (203.0.113.5:2222, an address no host here has) is gone: this worker cannot reach it.
REFUSED = "failed to connect to all addresses; last error: UNKNOWN: ipv4:203.0.113.5:2222: Connection refused"
CLUSTER = Cluster(ps=("203.0.113.5:2222",), worker=("localhost:2222", "localhost:2223"))


def ps_refused(address: str) -> str:
    """A ps could not connect to ``address`` (TensorFlow 2.21's text, as the ps reports it)."""
    return ("Graph execution error:\n\nFrom /job:ps/replica:0/task:0:\nfailed to connect to all "
            f"addresses; last error: UNKNOWN: {address}: Failed to connect to remote host: "
            "Connection refused\n\t [[{{node gradients/hidden/MatMul_grad/MatMul_1_S29}}]]")


class Unavailable(Exception):
    """Stands in for tf.errors.UnavailableError."""


class Aborted(Exception):
    """Stands in for tf.errors.AbortedError."""


class TimedOut(Exception):
    """Stands in for tf.errors.DeadlineExceededError."""


class Session:
    """Fails the first runs with ``failures``, then answers (global step, loss); counts the
    input pipeline's fills apart."""

    def __init__(self, *failures: Exception) -> None:
        self.failures = list(failures)
        self.runs = 0
        self.fills = 0
        self.deadlines: list[float | None] = []  # each step's, in seconds

    def run(self, fetches: Any, feed_dict: object = None, options: Any = None,
            run_metadata: object = None) -> tuple[int, float] | None:
        if fetches == "iterator_init":
            self.fills += 1
            return None
        self.runs += 1
        timeout = getattr(options, "timeout_in_ms", None)
        self.deadlines.append(None if timeout is None else timeout / 1000)
        if self.failures:
            raise self.failures.pop(0)
        return 7, 0.5


def worker(session: Session, mode: Mode = Mode.ASYNC) -> loop.Worker:
    made = loop.Worker.__new__(loop.Worker)  # (no TensorFlow: only what step() reads)
    made.recent_steps = deque(maxlen=loop.DEADLINE_WINDOW)
    made.tf = SimpleNamespace(errors=SimpleNamespace(UnavailableError=Unavailable, AbortedError=Aborted,
                                                     DeadlineExceededError=TimedOut),
                              RunOptions=SimpleNamespace)
    made.sess = session
    made.graph = SimpleNamespace(fetches=lambda exact=False: ["train_op", "loss"],  # type: ignore[assignment]
                                 iterator_init="iterator_init", x_feed="x", y_feed="y")
    made.data = SimpleNamespace(train=SimpleNamespace(images=(), labels=()))  # type: ignore[assignment]
    made.settings = TrainingSettings(mode=mode)
    made.role = Role("worker", 1)
    made.cluster = CLUSTER
    return made


def test_a_step_reset_by_a_peer_is_tried_again(capsys: pytest.CaptureFixture[str]) -> None:
    session = Session(Unavailable(RESET))
    assert worker(session).step() == (7, 0.5)
    assert session.runs == 2
    (line,) = capsys.readouterr().out.splitlines()
    assert "worker1: a step failed on a connection reset" in line
    assert hint_for(line) is None  # not yet a failure: no "a ps or peer task is gone" hint


def test_a_step_whose_write_met_a_reset_connection_is_tried_again(capsys: pytest.CaptureFixture[str]) -> None:
    pipe = ("sendmsg: Broken pipe (32); Additional GRPC error information from remote target "
            "/job:ps/replica:0/task:0 while calling /tensorflow.WorkerService/RegisterGraph")
    session = Session(Unavailable(pipe))
    assert worker(session).step() == (7, 0.5)
    assert session.runs == 2 and "a step failed on a connection reset by a peer" in capsys.readouterr().out


def test_the_step_the_ps_cancels_after_a_reset_is_tried_again_too() -> None:
    session = Session(Unavailable(RESET), Aborted(CANCELLED))
    assert worker(session).step() == (7, 0.5)
    assert session.runs == 3 and session.fills == 2  # each try on a refilled input


DUPLICATE = ("The same RunGraph (Worker) request was received twice. graph_handle: \"0000000000000002\" "
             "step_id: 61289467829837187 request_id: 7120457003125329520")


def test_a_step_a_peer_received_twice_is_tried_again(capsys: pytest.CaptureFixture[str]) -> None:
    # A RunGraph resent after a channel reset: the first copy ran, its answer is lost; the
    # worker ended on it (fault-free lab runs of 8 minutes lost 2 workers of 3 so).
    session = Session(Aborted(DUPLICATE))
    assert worker(session).step() == (7, 0.5)
    assert session.runs == 2 and session.fills == 1
    (line,) = capsys.readouterr().out.splitlines()
    assert "worker1: a step failed as a peer received its request twice" in line
    assert hint_for(line) is None
    # After a reset too, and a duplicate that stays ends the step as before.
    session = Session(Unavailable(RESET), Aborted(DUPLICATE))
    assert worker(session).step() == (7, 0.5)
    stays = Session(*[Aborted(DUPLICATE)] * (len(step_faults.DUPLICATE_RETRY_SECS) + 1))
    with pytest.raises(Aborted, match="received twice"):
        worker(stays).step()
    assert stays.runs == len(step_faults.DUPLICATE_RETRY_SECS) + 1
    sync = Session(Aborted(DUPLICATE))
    with pytest.raises(Aborted):
        worker(sync, Mode.SYNC).step()


TIMED_OUT = "Graph execution error:\n\nOperation timed out."


def test_an_async_step_past_its_deadline_is_tried_again_with_twice_the_time(
        capsys: pytest.CaptureFixture[str]) -> None:
    # Its connection died at the far end while the link was cut: the next call on it is reset.
    session = Session(TimedOut(TIMED_OUT), Unavailable(RESET))
    assert worker(session).step() == (7, 0.5)
    deadline = loop.STEP_DEADLINE_SECS
    assert session.deadlines == [deadline, 2 * deadline, 2 * deadline] and session.fills == 2
    first, second = capsys.readouterr().out.splitlines()
    assert f"worker1: a step failed as it did not end within {deadline:g} s" in first
    assert "worker1: a step failed on a connection reset by a peer" in second
    assert hint_for(first) is None


def test_a_workers_slow_steps_lengthen_its_deadline() -> None:
    """A large model's step alive at 30 s is not given up at 20 s at every step: the first
    try's deadline is ten times the slowest recent step where that is longer."""
    session = Session()
    made = worker(session)
    made.recent_steps.extend([0.5, 30.0, 1.0])
    assert made.step() == (7, 0.5)
    assert session.deadlines == [30.0 * loop.DEADLINE_FACTOR]
    assert len(made.recent_steps) == 4  # the step that passed is counted too


def test_a_step_that_never_ends_in_time_fails_and_sync_steps_have_no_deadline() -> None:
    stays = Session(*[TimedOut(TIMED_OUT)] * (len(step_faults.DEADLINE_RETRY_SECS) + 1))
    with pytest.raises(TimedOut):
        worker(stays).step()
    deadline = loop.STEP_DEADLINE_SECS
    assert stays.deadlines == [deadline * 2 ** n for n in range(len(step_faults.DEADLINE_RETRY_SECS) + 1)]
    # A sync step may wait for its round's token as long as its slowest replica takes.
    sync = Session()
    assert worker(sync, Mode.SYNC).step() == (7, 0.5)
    assert sync.deadlines == [None]


class CutWhileReading:
    """A real session whose first step is cut short while it reads its batch (as the ps's
    cancellation of a step that a reset failed cuts it), that step then reported as reset."""

    def __init__(self, tf: Any, session: Any) -> None:
        self.tf = tf
        self.session = session
        self.cut = False

    def run(self, fetches: Any, feed_dict: Any = None, **options: Any) -> Any:
        if not self.cut and feed_dict is None:
            self.cut = True
            with pytest.raises(self.tf.errors.DeadlineExceededError):
                self.session.run(fetches, options=self.tf.RunOptions(timeout_in_ms=50))
            raise self.tf.errors.UnavailableError(None, None, RESET)
        return self.session.run(fetches, feed_dict=feed_dict, **options)


def cut_while_reading(tf: Any, graph: Any, init: Any, train_op: Any, loss: Any, iterator: Any,
                      x_feed: Any, y_feed: Any) -> loop.Worker:
    """A worker on a real session of ``graph`` whose first step is cut short while it reads
    its batch (:class:`CutWhileReading`), ``init`` run and its input filled."""
    made = loop.Worker.__new__(loop.Worker)
    made.recent_steps = deque(maxlen=loop.DEADLINE_WINDOW)
    made.tf = tf
    made.sess = CutWhileReading(tf, tf.Session(graph=graph))
    made.graph = SimpleNamespace(fetches=lambda exact=False: [train_op, loss],  # type: ignore[assignment]
                                 iterator_init=iterator.initializer, x_feed=x_feed, y_feed=y_feed)
    made.data = SimpleNamespace(train=SimpleNamespace(  # type: ignore[assignment]
        images=np.ones((64, 4), np.float32), labels=np.zeros(64, np.int64)))
    made.settings = TrainingSettings(mode=Mode.ASYNC)
    made.role = Role("worker", 1)
    made.cluster = CLUSTER
    made.sess.session.run(init)
    made.sess.session.run(iterator.initializer, feed_dict={x_feed: made.data.train.images,
                                                           y_feed: made.data.train.labels})
    return made


@pytest.mark.integration
def test_a_step_cut_short_while_reading_its_batch_is_tried_again_on_a_refilled_input() -> None:
    from trainer.tfimport import import_tf

    tf = import_tf()

    def slowly(images: Any) -> Any:
        time.sleep(0.2)  # (a read the cut lands in)
        return images

    graph = tf.Graph()
    with graph.as_default():
        x_feed, y_feed = tf.placeholder(tf.float32, [None, 4]), tf.placeholder(tf.int64, [None])
        # The worker's pipeline (trainer/graph.py), with a slow read.
        dataset = (tf.data.Dataset.from_tensor_slices((x_feed, y_feed)).shuffle(100, seed=1).repeat()
                   .map(lambda x, y: (tf.py_func(slowly, [x], tf.float32), y))
                   .batch(8, drop_remainder=True).prefetch(4))
        iterator = tf.data.make_initializable_iterator(dataset)
        images, _ = iterator.get_next()
        global_step = tf.train.get_or_create_global_step()
        loss = tf.reduce_mean(images)
        with tf.control_dependencies([loss]):
            train_op = tf.assign_add(global_step, 1)
        init = tf.global_variables_initializer()
    made = cut_while_reading(tf, graph, init, train_op, loss, iterator, x_feed, y_feed)
    # Before: the try read from the cancelled iterator and the worker ended on its error.
    step, value = made.step()
    assert made.sess.cut and step == 1 and value == pytest.approx(1.0)


def test_a_reset_that_stays_or_another_error_ends_the_step() -> None:
    stays = Session(*[Unavailable(RESET)] * (len(step_faults.RESET_RETRY_SECS) + 1))
    with pytest.raises(Unavailable, match="reset by peer"):
        worker(stays).step()
    assert stays.runs == len(step_faults.RESET_RETRY_SECS) + 1
    # A ps that is gone: refused at once, not tried again; a cancelled step without a reset
    # before it is not this.
    for error in (Unavailable(REFUSED), Aborted(CANCELLED)):
        session = Session(error)
        with pytest.raises(type(error)):
            worker(session).step()
        assert session.runs == 1


def test_sync_steps_are_not_tried_again() -> None:
    for error in (RESET, ps_refused("ipv4:127.0.0.1:2223")):
        session = Session(Unavailable(error))
        with pytest.raises(Unavailable):
            worker(session, Mode.SYNC).step()
        assert session.runs == 1


def outward_ip() -> str | None:
    """This host's address towards other hosts (a UDP socket's own address: no packet sent)."""
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
            sock.connect(("203.0.113.5", 2222))
            return str(sock.getsockname()[0])
    except OSError:
        return None


@pytest.mark.parametrize("ip", ["127.0.0.1", "::1", "outward"])
def test_a_step_a_ps_could_not_connect_to_this_worker_is_tried_again(
        ip: str, capsys: pytest.CaptureFixture[str]) -> None:
    """Any address of this host with this worker's port is this worker (it listens on all of
    them), whatever name the cluster gives the host; the cancelled step after it is tried too."""
    ip = (outward_ip() or "") if ip == "outward" else ip
    if not step_faults.is_local(ip):
        pytest.skip(f"no address {ip!r} on this host")
    address = f"ipv6:%5B{ip}%5D:2223" if ":" in ip else f"ipv4:{ip}:2223"  # (as gRPC writes them)
    session = Session(Unavailable(ps_refused(address)), Aborted(CANCELLED))
    assert worker(session).step() == (7, 0.5)
    assert session.runs == 3 and session.fills == 2
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 2 and all("worker1: a step failed as a ps could not connect to this "
                                   "worker's address" in line for line in lines)
    assert hint_for(lines[0]) is None


def test_a_ps_refused_by_another_address_or_that_stays_refused_ends_the_step() -> None:
    # Another worker's port on this host, this port on another host, a ps this worker cannot
    # reach: not this worker's address.
    for address in ("ipv4:127.0.0.1:2222", "ipv4:203.0.113.5:2223"):
        session = Session(Unavailable(ps_refused(address)))
        with pytest.raises(Unavailable):
            worker(session).step()
        assert session.runs == 1
    tries = len(step_faults.REFUSED_RETRY_SECS) + 1
    stays = Session(*[Unavailable(ps_refused("ipv4:127.0.0.1:2223"))] * tries)
    started = time.monotonic()
    with pytest.raises(Unavailable, match="Connection refused"):
        worker(stays).step()
    assert stays.runs == len(step_faults.REFUSED_RETRY_SECS) + 1
    assert time.monotonic() - started < sum(step_faults.REFUSED_RETRY_SECS) + 0.5


class HangingRefill(Session):
    """A session whose refill of the input never returns until ``release`` is set."""

    def __init__(self, *failures: Exception) -> None:
        super().__init__(*failures)
        self.release = threading.Event()

    def run(self, fetches: Any, feed_dict: object = None, options: Any = None,
            run_metadata: object = None) -> tuple[int, float] | None:
        if fetches == "iterator_init":
            self.release.wait(30)
        return super().run(fetches, feed_dict, options, run_metadata)


def test_a_refill_that_hangs_fails_the_step_at_its_deadline(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(loop, "REFILL_DEADLINE_SECS", 0.2)
    session = HangingRefill(Unavailable(RESET))
    try:
        with pytest.raises(Unavailable, match="reset by peer"):
            worker(session).step()
    finally:
        session.release.set()
    assert session.runs == 1  # never tried on an input that was not refilled
    assert "refilling its input for that try did not end within 0.2 s" in capsys.readouterr().out


@pytest.mark.integration
def test_a_refill_held_up_by_a_read_of_the_old_input_fails_the_step_at_its_deadline(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """With real TensorFlow: the step is cut short while its batch is read, and that read
    does not end (here a map function that waits); the refill replaces the iterator, which
    waits for it. (On the lab, after a 20 s cut of a worker's host, the refill never ended.)"""
    from trainer.tfimport import import_tf

    tf = import_tf()
    monkeypatch.setattr(loop, "REFILL_DEADLINE_SECS", 1.0)
    release = threading.Event()

    def stuck(images: Any) -> Any:
        release.wait(60)
        return images

    graph = tf.Graph()
    with graph.as_default():
        x_feed, y_feed = tf.placeholder(tf.float32, [None, 4]), tf.placeholder(tf.int64, [None])
        dataset = (tf.data.Dataset.from_tensor_slices((x_feed, y_feed)).repeat()
                   .map(lambda x, y: (tf.py_func(stuck, [x], tf.float32), y))
                   .batch(8, drop_remainder=True).prefetch(4))
        iterator = tf.data.make_initializable_iterator(dataset)
        images, _ = iterator.get_next()
        loss = tf.reduce_mean(images)
        nothing = tf.no_op()
    made = cut_while_reading(tf, graph, nothing, loss, loss, iterator, x_feed, y_feed)
    began = time.monotonic()
    try:
        with pytest.raises(tf.errors.UnavailableError, match="reset by peer"):
            made.step()
        assert time.monotonic() - began < 30  # not the map function's 60 s
    finally:
        release.set()
