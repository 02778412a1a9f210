"""The pipes a local task writes its output into, made wide.

A pipe holds 64 KiB by default: about 650 lines of 100 bytes, under a millisecond of a task
printing as fast as Python can. Whenever the controller is off the CPU longer than that (a
busy machine takes it away for several milliseconds at a time), the task blocks in
``write``. With room for a mebibyte the task keeps writing through such a pause, and the
controller then takes the backlog in a few reads (measured in ``bench.controller.pipe``: the writer's
longest block of 10,000 lines).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from pathlib import Path

#: What a task's output pipe is widened to, when the system allows it (Linux caps a user's
#: pipes at /proc/sys/fs/pipe-max-size, 1 MiB by default).
PIPE_BYTES = 1 << 20
#: ``F_SETPIPE_SZ`` (Linux; the fcntl module names it from Python 3.10 on some builds only).
_F_SETPIPE_SZ = getattr(fcntl, "F_SETPIPE_SZ", 1031)
_MAX_SIZE = Path("/proc/sys/fs/pipe-max-size")


def output_pipe() -> tuple[int, int]:
    """A new pipe (read end, write end; neither inherited by other children) widened to
    :data:`PIPE_BYTES` where the system allows, else as wide as it is."""
    read_end, write_end = os.pipe()
    widen(write_end)
    return read_end, write_end


def widen(fd: int) -> None:
    """Make the pipe of ``fd`` hold up to :data:`PIPE_BYTES` (no error if it cannot)."""
    try:
        allowed = int(_MAX_SIZE.read_text())
    except (OSError, ValueError):
        allowed = PIPE_BYTES
    with contextlib.suppress(OSError):  # not Linux, not a pipe, over the user's pipe quota
        fcntl.fcntl(fd, _F_SETPIPE_SZ, min(PIPE_BYTES, allowed))

