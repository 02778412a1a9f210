"""The kernel's parent-death signal for task processes: a task, a warm pool and a pool's
children die with the process that started them, even when that process is SIGKILLed."""

from __future__ import annotations

import ctypes
import os
import shutil
import signal
import sys
from collections.abc import Callable, Sequence


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


def signal_me_when_parent_dies(signum: int) -> bool:
    """Have the kernel send this process ``signum`` when its parent (the thread that started
    it) ends, however it ends; False where there is no such thing, or the parent went
    while it asked (this process was reparented meanwhile)."""
    if not sys.platform.startswith("linux"):
        return False
    parent = os.getppid()
    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, int(signum), 0, 0, 0)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        return False
    return os.getppid() == parent


#: util-linux's ``setpriv``, where there is one: it sets the parent-death signal and execs the
#: task, so the controller needs no pre-exec hook, and Python can then start the task with
#: vfork instead of copying the controller's whole address space (a fork of the app, 150 MB,
#: took 9.7 ms against 0.8 ms: 64 tasks waited 0.6 s more in the app than headless).
SETPRIV = shutil.which("setpriv") if DIE_WITH_PARENT is not None else None


def dying_with_parent(argv: Sequence[str], path: str | None = None,
                      cwd: str | None = None) -> tuple[list[str], Callable[[], None] | None]:
    """The command line and pre-exec hook that start ``argv`` (with ``path`` the PATH of its
    environment, in ``cwd``) so that it dies with this process: behind ``setpriv --pdeathsig
    KILL`` where there is one, else with the hook. Raises FileNotFoundError or
    PermissionError as starting ``argv`` itself would (setpriv would only print it)."""
    if SETPRIV is None:
        return list(argv), DIE_WITH_PARENT
    program = argv[0]
    if os.sep in program:
        found: str | None = os.path.join(cwd or "", program)
    else:
        found = shutil.which(program, path=path if path is not None else os.defpath)
    if found is None or not os.path.exists(found):
        raise FileNotFoundError(2, "No such file or directory", program)
    if os.path.isdir(found) or not os.access(found, os.X_OK):
        raise PermissionError(13, "Permission denied", program)
    return [SETPRIV, "--pdeathsig", "KILL", "--", *argv], None
