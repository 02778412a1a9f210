"""Checks what the README's first command printed (CI): the run succeeded, trained to its
target, and the controller warned about nothing (a warm start that is off, a host it could
not reach, a bare logger line...). Lines of the tasks' own output are theirs, not checked.

Usage: python .ci/check_first_run.py OUTPUT_FILE"""

from __future__ import annotations

import re
import sys

TASK_LINE = re.compile(r"^(ps|worker|chief|evaluator|master)\d+\s*\| ")
STEPS = re.compile(r"^\s+steps\s+(\d+) / (\d+)\s*$")


def problems(text: str) -> list[str]:
    """What is wrong with the run's output; empty if nothing."""
    found = []
    lines = text.splitlines()
    if "tfdist  | run succeeded" not in lines:
        found.append("no 'run succeeded' line")
    steps = [STEPS.match(line) for line in lines]
    done = [(int(m.group(1)), int(m.group(2))) for m in steps if m]
    if not done:
        found.append("no 'steps N / TARGET' line in the summary")
    elif done[-1][0] < done[-1][1]:
        found.append(f"trained {done[-1][0]} of {done[-1][1]} steps")
    for line in lines:
        if not TASK_LINE.match(line) and re.search(r"warn|traceback|error", line, re.IGNORECASE):
            found.append(f"the controller printed: {line.strip()}")
    return found


def main(argv: list[str]) -> int:
    with open(argv[0], encoding="utf-8", errors="replace") as f:
        text = f.read()
    found = problems(text)
    for problem in found:
        print(f"check_first_run: {problem}", file=sys.stderr)
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
