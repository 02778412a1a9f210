"""A task that prints 100-byte lines as fast as it can (``print`` per line, Python's block
buffering on a pipe), then writes how long that took to ``TIMES/<job><index>.json``; with
``--to FILE`` the same lines go to a file instead (the ``cat``-into-a-file baseline). A ps
exits at once. Used by :mod:`bench.controller.pipe` only."""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

LINE = "x" * 80
#: Lines timed together: the longest such block is how long the writer was blocked at worst.
BLOCK = 10_000


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("job")
    parser.add_argument("index", type=int)
    parser.add_argument("--lines", type=int, required=True)
    parser.add_argument("--times", type=Path, required=True)
    parser.add_argument("--to", type=Path)
    args = parser.parse_args()
    if args.job == "ps":
        return
    out = args.to.open("w") if args.to else sys.stdout
    start = last = time.perf_counter()
    longest = 0.0  # the longest time BLOCK lines took: how long the writer was held up
    for n in range(args.lines):
        out.write(f"{args.index:02d} {n:012d} {LINE}\n")  # 100 bytes with the newline
        if n % BLOCK == BLOCK - 1:
            now = time.perf_counter()
            longest, last = max(longest, now - last), now
    out.flush()
    took = time.perf_counter() - start
    args.times.mkdir(parents=True, exist_ok=True)
    record = json.dumps({"lines": args.lines, "seconds": took, "longest_block": longest})
    (args.times / f"{args.job}{args.index}.json").write_text(record)


if __name__ == "__main__":
    main()
