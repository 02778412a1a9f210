"""Launchers by kind: what a ``kind:`` of host means for a task's plan (interpreter, working
folder, where its run's files go) and which launcher starts it.

Adding a way to start tasks (a batch scheduler, a container) is one :class:`Kind` entry here
plus its launcher; :mod:`tui.plan` and :class:`tui.launch.router.Router` take everything
from this registry. Importing this module imports no launcher: each is made on first use
(asyncssh alone takes half a second to import).
"""

from __future__ import annotations

import posixpath
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tui.config import HostKind, HostSpec
from tui.launch.base import Launcher

#: The run directory's subdirectory for checkpoints, and for TensorBoard summaries (one
#: subfolder per worker for the built-in trainer), unless settings say otherwise; the same
#: for the built-in trainer and users' ``{summary_dir}``, so ``tensorboard --logdir runs``
#: shows every run side by side.
CHECKPOINTS = "checkpoints"
SUMMARIES = "tensorboard"


@dataclass(frozen=True)
class Kind:
    """One kind of host.

    ``local_files``: paths in a plan are this machine's (the run directory is used as it is);
    otherwise they are the host's, relative to the task's working folder.
    ``shares_interpreter``: with no ``python:`` written for the host, tasks use the
    controller's own interpreter (which can import the trainer).
    ``sets_pythonpath``: the plan puts the trainer's folder on PYTHONPATH; otherwise the
    launcher does, once it knows where it deployed the trainer.
    """

    kind: HostKind
    local_files: bool
    shares_interpreter: bool
    sets_pythonpath: bool
    make_launcher: Callable[[dict[str, Any]], Launcher]

    def python(self, host: HostSpec, local_python: str) -> str:
        """The interpreter for ``python`` commands on ``host``: its ``python:`` if hosts.yaml
        names one; else the controller's own (``local_python``) where the kind shares it, so a
        localhost entry that only sets ``env:`` does not switch to whatever python3 is on PATH;
        else ``python3`` from the host's PATH."""
        return (host.python or local_python) if self.shares_interpreter else host.interpreter

    def cwd(self, host: HostSpec, folder: str | None = None) -> str | None:
        """The task's working folder: ``folder`` (relative to the host's workdir on a
        remote host) if given; else the host's workdir, or None (inherit) on this machine."""
        if self.local_files:
            return folder
        return posixpath.join(host.workdir, folder) if folder else host.workdir

    def run_dir(self, run_dir: Path, run_id: str, *, from_subfolder: bool = False) -> str:
        """The run's directory as a task on this kind of host names it: the local run
        directory, or ``runs/<run id>`` under the host's workdir, written relative to the
        task's working folder (``from_subfolder``: it runs in a folder of the workdir)."""
        if self.local_files:
            return str(run_dir.resolve())
        return posixpath.join("..", "runs", run_id) if from_subfolder else posixpath.join("runs", run_id)


def _local(options: dict[str, Any]) -> Launcher:
    from tui.launch.local import LocalLauncher

    return LocalLauncher(**options)


def _ssh(options: dict[str, Any]) -> Launcher:
    from tui.launch.ssh import SSHLauncher

    return SSHLauncher(**options)


KINDS: dict[HostKind, Kind] = {
    HostKind.LOCAL: Kind(HostKind.LOCAL, local_files=True, shares_interpreter=True,
                         sets_pythonpath=True, make_launcher=_local),
    HostKind.SSH: Kind(HostKind.SSH, local_files=False, shares_interpreter=False,
                       sets_pythonpath=False, make_launcher=_ssh),
}


def kind_of(host: HostSpec) -> Kind:
    """The registry entry for ``host``'s kind (``kind:`` in hosts.yaml, else inferred)."""
    return KINDS[host.launch_kind]
