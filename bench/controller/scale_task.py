"""A lightweight task for :mod:`bench.controller.scale`: binds its port (``--address host:port``, so
the controller sees it ready, as a TensorFlow server would be), then prints ``step N loss X``
every ``--every`` seconds until it is stopped. Imports nothing heavy: 256 of them must cost
the machine little beside the controller being measured."""

from __future__ import annotations

import random
import socket
import sys
import time


def main() -> None:
    address = every = None
    for arg in sys.argv[1:]:
        name, _, value = arg.partition("=")
        if name == "--address":
            address = value
        elif name == "--every":
            every = float(value)
    if address is None or every is None:
        sys.exit("usage: scale_task.py --address=HOST:PORT --every=SECONDS")
    host, _, port = address.rpartition(":")
    server = socket.socket()
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    server.bind((host, int(port)))
    server.listen()
    # Each task starts its lines at its own moment within the first period, so the
    # controller sees a steady stream rather than bursts of every task at once.
    time.sleep(random.uniform(0, every))
    step, begin = 0, time.monotonic()
    out = sys.stdout
    while True:
        step += 1
        out.write(f"step {step} loss {1.0 / step:.4f}\n")
        out.flush()
        ahead = begin + step * every - time.monotonic()
        if ahead > 0:
            time.sleep(ahead)


if __name__ == "__main__":
    main()
