"""The controller's one model of the remote hosts: each host's preparation as the launcher
reports its steps (:mod:`tui.launch.host_steps`) and, while a run is on, its reach as the
supervisor tells it (:class:`~tui.core.host_state.HostReach`), folded into
:class:`HostsProgress` events that both front ends (and ``--json``) show as they are. Every
move follows :data:`tui.core.host_state.TRANSITIONS`.

A cluster of many hosts makes many steps a second; a person needs the picture, not each
step. The first picture goes out at once (so a start is never silent), a failure, a change
of reach and the last host settling at once too, anything else at most every
:data:`INTERVAL` seconds. A step costs the same however many hosts there are; only a picture
going out (a few a second at most) goes over every host.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

from tui.config.cluster import ClusterConfig, HostKind
from tui.core.events import ControllerEvent, HostRow, HostsProgress
from tui.core.host_state import HostReach, HostState, can_move
from tui.launch.host_steps import HostPool, HostStep

#: The shortest time between two pictures of the hosts while they change.
INTERVAL = 0.5


class HostBoard:
    """Every remote host of ``config`` that an SSH launcher prepares, and where it is;
    ``publish`` gets each new picture."""

    def __init__(self, config: ClusterConfig, publish: Callable[[HostsProgress], None],
                 interval: float = INTERVAL) -> None:
        self._publish = publish
        self._interval = interval
        tasks: dict[str, list[str]] = {}
        addresses: dict[str, str] = {}
        for task in config.tasks:
            host = config.host_of(task)
            if host.launch_kind is HostKind.SSH:
                tasks.setdefault(host.name, []).append(task.name)
                addresses[host.name] = f"{host.address}:{host.port}" if host.port != 22 else host.address
        self._rows = {name: HostRow(name, addresses[name], HostState.WAITING, "", tuple(names))
                      for name, names in tasks.items()}
        self._unsettled = len(self._rows)  # hosts whose preparation is not over
        self._last = 0.0
        self._pending: asyncio.TimerHandle | None = None
        self._begun = False

    @property
    def rows(self) -> tuple[HostRow, ...]:
        """Every host, in config order."""
        return tuple(self._rows.values())

    def begin(self) -> None:
        """Show the hosts now, before the first is contacted (once: a front end that showed
        them before its session was made has begun already)."""
        if self._rows and not self._begun:
            self._begun = True
            self._send()

    def publish_to(self, publish: Callable[[HostsProgress], None]) -> None:
        """Send every later picture to ``publish`` (the supervisor's, once there is one)."""
        self._publish = publish

    def step(self, step: HostStep) -> None:
        """The launcher's sink (:data:`tui.launch.host_steps.StepSink`)."""
        state = HostState.of(step.phase)
        row = self._rows.get(step.host)
        if row is None or (row.state is state and row.detail == step.detail) \
                or not can_move(row.state, state):
            return
        self._put(row, state, step.detail, step.pool or row.pool, time.time())
        settled = self._unsettled == 0
        if state is HostState.FAILED or settled or time.monotonic() - self._last >= self._interval:
            self._send()
        elif self._pending is None:
            delay = self._interval - (time.monotonic() - self._last)
            self._pending = asyncio.get_running_loop().call_later(max(0.0, delay), self._send)

    def handle(self, event: ControllerEvent) -> None:
        """The supervisor's sink: a host's change of reach is shown at once."""
        if type(event) is not HostReach:
            return  # (nearly every event, and none of the others matters here)
        row = self._rows.get(event.host)
        if row is None or row.state is event.state or not can_move(row.state, event.state):
            return
        heard = event.t if event.state is HostState.READY else (event.heard or row.heard)
        self._put(row, event.state, event.reason, row.pool, heard)
        self._send()

    def _put(self, row: HostRow, state: HostState, detail: str, pool: HostPool | None,
             heard: float | None) -> None:
        self._unsettled += int(row.state.settled) - int(state.settled)
        self._rows[row.name] = HostRow(row.name, row.address, state, detail, row.tasks,
                                       pool, heard)

    def _send(self) -> None:
        if self._pending is not None:
            self._pending.cancel()
            self._pending = None
        self._last = time.monotonic()
        self._publish(HostsProgress(hosts=self.rows))
