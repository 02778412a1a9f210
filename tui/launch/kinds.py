"""Launchers by kind: which launcher starts the tasks of each ``kind:`` of host.

Adding a way to start tasks (a batch scheduler, a container) is one entry here plus its
launcher, and one :class:`tui.program.hostkind.Kind` entry saying what the kind means for a
task's plan; :class:`tui.launch.router.Router` takes its launchers from this registry.
Importing this module imports no launcher: each is made on first use (asyncssh alone takes
half a second to import).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tui.config.cluster import HostKind
from tui.launch.base import Launcher


def _local(options: dict[str, Any]) -> Launcher:
    from tui.launch.local.launcher import LocalLauncher

    return LocalLauncher(**options)


def _ssh(options: dict[str, Any]) -> Launcher:
    from tui.launch.ssh.launcher import SSHLauncher

    return SSHLauncher(**options)


def _slurm(options: dict[str, Any]) -> Launcher:
    from tui.launch.slurm.launcher import SlurmLauncher

    return SlurmLauncher(**options)


#: The launcher factory of each kind of host (its options from the command line).
LAUNCHERS: dict[HostKind, Callable[[dict[str, Any]], Launcher]] = {
    HostKind.LOCAL: _local,
    HostKind.SSH: _ssh,
    HostKind.SLURM: _slurm,
}
