"""The controller's one model of the remote hosts: each host's preparation as the launcher
reports its steps (:mod:`tui.launch.host_steps`), folded into :class:`HostsProgress` events
that both front ends (and ``--json``) show as they are.

A cluster of many hosts makes many steps a second; a person needs the picture, not each
step. The first picture goes out at once (so a start is never silent), a failure and the
last host settling at once too, anything else at most every :data:`INTERVAL` seconds.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

from tui.config.cluster import ClusterConfig, HostKind
from tui.core.events import HostRow, HostsProgress
from tui.launch.host_steps import HostPhase, HostStep

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
        self._rows = {name: HostRow(name, addresses[name], HostPhase.WAITING, "", tuple(names))
                      for name, names in tasks.items()}
        self._last = 0.0
        self._pending: asyncio.TimerHandle | None = None

    @property
    def rows(self) -> tuple[HostRow, ...]:
        """Every host, in config order."""
        return tuple(self._rows.values())

    def begin(self) -> None:
        """Show the hosts now, before the first is contacted."""
        if self._rows:
            self._send()

    def step(self, step: HostStep) -> None:
        """The launcher's sink (:data:`tui.launch.host_steps.StepSink`)."""
        row = self._rows.get(step.host)
        if row is None or (row.state is step.phase and row.detail == step.detail):
            return
        self._rows[step.host] = HostRow(row.name, row.address, step.phase, step.detail, row.tasks)
        settled = all(r.state.settled for r in self._rows.values())
        if step.phase is HostPhase.FAILED or settled or time.monotonic() - self._last >= self._interval:
            self._send()
        elif self._pending is None:
            delay = self._interval - (time.monotonic() - self._last)
            self._pending = asyncio.get_running_loop().call_later(max(0.0, delay), self._send)

    def _send(self) -> None:
        if self._pending is not None:
            self._pending.cancel()
            self._pending = None
        self._last = time.monotonic()
        self._publish(HostsProgress(hosts=self.rows))
