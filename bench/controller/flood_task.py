"""A stand-in task that floods its stdout: speaks the trainer's start-up protocol (``--hold``,
``loaded``, ``go``, ``ready``), prints numbered lines at a fixed rate, then says ``done``.
Used only by the log-flood benchmark; the numbering lets it count lost lines."""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time

from trainer import protocol


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--hold", action="store_true")
    parser.add_argument("--flood-rate", type=float, default=1000.0)
    parser.add_argument("--flood-seconds", type=float, default=30.0)
    args, _ = parser.parse_known_args()
    spec = json.loads(os.environ["TF_CONFIG"])
    role, index = spec["task"]["type"], spec["task"]["index"]
    out = sys.stdout
    go = threading.Event()

    def watch_stdin() -> None:
        for line in sys.stdin:
            if line.strip() == "go":
                go.set()
        os._exit(143)  # the controller went away

    threading.Thread(target=watch_stdin, daemon=True).start()
    if args.hold:
        out.write(protocol.Loaded(role=role, index=index, pid=os.getpid(), seconds=0.0).to_json() + "\n")
        out.flush()
        go.wait()
    address = spec["cluster"][role][index]
    out.write(protocol.Ready(role=role, index=index, pid=os.getpid(), address=address).to_json() + "\n")
    out.flush()
    total = int(args.flood_rate * args.flood_seconds)
    start = time.monotonic()
    for n in range(total):
        out.write(f"{role}{index} flood line {n} \x1b[32mpayload\x1b[0m {'x' * 40}\n")
        if n % 50 == 49:
            out.flush()
            ahead = (n + 1) / args.flood_rate - (time.monotonic() - start)
            if ahead > 0:
                time.sleep(ahead)
    out.write(protocol.Done(role=role, index=index, reason="target_reached").to_json() + "\n")
    out.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
