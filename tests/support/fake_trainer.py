"""A stand-in for ``python -m trainer``, for testing the controller's logic with real
processes but without TensorFlow. Speaks the real protocol (via the protocol dataclasses),
binds its TF_CONFIG port like a real gRPC server, exits when its stdin closes.

Behaviour is chosen per task through environment variables naming tasks, e.g.
``FAKE_FAIL=worker1`` (all of them: comma-separated task names, or ``*`` for every task):

FAKE_DIR          directory where workers leave a ``done-<task>`` marker; a ps exits 0
                  once every worker's marker is there (the real trainer's handshake)
FAKE_STEPS        global steps per worker (default 20)
FAKE_STEP_DELAY   seconds per step (default 0.01)
FAKE_FAIL         these tasks print an error event and a traceback-ish line, exit 3
                  after a few steps
FAKE_FAIL_EARLY   these tasks print a usage error on stderr and exit 2 before `ready`
FAKE_NO_READY     these tasks never print `ready` (they wait for stdin EOF)
FAKE_FOREVER      these tasks (workers) train until their stdin closes
FAKE_PS_STAY      these ps never exit by themselves
FAKE_STUBBORN     these tasks ignore SIGTERM and stdin EOF (only SIGKILL stops them)
(With ``--hold`` it reports ``loaded`` and waits for a ``go`` line, like the real one.)

FAKE_NASTY        these tasks print invalid JSON, binary, ANSI escapes, a 1 MB line and a
                  last line without a newline
"""

from __future__ import annotations

import json
import os
import signal
import socket
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from trainer import protocol


def chosen(variable: str, task: str) -> bool:
    names = {n.strip() for n in os.environ.get(variable, "").split(",") if n.strip()}
    return "*" in names or task in names


def emit(event: protocol.Event) -> None:
    sys.stdout.write(event.to_json() + "\n")
    sys.stdout.flush()


GO = threading.Event()


def watch_stdin(stubborn: bool) -> None:
    """Like the real trainer: a ``go`` line releases ``--hold``; EOF means exit (unless
    stubborn)."""
    def run() -> None:
        for line in sys.stdin.buffer:
            if line.strip() == b"go":
                GO.set()
        if not stubborn:
            os._exit(0)
    threading.Thread(target=run, daemon=True).start()


def nasty_output() -> None:
    out = sys.stdout.buffer
    out.write(b'{"event": "step", "v": 1, "role": "worker"\n')           # invalid JSON
    out.write(b'{"event": "nope", "v": 1, "role": "worker", "index": 0}\n')  # unknown kind
    out.write(b"\x00\x01\xff\xfe binary \x80\x81\n")
    out.write(b"\x1b[31mred\x1b[0m \x1b]0;title\x07 text\n")
    out.write(b"x" * 1_000_000 + b"\n")
    out.flush()
    sys.stderr.write("warning on stderr\n")
    sys.stderr.flush()


def main() -> int:
    tf_config = json.loads(os.environ["TF_CONFIG"])
    role = tf_config["task"]["type"]
    index = int(tf_config["task"]["index"])
    task = f"{role}{index}"
    workers = tf_config["cluster"]["worker"]
    address = tf_config["cluster"][role][index]
    stubborn = chosen("FAKE_STUBBORN", task)
    if stubborn:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    watch_stdin(stubborn)

    if chosen("FAKE_FAIL_EARLY", task):
        sys.stderr.write("trainer: error: --data-path: /nonexistent does not exist\n")
        return 2
    if "--hold" in sys.argv:
        emit(protocol.Loaded(role=role, index=index, pid=os.getpid(), seconds=0.01))
        GO.wait()
    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    server.bind(("127.0.0.1", int(address.rsplit(":", 1)[1])))
    server.listen()
    print(f"{task}: listening on {address}")
    if chosen("FAKE_NO_READY", task):
        while True:
            time.sleep(1)
    emit(protocol.Ready(role=role, index=index, pid=os.getpid(), address=address, tf_version="fake"))
    if chosen("FAKE_NASTY", task):
        nasty_output()

    fake_dir = Path(os.environ.get("FAKE_DIR", "."))
    if role == "ps":
        markers = [fake_dir / f"done-worker{i}" for i in range(len(workers))]
        while chosen("FAKE_PS_STAY", task) or not all(m.exists() for m in markers):
            time.sleep(0.02)
        emit(protocol.Done(role=role, index=index, reason=protocol.REASON_CLUSTER_DONE))
        return 0

    steps = int(os.environ.get("FAKE_STEPS", "20"))
    delay = float(os.environ.get("FAKE_STEP_DELAY", "0.01"))
    chief = index == 0
    emit(protocol.Initialized(role=role, index=index, global_step=0, seconds=0.1, is_chief=chief))
    if chief:
        shard = protocol.VariableShard(name="dense/kernel", variable="dense/kernel", shard=0,
                                       num_shards=1, shape=(64, 10), dtype="float32", bytes=2560, ps=0)
        ps_count = len(tf_config["cluster"]["ps"])
        emit(protocol.Placement(role=role, index=index, model="mlp", strategy="greedy", partitions=1,
                                num_ps=ps_count, variables=(shard,),
                                ps_bytes=tuple(2560 if p == 0 else 0 for p in range(ps_count))))
    step = 0
    loss = 2.0
    while step < steps or chosen("FAKE_FOREVER", task):
        step += 1
        loss *= 0.95
        time.sleep(delay)
        if step % 5 == 0:
            emit(protocol.Step(role=role, index=index, global_step=step * len(workers), local_step=step,
                               loss=loss, examples_per_sec=1000.0 + index, step_time=delay,
                               target=steps * len(workers)))
        if chosen("FAKE_FAIL", task) and step == 5:
            sys.stderr.write("Traceback (most recent call last):\nRuntimeError: fake failure\n")
            emit(protocol.Error(role=role, index=index, type="RuntimeError", message="fake failure"))
            return 3
    if chief:
        emit(protocol.Eval(role=role, index=index, global_step=steps * len(workers), accuracy=0.9,
                           loss=loss, examples=100))
    emit(protocol.Done(role=role, index=index, reason=protocol.REASON_TARGET_REACHED,
                       global_step=steps * len(workers), local_step=step, loss=loss,
                       accuracy=0.9 if chief else None))
    (fake_dir / f"done-{task}").touch()
    if chosen("FAKE_NASTY", task):
        sys.stdout.write("last line without a newline")
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    # Not sys.exit: the stdin watcher thread must not race the interpreter's shutdown.
    os._exit(code)
