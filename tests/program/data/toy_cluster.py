"""A cluster with no TensorFlow in it, for the controller's sake: the ps listens on its port
(and never exits, like ``server.join()``); each worker listens on its port too and takes
steps of a global step shared through a file in the checkpoint directory, checks its ps is
reachable before each, and exits 1 with an UnavailableError-like line when it is not.

``--after`` says what worker 0 (the chief) does after the last step: ``exit``; ``hang``,
block without using the CPU, as a sync chief waiting for a gradient that never comes; or
``work:SECONDS``, compute for that long (an export after training) and write ``exported``
into the checkpoint directory before it exits."""

import argparse
import os
import socket
import sys
import threading
import time
from pathlib import Path

parser = argparse.ArgumentParser()
parser.add_argument("--job", required=True)
parser.add_argument("--address", required=True)
parser.add_argument("--ps", required=True)
parser.add_argument("--steps", type=int, required=True)
parser.add_argument("--ckpt", required=True)
parser.add_argument("--index", type=int, default=0)
parser.add_argument("--after", default="exit")
args = parser.parse_args()

if args.job == "ps":
    host, port = args.address.rsplit(":", 1)
    with socket.create_server((host, int(port))) as server:
        print("serving", flush=True)
        while True:
            connection, _ = server.accept()
            connection.close()

# A worker serves too (a TensorFlow worker has a server): its port says it is up.
host, port = args.address.rsplit(":", 1)
listener = socket.create_server((host, int(port)))
state = Path(args.ckpt) / "step"
state.parent.mkdir(parents=True, exist_ok=True)
host, port = args.ps.rsplit(":", 1)
while True:
    try:
        socket.create_connection((host, int(port)), timeout=1).close()
    except OSError as exc:
        print(f"UnavailableError: the ps at {args.ps} went away: {exc}", flush=True)
        sys.exit(1)
    step = int(state.read_text()) if state.exists() else 0
    if step >= args.steps:
        break
    scratch = state.with_name(f"step.{os.getpid()}")
    scratch.write_text(str(step + 1))
    os.replace(scratch, state)
    print(f"Step: {step + 1}, Cost: {1 / (step + 1):.3f}", flush=True)
    time.sleep(0.05)
print("done", flush=True)
if args.index == 0 and args.after == "hang":
    threading.Event().wait()
elif args.index == 0 and args.after.startswith("work:"):
    until = time.monotonic() + float(args.after.split(":", 1)[1])
    total = 0
    while time.monotonic() < until:
        total += sum(range(10_000))
    (Path(args.ckpt) / "exported").write_text(str(total))
    print("exported", flush=True)
