"""A task that prints a line every 0.1 s: ``--ticks N`` of them then exits 0 (0: until
SIGTERM, when it says its last words and exits 0); with ``--quiet-after N`` it goes silent
after N lines. A ps exits at once."""

import argparse
import signal
import sys
import time

parser = argparse.ArgumentParser()
parser.add_argument("job")
parser.add_argument("--ticks", type=int, default=0)
parser.add_argument("--quiet-after", type=int, default=0, help="then print nothing (a pipe's EOF "
                    "never reaches a task that neither reads nor writes)")
args = parser.parse_args()


def last_words(signum: int, frame: object) -> None:
    print("LAST WORDS", flush=True)
    sys.exit(0)


signal.signal(signal.SIGTERM, last_words)
if args.job == "ps":
    sys.exit(0)
tick = 0
while not args.ticks or tick < args.ticks:
    tick += 1
    if not args.quiet_after or tick <= args.quiet_after:
        print(f"tick {tick}", flush=True)
    time.sleep(0.1)
