"""Whose run is this? Every task carries its controller's identity in its environment
(:data:`CONTROLLER_ENV`), and every run directory holds a lock that its controller keeps for
the run's life. The start-up sweep uses both to call a task a leftover only when the
controller that started it is gone: a second controller must not stop, or even report as
"earlier", the tasks of a run that is still being controlled.

A pid alone is not an identity (pids are reused), so the controller is named by the machine's
boot id, its pid and its start time; it is alive when this machine booted as that id and a
process with that pid started at that time still runs."""

from __future__ import annotations

import fcntl
import os
from dataclasses import dataclass
from enum import Enum
from functools import cache
from pathlib import Path
from typing import IO

from tui.common.private import private_opener

#: Names the run in each task's environment, so a task (or a test) can tell whose it is.
RUN_ID_ENV = "TFDIST_RUN_ID"
#: In each task's environment: ``<boot id>/<pid>/<start time>`` of its controller.
CONTROLLER_ENV = "TFDIST_CONTROLLER"
#: In each run directory, flock()ed by its controller while the run lasts.
LOCK_FILE = "controller.lock"
#: create_time() is derived from clock ticks since boot; allow for its rounding.
_START_SLACK = 0.05


class Liveness(Enum):
    ALIVE = "alive"
    DEAD = "dead"
    UNKNOWN = "unknown"  # a controller on another machine, without a run directory here


@cache
def boot_id() -> str:
    """This machine's boot id (a new one at every boot); the host name where there is none."""
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return os.uname().nodename


@dataclass(frozen=True)
class ControllerId:
    """One controller process, on one machine, during one boot."""

    boot: str
    pid: int
    started: float

    def __str__(self) -> str:
        return f"{self.boot}/{self.pid}/{self.started:.2f}"

    @classmethod
    def parse(cls, text: str) -> ControllerId | None:
        """The identity written by :meth:`__str__`; None for anything else."""
        parts = text.split("/")
        if len(parts) != 3:
            return None
        try:
            return cls(parts[0], int(parts[1]), float(parts[2]))
        except ValueError:
            return None

    def liveness(self) -> Liveness:
        """Whether this controller still runs, as far as this machine can tell."""
        if self.boot != boot_id():
            return Liveness.UNKNOWN
        import psutil  # (here: a command's first line should not wait for it)

        try:
            process = psutil.Process(self.pid)
            alive = (abs(process.create_time() - self.started) <= _START_SLACK
                     and process.status() != psutil.STATUS_ZOMBIE)
        except psutil.Error:
            return Liveness.DEAD
        return Liveness.ALIVE if alive else Liveness.DEAD


@cache
def this_controller() -> ControllerId:
    """The identity of the running process, as its tasks record it."""
    import psutil

    return ControllerId(boot_id(), os.getpid(), psutil.Process().create_time())


def lock_run(run_dir: Path) -> IO[bytes]:
    """Take the run directory's lock; hold the returned file open for the run's life (the
    kernel drops the lock when the process dies, however it dies). Raises OSError."""
    handle = open(run_dir / LOCK_FILE, "wb", opener=private_opener)  # noqa: SIM115
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        handle.write(f"{this_controller()}\n".encode())
        handle.flush()
    except OSError:
        handle.close()
        raise
    return handle


def run_is_locked(run_dir: Path) -> bool | None:
    """Whether a live controller holds ``run_dir``'s lock; None when there is no lock file."""
    try:
        handle = open(run_dir / LOCK_FILE, "rb")  # noqa: SIM115
    except OSError:
        return None
    with handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        except OSError:
            return None
        return False
