"""Before a run starts: check every fixed port and reserve the ``auto`` ones, on each
task's host, so that a port in use is reported (with its holder) before anything starts."""

from __future__ import annotations

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

    problems: list[PortProblem | str] = []
    for specs in by_host.values():
        try:
            problems += await launcher.check_ports(config.host_of(specs[0]),
                                                   [s.port for s in specs if s.port is not None])
        except LaunchError as exc:
            problems.append(str(exc))
    if problems:
        raise PreflightError(problems)

    ports: dict[str, int] = {}
    reservations: dict[str, PortReservation] = {}
    try:
        for specs in by_host.values():
            fixed = frozenset(s.port for s in specs if s.port is not None)
            auto = [s for s in specs if s.port is None]
            # Fixed ports are free now but will be taken by their tasks: never hand them out.
            held = await launcher.free_ports(config.host_of(specs[0]), len(auto), fixed) if auto else []
            for spec, reservation in zip(auto, held, strict=True):
                reservations[spec.name] = reservation
            for spec in specs:
                ports[spec.name] = spec.port if spec.port is not None else reservations[spec.name].port
    except LaunchError as exc:
        for reservation in reservations.values():
            reservation.release()
        raise PreflightError([str(exc)]) from exc
    return ports, reservations
