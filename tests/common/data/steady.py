"""A task that prints a line every 0.1 s: ``--ticks N`` of them then exits 0 (0: until
SIGTERM, when it says its last words and exits 0). A ps exits at once."""

import argparse
import signal
import sys
import time

parser = argparse.ArgumentParser()
parser.add_argument("job")
parser.add_argument("--ticks", type=int, default=0)
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
    print(f"tick {tick}", flush=True)
    time.sleep(0.1)
