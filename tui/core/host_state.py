"""Each remote host's state, as one declared state machine: its preparation (waiting,
connecting, preparing, then ready or failed) and, once ready, its reach while a run is on
(unreachable: its link's beats stopped, its tasks keep running within their lease; lost: past
the lease for good, its tasks have stopped themselves). What moves a host between them is
:data:`TRANSITIONS`; :class:`HostReach` is how the supervisor tells a change of reach."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from enum import Enum

from tui.launch.host_steps import HostPhase


class HostState(Enum):
    """Where a remote host is, as both front ends show it."""

    WAITING = "waiting"
    CONNECTING = "connecting"
    PREPARING = "preparing"
    READY = "ready"
    FAILED = "failed"
    UNREACHABLE = "unreachable"
    LOST = "lost"

    @property
    def settled(self) -> bool:
        """Its preparation is over (whatever came of it)."""
        return self not in (HostState.WAITING, HostState.CONNECTING, HostState.PREPARING)

    @classmethod
    def of(cls, phase: HostPhase) -> HostState:
        """The state a launcher's preparation step puts a host in."""
        return cls(phase.value)


_PREPARATION = frozenset({HostState.WAITING, HostState.CONNECTING, HostState.PREPARING,
                          HostState.READY, HostState.FAILED})

#: Every move a host may make. Preparation goes back and forth among its steps (the search
#: for earlier runs' tasks connects a host before its turn comes) and a new run prepares
#: every host again; only a ready host can stop answering, and only an unreachable one is
#: lost; a lost host is ready again once the controller has reconnected to it.
TRANSITIONS: dict[HostState, frozenset[HostState]] = {
    HostState.WAITING: _PREPARATION,
    HostState.CONNECTING: _PREPARATION,
    HostState.PREPARING: _PREPARATION,
    HostState.READY: _PREPARATION | {HostState.UNREACHABLE},
    HostState.FAILED: _PREPARATION,
    HostState.UNREACHABLE: frozenset({HostState.UNREACHABLE, HostState.READY, HostState.LOST}),
    HostState.LOST: _PREPARATION | {HostState.LOST},
}


def can_move(old: HostState, new: HostState) -> bool:
    """Whether a host in ``old`` may go to ``new``."""
    return new in TRANSITIONS[old]


@dataclass(frozen=True, kw_only=True)
class HostReach:
    """The supervisor's word on a ready host while a run is on: it stopped answering
    (UNREACHABLE), answers again (READY), or is past its lease for good (LOST); ``reason``
    says what the controller saw; ``heard``: when it last answered (wall time), if known."""

    host: str
    state: HostState
    reason: str = ""
    heard: float | None = None
    t: float = field(default_factory=time.time)
