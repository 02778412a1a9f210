"""A cluster with no TensorFlow in it whose chief drives the training, as TF2's coordinator
does: every task listens on its port; the workers, evaluators and ps then serve forever (like
``server.join()``); the chief waits until every worker accepts connections, prints, and exits
with ``--exit``. ``--evaluator-exit N``: the evaluator prints an evaluation and exits N at once
(no server, as TensorFlow's evaluator has none); ``--chief-seconds``: the chief's training time;
``--sigkill-worker N`` (with ``--index``): halfway through, the chief tells worker N to
SIGKILL itself (a worker lost mid-training; told only once the controller probed its port)."""

import argparse
import os
import signal
import socket
import sys
import time

parser = argparse.ArgumentParser()
parser.add_argument("--job", required=True)
parser.add_argument("--address", required=True)
parser.add_argument("--workers", required=True)
parser.add_argument("--exit", type=int, default=0)
parser.add_argument("--evaluator-exit", type=int, default=None)
parser.add_argument("--chief-seconds", type=float, default=0.0)
parser.add_argument("--index", type=int, default=-1)
parser.add_argument("--sigkill-worker", type=int, default=-1)
args = parser.parse_args()

if args.job == "evaluator" and args.evaluator_exit is not None:
    print("4/4 - 0s - loss: 0.5 - accuracy: 0.75", flush=True)
    sys.exit(args.evaluator_exit)

host, port = args.address.rsplit(":", 1)
listener = socket.create_server((host, int(port)))
if args.job != "chief":
    print("serving", flush=True)
    probed = False
    while True:
        connection, _ = listener.accept()
        connection.settimeout(5)
        try:
            said = connection.recv(5)  # the chief says so; the controller's port probe does not
        except OSError:
            said = b""
        connection.close()
        probed = probed or not said  # the controller's probe: it counts this worker as up
        if said == b"die" and probed and args.job == "worker" and args.index == args.sigkill_worker >= 0:
            os.kill(os.getpid(), signal.SIGKILL)

deadline = time.monotonic() + 60
for worker in args.workers.split(","):
    worker_host, worker_port = worker.rsplit(":", 1)
    while True:
        try:
            socket.create_connection((worker_host, int(worker_port)), timeout=1).close()
            break
        except OSError:
            if time.monotonic() > deadline:
                sys.exit(f"worker {worker} never came up")
            time.sleep(0.05)
time.sleep(args.chief_seconds / 2)
if args.sigkill_worker >= 0:  # mid-training: the worker is told to die
    worker_host, worker_port = args.workers.split(",")[args.sigkill_worker].rsplit(":", 1)
    with socket.create_connection((worker_host, int(worker_port)), timeout=5) as told:
        told.sendall(b"die")
time.sleep(args.chief_seconds / 2)
print(f"chief done, exit {args.exit}", flush=True)
sys.exit(args.exit)
