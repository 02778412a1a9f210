"""A user's ``upload:`` folder on the remote hosts: one copy per content,
``<workdir>/<name>-<digest>`` (:func:`tui.launch.ssh.deploy.deploy`), and no pile of old ones.

Each edit of the folder makes a new copy, and each used to stay forever (a 200 MB folder
edited ten times left 2 GB). Whenever a controller places the current copy on a host it also
removes that folder's earlier copies (same name) that are not in use: no live process has its
working directory in one (every task runs in its copy) and no controller marked it used in the
last :data:`UNUSED_FOR` seconds (one may have just found it and be about to start tasks in it).
A controller marks its copy used when it places it, and again at a task's start when it last
did so more than :data:`RECHECK` seconds ago; a copy removed meanwhile is uploaded again. The
work on the host is one snippet, :mod:`tui.launch.snippets.copies`."""

from __future__ import annotations

import asyncio
import logging
import posixpath
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from tui.launch.errors import HostError
from tui.launch.package import FolderPackage, upload_package
from tui.launch.ssh import deploy
from tui.launch.ssh.remote_host import RemoteHost

log = logging.getLogger(__name__)

#: A copy marked used less than this long ago is kept, in use or not.
UNUSED_FOR = 600.0
#: How long a controller trusts a copy it placed before it checks again (and marks it used):
#: well under :data:`UNUSED_FOR`, so no other controller removes a copy this one trusts.
RECHECK = UNUSED_FOR / 3


@dataclass
class _Placed:
    at: float  # time.monotonic() when placing started
    task: asyncio.Task[deploy.Deployment]


class UploadCopies:
    """The copies of one ``upload:`` folder (without the paths in ``exclude``) on each host."""

    def __init__(self, folder: Path, exclude: tuple[Path, ...] = ()) -> None:
        self._folder = folder
        self._exclude = exclude
        self._placed: dict[str, _Placed] = {}  # by host and digest

    async def ensure(self, host: RemoteHost, workdir: str) -> deploy.Deployment:
        """The folder as it is now, on ``host`` in ``workdir`` (absolute): placed once per
        content (a relaunch after an edit uploads the new files), checked again after
        :data:`RECHECK` seconds. Raises :class:`HostError` (DEPLOY_FAILED)."""
        package = self.package()
        key = f"{host.spec.name}/{package.digest}"
        placed = self._placed.get(key)
        now = time.monotonic()
        if placed is None or _failed(placed.task) or (placed.task.done() and now - placed.at > RECHECK):
            placed = _Placed(now, asyncio.create_task(self._place(host, workdir, package),
                                                      name=f"upload to {host.spec.name}"))
            self._placed[key] = placed
        return await asyncio.shield(placed.task)

    def package(self) -> FolderPackage:
        """The folder as it is now (hashed again only when a file in it changed)."""
        return upload_package(self._folder, self._exclude)

    async def _place(self, host: RemoteHost, workdir: str, package: FolderPackage) -> deploy.Deployment:
        # Marked used and the earlier copies removed first: when the copy is there already
        # (the usual case), that one snippet is all it takes.
        answer = await _tidy(host, workdir, package)
        if answer is not None and answer.get("current") is True:
            return deploy.Deployment(posixpath.join(workdir, package.dirname), uploaded=False)
        done = await deploy.deploy(await host.first_connection(), host.spec, workdir, package)
        log.info("host %s: %s in %s (%s)", host.spec.name, package.name, done.path,
                 "uploaded" if done.uploaded else "already there")
        return done


async def _tidy(host: RemoteHost, workdir: str, package: FolderPackage) -> Mapping[str, object] | None:
    """Run the copies snippet: what it did, or None if it could not run (then nothing was
    removed, and the copy is placed as if it were not known to be there)."""
    try:
        answer = await host.run_snippet("copies", [workdir, package.name, package.dirname, f"{UNUSED_FOR:g}"])
    except HostError as exc:
        log.warning("host %s: earlier copies of %s not looked at: %s", host.spec.name, package.name,
                    exc.detail)
        return None
    if not isinstance(answer, Mapping):
        return None
    removed = answer.get("removed")
    if isinstance(removed, list) and removed:
        log.info("host %s: removed earlier copies of %s no run uses: %s", host.spec.name, package.name,
                 ", ".join(map(str, removed)))
    if answer.get("proc") is False:
        log.info("host %s: no /proc, so earlier copies of %s are kept", host.spec.name, package.name)
    return answer


def _failed(task: asyncio.Task[deploy.Deployment]) -> bool:
    return task.done() and (task.cancelled() or task.exception() is not None)
