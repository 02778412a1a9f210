"""Before a run starts: check every fixed port and reserve the ``auto`` ones, on each
task's host, so that a port in use is reported (with its holder) before anything starts."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from tui.config.cluster import ClusterConfig, TaskSpec
from tui.launch.base import Launcher, LaunchError, PortProblem, PortReservation


class PreflightError(Exception):
    """The run cannot start: ports in use, a host the launcher cannot reach, no run
    directory. Nothing was started. ``problems`` are one line each, e.g.
    ``localhost:2222 is in use by pid 4242 (python3)``."""

    def __init__(self, problems: Sequence[PortProblem | str]) -> None:
        self.problems = tuple(str(p) for p in problems)
        super().__init__("; ".join(self.problems))

    def __reduce__(self) -> tuple[type[PreflightError], tuple[tuple[str, ...]]]:
        # Pickled from the app's core process to the app: rebuilt from the problems, not
        # from ``args`` (the joined text, which would be taken for a sequence of problems,
        # one a character: "l; o; c; a; l; h; ...").
        return type(self), (self.problems,)


async def resolve_ports(config: ClusterConfig, launcher: Launcher
                        ) -> tuple[dict[str, int], dict[str, PortReservation]]:
    """Every task's port by task name, and the reservations holding the ``auto`` ones
    (release each right before its task starts). Raises :class:`PreflightError`."""
    by_host: dict[str, list[TaskSpec]] = {}
    for spec in config.tasks:
        by_host.setdefault(spec.host, []).append(spec)

    # Every host at once: each check and reservation is a round trip to its host (on SSH a
    # remote Python's start), which one host after another made minutes on tens of hosts.
    hosts = list(by_host.values())
    checked = await asyncio.gather(*(launcher.check_ports(config.host_of(specs[0]),
                                                          [s.port for s in specs if s.port is not None])
                                     for specs in hosts), return_exceptions=True)
    problems: list[PortProblem | str] = []
    for found in checked:
        problems += _problems(found)
    if problems:
        raise PreflightError(problems)

    async def hold(specs: list[TaskSpec]) -> list[PortReservation]:
        auto = sum(1 for s in specs if s.port is None)
        # Fixed ports are free now but will be taken by their tasks: never hand them out.
        fixed = frozenset(s.port for s in specs if s.port is not None)
        return await launcher.free_ports(config.host_of(specs[0]), auto, fixed) if auto else []

    held = await asyncio.gather(*(hold(specs) for specs in hosts), return_exceptions=True)
    reservations: dict[str, PortReservation] = {}
    for specs, got in zip(hosts, held, strict=True):
        if not isinstance(got, BaseException):
            reservations.update(zip((s.name for s in specs if s.port is None), got, strict=True))
    failed = [got for got in held if isinstance(got, BaseException)]
    if failed:
        for reservation in reservations.values():
            reservation.release()
        raise PreflightError([problem for error in failed for problem in _problems(error)])
    ports = {spec.name: spec.port if spec.port is not None else reservations[spec.name].port
             for spec in config.tasks}
    return ports, reservations


def _problems(answer: list[PortProblem] | list[PortReservation] | BaseException) -> list[PortProblem | str]:
    """A host's port problems, or its launcher's error as one problem (anything else it
    raised is raised on: a bug, or the start being cancelled)."""
    if isinstance(answer, LaunchError):
        return [str(answer)]
    if isinstance(answer, BaseException):
        raise answer
    return [a for a in answer if isinstance(a, PortProblem)]
