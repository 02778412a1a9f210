"""A task's stdin watch (trainer.lifecycle.watch_parent): EOF ends it, and what it says of
why tells a stop on purpose (the controller wrote ``stop`` first) from a controller gone."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from trainer import protocol

REPO = Path(__file__).resolve().parents[2]
TASK = "from trainer import lifecycle; lifecycle.watch_parent('yes'); import time; time.sleep(60)"


@pytest.mark.parametrize(("first", "said"), [
    (protocol.STOP_LINE + "\n", "stdin closed (the controller stops it); exiting"),
    ("", "stdin closed (the controller went away); exiting"),
])
def test_stdin_eof_ends_the_task_and_says_why(first: str, said: str) -> None:
    # Tasks stopped on purpose for a cluster restart said "the controller went away" while
    # the controller was alive.
    result = subprocess.run([sys.executable, "-c", TASK], input=first.encode(), capture_output=True,
                            cwd=REPO, timeout=60)
    assert result.returncode == protocol.EXIT_ORPHANED
    assert said in result.stderr.decode(), result.stderr
