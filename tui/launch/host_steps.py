"""What a launcher tells, host by host, while it prepares a cluster's hosts: each step as it
begins, so that a cluster of many hosts shows which host is where instead of minutes of
silence. The core folds these into its model of the hosts (:mod:`tui.core.hosts`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from typing import Protocol, runtime_checkable


class HostPhase(Enum):
    """Where a host's preparation is. WAITING: its turn has not come (at most
    ``network.hosts_at_once`` hosts are prepared at a time)."""

    WAITING = "waiting"
    CONNECTING = "connecting"
    PREPARING = "preparing"    # probe, upload, resources, lease keeper, warm pool
    READY = "ready"
    FAILED = "failed"

    @property
    def settled(self) -> bool:
        return self in (HostPhase.READY, HostPhase.FAILED)


class HostPool(Enum):
    """Where a prepared host's tasks start from. WARM: a warm pool (TensorFlow imported once)
    was started while it was prepared; COLD: each task starts its own interpreter (``--cold``
    or the host's ``warm: false``); NONE: nothing of the program forks from a pool."""

    WARM = "warm"
    COLD = "cold"
    NONE = "none"


@dataclass(frozen=True)
class HostStep:
    """Host ``host`` entered ``phase``; ``detail`` says which step (``uploading the
    program``) or, for FAILED, why; ``pool``, with READY, where its tasks start from."""

    host: str
    phase: HostPhase
    detail: str = ""
    pool: HostPool | None = None


#: Where a launcher sends its steps (called on the event loop; must not block).
StepSink = Callable[[HostStep], None]


def ignore_step(step: HostStep) -> None:
    """The sink of a launcher nobody listens to."""



@runtime_checkable
class StepReporter(Protocol):
    """A launcher that tells its hosts' steps (the SSH launcher)."""

    on_step: StepSink
