"""A worker's training step (trainer/loop.py, ``Worker.step``) that a ps fails because it
could not connect to this worker's own address, with real TensorFlow: a real trainer ps
(``python -m trainer``) and worker servers whose address in the cluster is a port the test
holds shut, then opens (a forwarder to the server's own port).

That is what a worker restarted on its old host:port meets when the ps tried the address
while no task listened there: the ps's gRPC channel to it stays in reconnect backoff (up to
about 1 s) after the address answers again, and every call on it fails at once with
"failed to connect to all addresses ... ipv4:<the worker's address>: Connection refused",
reported from /job:ps (seen on the lab after a 20 s ps cut: the restarted worker's first step
failed on it and cost a restart). Here the first try's failure is the ps's refused attempt;
the test opens the address at once, and the ps's channel backs off as it did there."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.support import wait_until
from tests.trainer.cluster_runner import LocalCluster, Task, free_ports
from trainer import data as datasets
from trainer import loop, protocol, step_faults
from trainer.cluster import Cluster, Role
from trainer.graph import build
from trainer.settings import TrainingSettings
from tui.core.hints import hint_for

pytestmark = pytest.mark.integration
#: What a step's tries may take past their waits: a step each, on a loaded machine (what they
#: must not take is a wait of their own: gRPC's reconnect backoff, a restart).
SLACK = 3.0


class Forwarder:
    """The worker's address answering again: each connection to ``port`` is relayed to the
    worker server's own port."""

    def __init__(self, port: int, to: int) -> None:
        self.to = to
        self.listener = socket.create_server(("127.0.0.1", port))
        self.sockets: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return  # closed
            server = socket.create_connection(("127.0.0.1", self.to))
            self.sockets += [client, server]
            for source, sink in ((client, server), (server, client)):
                threading.Thread(target=self._relay, args=(source, sink), daemon=True).start()

    @staticmethod
    def _relay(source: socket.socket, sink: socket.socket) -> None:
        try:
            while chunk := source.recv(65536):
                sink.sendall(chunk)
            sink.shutdown(socket.SHUT_WR)
        except OSError:
            pass  # closed at the end of the test

    def close(self) -> None:
        self.listener.close()
        for sock in self.sockets:
            sock.close()


class Watched:
    """A worker's session whose training-step tries are counted and their errors kept;
    ``on_failure`` runs once, after the first failed try."""

    def __init__(self, session: Any, on_failure: Callable[[], None] | None = None) -> None:
        self.session = session
        self.on_failure = on_failure
        self.tries = 0
        self.errors: list[Exception] = []

    def run(self, fetches: Any, feed_dict: Any = None, **options: Any) -> Any:
        if feed_dict is not None:  # the input pipeline's fill
            return self.session.run(fetches, feed_dict=feed_dict)
        self.tries += 1
        try:
            return self.session.run(fetches, **options)
        except Exception as exc:
            self.errors.append(exc)
            if len(self.errors) == 1 and self.on_failure is not None:
                self.on_failure()
            raise


@dataclass
class Lab:
    """A ps (process ``ps_pid``) and two worker servers; the ps knows worker ``i`` at
    ``cluster.worker[i]``, while its server listens on ``bound[i]`` (another port: the address
    shut until a test opens it; or the same)."""

    tf: Any
    cluster: Cluster
    bound: list[int]
    data: datasets.Data
    ps_pid: int
    sessions: list[Any] = field(default_factory=list)

    def port(self, index: int) -> int:
        return int(self.cluster.worker[index].rpartition(":")[2])

    def worker(self, index: int) -> loop.Worker:
        """Worker ``index`` as the trainer makes it (its session on its own server), with the
        model initialised and its input filled: ready for its first step."""
        tf, settings, role = self.tf, TrainingSettings(), Role("worker", index)
        made = loop.Worker.__new__(loop.Worker)  # (its server is the lab's, on another port)
        made.tf, made.settings, made.cluster, made.role = tf, settings, self.cluster, role
        made.is_chief, made.data, made.local_step = role.is_chief, self.data, 0
        made.recent_steps = deque(maxlen=loop.DEADLINE_WINDOW)
        made.graph = build(tf, settings, self.cluster, index, datasets.input_shape(settings))
        made.sess = tf.Session(f"grpc://127.0.0.1:{self.bound[index]}", graph=made.graph.graph,
                               config=loop.server_config(tf, role))
        self.sessions.append(made.sess)
        if made.sess.run(made.graph.ready_op).size:
            made.sess.run(made.graph.init_op)
        made.fill_input()
        made.sess.run(made.graph.local_init_op)
        return made


@contextmanager
def lab_of(bound: Callable[[Cluster], list[int]]) -> Iterator[Lab]:
    """A real trainer ps and two worker servers, worker ``i`` listening on ``bound(cluster)[i]``."""
    from trainer.tfimport import import_tf

    ps = LocalCluster(1, 2, [], only=["ps0"])
    cluster = Cluster(tuple(ps.spec["ps"]), tuple(ps.spec["worker"]))
    ports = bound(cluster)
    servers = Task("workers", subprocess.Popen(
        [sys.executable, str(Path(__file__).with_name("worker_servers.py")), json.dumps(ps.spec),
         json.dumps(ports)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL))
    threading.Thread(target=LocalCluster._read, args=(servers,), daemon=True).start()
    try:
        tf = import_tf()
        data = datasets.load(TrainingSettings())
        wait_until(lambda: ps.task("ps0").of(protocol.Ready), 60, lambda: ps.task("ps0").output)
        wait_until(lambda: servers.lines or servers.proc.poll() is not None, 60, "worker servers")
        assert servers.proc.poll() is None and servers.lines[0][1] == "ready"
        made = Lab(tf, cluster, ports, data, ps.task("ps0").proc.pid)
        yield made
        for session in made.sessions:
            session.close()  # while its server lives: later, closing it waits for the server
    finally:
        servers.proc.kill()
        servers.proc.wait()
        ps.kill()


@pytest.fixture(scope="module")
def lab() -> Iterator[Lab]:
    with lab_of(lambda _: free_ports(2)) as made:  # (the cluster's addresses stay shut)
        yield made


def test_a_step_a_ps_fails_while_its_channel_to_this_worker_backs_off_is_tried_again(
        lab: Lab, capsys: pytest.CaptureFixture[str]) -> None:
    opened: list[Forwarder] = []
    made = lab.worker(0)
    made.sess = watched = Watched(made.sess, lambda: opened.append(Forwarder(lab.port(0), lab.bound[0])))
    started = time.monotonic()
    try:
        step, loss = made.step()
    finally:
        for forwarder in opened:
            forwarder.close()
    took = time.monotonic() - started
    first = watched.errors[0]
    # The first try met the ps's refused attempt on this worker's address ...
    assert isinstance(first, lab.tf.errors.UnavailableError)
    # (Said by the ps, and reported "From /job:ps/" or, when the worker's own part of the step
    # was cancelled first on a loaded machine, "From /job:worker/" around the ps's words.)
    assert "failed to connect to all addresses" in str(first) and "Connection refused" in str(first)
    assert f":{lab.port(0)}:" in str(first) and opened
    # ... and a later one its channel, connected again once its backoff was over.
    assert step >= 1 and loss > 0 and watched.tries == len(watched.errors) + 1
    assert took < sum(step_faults.REFUSED_RETRY_SECS) + SLACK, took
    lines = capsys.readouterr().out.splitlines()
    assert lines and all("worker0: a step failed as a ps could not connect to this worker" in line
                         for line in lines), lines
    assert hint_for(lines[0]) is None  # not yet a failure: no "a ps or peer task is gone" hint


def test_a_ps_that_cannot_reach_this_worker_for_good_still_ends_the_step_promptly(lab: Lab) -> None:
    made = lab.worker(1)
    made.sess = watched = Watched(made.sess)  # its address never answers
    started = time.monotonic()
    with pytest.raises(lab.tf.errors.UnavailableError, match=f":{lab.port(1)}: .*Connection refused"):
        made.step()
    took = time.monotonic() - started
    assert watched.tries == len(step_faults.REFUSED_RETRY_SECS) + 1
    assert sum(step_faults.REFUSED_RETRY_SECS) <= took < sum(step_faults.REFUSED_RETRY_SECS) + SLACK, took
