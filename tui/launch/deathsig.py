"""The kernel's parent-death signal for task processes: a task, a warm pool and a pool's
children die with the process that started them, even when that process is SIGKILLed."""

from __future__ import annotations

import ctypes
import signal
import sys
from collections.abc import Callable


def die_with_parent() -> Callable[[], None] | None:
    """A pre-exec hook that makes the kernel SIGKILL the task when the controller dies, even
    a SIGKILLed controller and even a stopped task (a stopped process does not see its
    stdin close, and keeps a SIGTERM pending until continued). Resolved once, here, so the
    forked child only calls into libc."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    pr_set_pdeathsig = 1

    def hook() -> None:
        prctl(pr_set_pdeathsig, int(signal.SIGKILL), 0, 0, 0)

    return hook


#: The hook itself (None where the kernel has no parent-death signal).
DIE_WITH_PARENT = die_with_parent()
