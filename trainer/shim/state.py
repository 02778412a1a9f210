"""What the shim knows about the task it runs: its role, the cluster, progress so far, and
the one-warning-per-hook rule."""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from trainer import lifecycle

T = TypeVar("T")

#: Set in the task's environment once the role is known, for ``tfdist_report``.
TASK_ENV = "TFDIST_TASK"


@dataclass
class TaskState:
    """The task as the shim has learnt it. ``role`` is ``ps``, ``worker``, ``chief`` or
    ``evaluator``; ``cluster`` maps each job to its addresses."""

    role: str = "worker"
    index: int = 0
    cluster: dict[str, list[str]] = field(default_factory=dict)
    role_known: bool = False
    ready_sent: bool = False
    placement_sent: bool = False
    initialized_sent: bool = False
    global_step: int = 0
    #: What runs, for ``placement``'s model: the script's file name or ``-m``'s module.
    program: str = "program"
    end: threading.Event = field(default_factory=threading.Event)
    warned: set[str] = field(default_factory=set)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def learn(self, role: str, index: int, cluster: dict[str, list[str]] | None = None) -> None:
        """Record the task's role (from its ``Server``), and the cluster when given."""
        self.role, self.index, self.role_known = role, index, True
        if cluster:
            self.cluster = cluster
        os.environ[TASK_ENV] = f"{role}:{index}"

    @property
    def num_ps(self) -> int:
        return len(self.cluster.get("ps", []))


def from_tf_config(text: str | None) -> TaskState:
    """The task as ``TF_CONFIG`` describes it; defaults (worker 0, no cluster) when it is
    absent or unreadable: the ``Server(...)`` call may still tell."""
    state = TaskState()
    try:
        config = json.loads(text or "{}")
        cluster = config.get("cluster") or {}
        state.cluster = {str(job): [str(a) for a in addresses]
                         for job, addresses in cluster.items() if isinstance(addresses, list)}
        task = config.get("task") or {}
        if "type" in task:
            # Not learn(): tfdist_report reads TF_CONFIG itself; the environment is set
            # only for what the Server call tells.
            state.role, state.index = str(task["type"]), int(task.get("index", 0))
            state.role_known = True
    except (ValueError, TypeError, AttributeError):
        pass
    return state


STATE = from_tf_config(os.environ.get("TF_CONFIG"))


def warn_once(what: str, exc: BaseException) -> None:
    """The one line a failed hook prints; later failures of the same hook stay quiet."""
    with STATE.lock:
        if what in STATE.warned:
            return
        STATE.warned.add(what)
    reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    print(f"tfdist shim: {what} failed: {reason} (the program runs on)", file=sys.stderr,
          flush=True)


def soft(what: str, action: Callable[[], T]) -> T | None:
    """Run one of the shim's own actions; on any failure warn once and return None."""
    try:
        return action()
    except Exception as exc:
        warn_once(what, exc)
        return None


def seconds_since_start() -> float:
    return round(time.time() - lifecycle.PROCESS_START, 3)


def as_dict(value: Any) -> dict[str, list[str]]:
    """A ClusterSpec's jobs as ``{job: [address, ...]}`` (sparse jobs: in index order)."""
    jobs = value.as_dict()
    out: dict[str, list[str]] = {}
    for job, addresses in jobs.items():
        if isinstance(addresses, dict):
            out[job] = [addresses[i] for i in sorted(addresses)]
        else:
            out[job] = list(addresses)
    return out
