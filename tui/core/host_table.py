"""The Hosts view's model, the same for both front ends: one :class:`HostLine` per remote
host from the controller's picture of the hosts (:class:`~tui.core.events.HostsProgress`),
with the CPU and memory of its tasks (:class:`~tui.core.usage.UsageSample`) and the traffic of
its ps tasks (:class:`~tui.core.traffic.TrafficUpdate`) where the controller measured them: a
figure it does not know is None, and shown as nothing. :class:`StateChanges` picks the hosts
whose state moved since the last picture (headless prints a line for each)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import Enum

from tui.core.events import HostRow, HostsProgress
from tui.core.host_state import HostState
from tui.core.traffic import TrafficUpdate
from tui.core.usage import UsageSample
from tui.launch.host_steps import HostPool


@dataclass(frozen=True)
class HostLine:
    """One host's row: what it is and where it is, and its figures where known. ``cpu_percent``
    (percent of one core, summed over its tasks) and ``rss_bytes``: its tasks' usage;
    ``in_per_sec``/``out_per_sec``: bytes/s its ps tasks received and sent (None on a host
    without a ps, whose traffic is not measured); ``heard``: wall time it last answered."""

    name: str
    address: str
    state: HostState
    detail: str
    tasks: tuple[str, ...]
    pool: HostPool | None
    heard: float | None
    cpu_percent: float | None = None
    rss_bytes: int | None = None
    in_per_sec: float | None = None
    out_per_sec: float | None = None


class HostSort(Enum):
    """The column the Hosts view is sorted by (a key cycles them in this order)."""

    NAME = "host"
    STATE = "state"
    TASKS = "tasks"
    CPU = "cpu"
    MEMORY = "memory"
    TRAFFIC = "traffic"
    HEARD = "last heard"

    def next(self) -> HostSort:
        members = list(HostSort)
        return members[(members.index(self) + 1) % len(members)]


#: Out-of-the-ordinary states first when sorting by state: what needs a look comes on top.
_STATE_RANK = {HostState.LOST: 0, HostState.UNREACHABLE: 1, HostState.FAILED: 2, HostState.CONNECTING: 3,
               HostState.PREPARING: 4, HostState.WAITING: 5, HostState.READY: 6}


def host_lines(progress: HostsProgress | None, usage: UsageSample | None = None,
               traffic: TrafficUpdate | None = None) -> list[HostLine]:
    """Every host of ``progress``, in config order, with the figures known of it."""
    if progress is None:
        return []
    per_ps: dict[str, tuple[float, float]] = {}
    if traffic is not None and traffic.sample is not None:
        per_ps = {ps.task: (ps.received_per_sec, ps.sent_per_sec) for ps in traffic.sample.ps}
    return [_line(row, usage, per_ps) for row in progress.hosts]


def _line(row: HostRow, usage: UsageSample | None, per_ps: dict[str, tuple[float, float]]) -> HostLine:
    used = usage.hosts.get(row.name) if usage is not None else None
    heard = row.heard
    if usage is not None and (answered := usage.heard.get(row.name)) is not None:
        heard = answered if heard is None else max(heard, answered)
    measured = [per_ps[task] for task in row.tasks if task in per_ps]
    return HostLine(row.name, row.address, row.state, row.detail, row.tasks, row.pool, heard,
                    used.cpu_percent if used is not None else None,
                    used.rss_bytes if used is not None else None,
                    sum(m[0] for m in measured) if measured else None,
                    sum(m[1] for m in measured) if measured else None)


def sort_lines(lines: list[HostLine], by: HostSort) -> list[HostLine]:
    """``lines`` sorted by ``by``: names ascending; figures largest first, unknown last;
    last heard longest ago first (the quiet host on top)."""
    if by is HostSort.NAME:
        return sorted(lines, key=lambda h: counted(h.name))
    if by is HostSort.STATE:
        return sorted(lines, key=lambda h: (_STATE_RANK[h.state], counted(h.name)))
    if by is HostSort.HEARD:
        return sorted(lines, key=lambda h: (h.heard is None, h.heard or 0.0, counted(h.name)))
    figure = {HostSort.TASKS: lambda h: float(len(h.tasks)),
              HostSort.CPU: lambda h: h.cpu_percent,
              HostSort.MEMORY: lambda h: None if h.rss_bytes is None else float(h.rss_bytes),
              HostSort.TRAFFIC: lambda h: None if h.in_per_sec is None
              else h.in_per_sec + (h.out_per_sec or 0.0),
              }[by]
    return sorted(lines, key=lambda h: (figure(h) is None, -(figure(h) or 0.0), counted(h.name)))


def counted(name: str) -> tuple[tuple[int, int | str], ...]:
    """``name``'s sort key as a person counts: h2 before h10 (its digits as a number)."""
    return tuple((0, int(part)) if part.isdigit() else (1, part)
                 for part in re.split(r"(\d+)", name) if part)


#: States of a run's hosts that the hosts' progress line does not tell one by one.
OUT_OF_REACH = frozenset({HostState.UNREACHABLE, HostState.LOST})


class StateChanges:
    """Which hosts moved to another state since the last picture it was shown."""

    def __init__(self) -> None:
        self._states: dict[str, HostState] = {}

    def changed(self, progress: HostsProgress) -> list[tuple[HostRow, HostState | None]]:
        """The hosts of ``progress`` whose state differs from the last picture's, each with
        the state it had then (None: the first picture)."""
        moved = [(row, self._states.get(row.name)) for row in progress.hosts
                 if self._states.get(row.name) is not row.state]
        for row, _ in moved:
            self._states[row.name] = row.state
        return moved

    def reach_lines(self, progress: HostsProgress) -> list[str]:
        """A line for each host that went out of reach or came back since the last picture:
        what the progress line, which counts hosts, does not name (its preparation steps and
        failures it does)."""
        return [state_line(row) for row, before in self.changed(progress)
                if row.state in OUT_OF_REACH or before in OUT_OF_REACH]


def line_text(line: HostLine) -> str:
    """``h3 (10.0.0.4): unreachable: no answer for 6 s; tasks ps0, worker1``: a host's row
    in words, whole (the Hosts view's line for the host under its cursor)."""
    detail = f": {line.detail}" if line.detail else ""
    tasks = f"; tasks {', '.join(line.tasks)}" if line.tasks else "; no tasks"
    return f"{line.name} ({line.address}): {line.state.value}{detail}{tasks}"


def state_line(row: HostRow) -> str:
    """``host h3 (10.0.0.4): unreachable: no answer for 6 s``: one host's state, as headless
    prints it when it changes."""
    detail = f": {row.detail}" if row.detail else ""
    return f"host {row.name} ({row.address}): {row.state.value}{detail}"
