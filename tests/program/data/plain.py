"""A program with nothing for the shim to hook: no TensorFlow, no server. It prints its
progress in its own words and exits 0 (the ps too, at once)."""

import argparse
import os
import time

parser = argparse.ArgumentParser()
parser.add_argument("--job", required=True)
parser.add_argument("--index", type=int, required=True)
parser.add_argument("--steps", type=int, default=5)
args = parser.parse_args()
print("cwd", os.getcwd(), flush=True)
if args.job == "worker":
    for step in range(1, args.steps + 1):
        print(f"Step: {step} ({args.job}{args.index}), Cost: {1.0 / step:.3f}", flush=True)
        time.sleep(0.05)
print("finished", flush=True)
